package adapter

import (
	"errors"
	"os"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The shipped files, from this package's directory
// (tools/metrics-adapter/adapter).
const (
	shippedRules = "../../../k8s/overlays/prometheus-adapter/adapter-rules.yaml"
	shippedHPA   = "../../../k8s/base/hpa.yaml"
)

func loadShipped(t *testing.T) []*Metric {
	t.Helper()
	ms, err := LoadFile(shippedRules)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestLoadShippedRules(t *testing.T) {
	ms := loadShipped(t)
	want := []Metric{
		{Name: "battle_latency_seconds_p99", Series: "instance:battle_latency_seconds:p99_1m", NamespaceLabel: "namespace", PodLabel: "pod"},
		{Name: "battle_pressure", Series: "instance:battle_pressure:ratio_1m", NamespaceLabel: "namespace", PodLabel: "pod"},
	}
	if len(ms) != len(want) {
		t.Fatalf("got %d metrics, want %d", len(ms), len(want))
	}
	for i, w := range want {
		g := ms[i]
		if g.Name != w.Name || g.Series != w.Series || g.NamespaceLabel != w.NamespaceLabel || g.PodLabel != w.PodLabel {
			t.Errorf("metric %d: got %s from %s (ns %s, pod %s), want %s from %s (ns %s, pod %s)",
				i, g.Name, g.Series, g.NamespaceLabel, g.PodLabel, w.Name, w.Series, w.NamespaceLabel, w.PodLabel)
		}
	}
}

// The bare config.yaml (what prometheus-adapter's --config reads) gives
// the same metrics as the ConfigMap around it.
func TestLoadBareConfig(t *testing.T) {
	b, err := os.ReadFile(shippedRules)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	ms, err := Load([]byte(cm.Data[ConfigMapKey]))
	if err != nil {
		t.Fatal(err)
	}
	shipped := loadShipped(t)
	if len(ms) != len(shipped) {
		t.Fatalf("got %d metrics, want %d", len(ms), len(shipped))
	}
	for i := range ms {
		a, err := ms[i].Query("ns", []string{"p"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := shipped[i].Query("ns", []string{"p"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ms[i].Name != shipped[i].Name || a != b {
			t.Errorf("metric %d: bare config gives %s %q, the ConfigMap %s %q", i, ms[i].Name, a, shipped[i].Name, b)
		}
	}
}

// Every Pods metric the shipped HPA scales on is served by the shipped rules.
func TestShippedHPAMetricsAreServed(t *testing.T) {
	b, err := os.ReadFile(shippedHPA)
	if err != nil {
		t.Fatal(err)
	}
	var hpa autoscalingv2.HorizontalPodAutoscaler
	if err := yaml.UnmarshalStrict(b, &hpa); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, mi := range NewProvider(loadShipped(t), nil, nil, nil).ListAllMetrics() {
		if mi.GroupResource != podsResource || !mi.Namespaced {
			t.Errorf("%s: want namespaced pods", mi)
		}
		served[mi.Metric] = true
	}
	var n int
	for _, m := range hpa.Spec.Metrics {
		if m.Type != autoscalingv2.PodsMetricSourceType {
			continue
		}
		n++
		if !served[m.Pods.Metric.Name] {
			t.Errorf("HPA metric %q is not served (served: %v)", m.Pods.Metric.Name, served)
		}
	}
	if n != 2 {
		t.Errorf("HPA has %d Pods metrics, want 2", n)
	}
}

const goodRule = `
rules:
  - seriesQuery: 'x_total{namespace!="",pod!=""}'
    resources:
      overrides:
        namespace: {resource: namespace}
        pod: {resource: pod}
    name:
      matches: "^(.*)_total$"
    metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`

func TestLoadDefaults(t *testing.T) {
	ms, err := Load([]byte(goodRule))
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Name != "x" {
		t.Errorf("name %q: with one group and no name.as, want $1 = x", ms[0].Name)
	}
	ms, err = Load([]byte(strings.ReplaceAll(goodRule, `"^(.*)_total$"`, `""`)))
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Name != "x_total" {
		t.Errorf("name %q: with no matches and no as, want the series name", ms[0].Name)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		is             error  // errors.Is, when set
		contains       string // in the message
	}{
		{name: "misspelt field", old: "metricsQuery:", new: "metricQuery:", contains: `unknown field "metricQuery"`},
		{name: "misspelt override field", old: "{resource: pod}", new: "{resourse: pod}", contains: "resourse"},
		{name: "seriesFilters", old: "    name:", new: "    seriesFilters: [{is: x}]\n    name:", is: ErrUnsupported},
		{name: "resources.template", old: "      overrides:", new: "      template: <<.Resource>>\n      overrides:", is: ErrUnsupported},
		{name: "labelValueReplacements", old: "    name:", new: "    labelValueReplacements: [{find: a, replace: b}]\n    name:", is: ErrUnsupported},
		{name: "externalRules", old: "rules:", new: "externalRules: [{seriesQuery: x}]\nrules:", is: ErrUnsupported},
		{name: "discovery by regex", old: `'x_total{namespace!="",pod!=""}'`, new: `'{__name__=~"x_.*"}'`, is: ErrUnsupported},
		{name: "no pod label", old: "        pod: {resource: pod}\n", new: "", is: ErrUnsupported},
		{name: "other resource", old: "{resource: pod}", new: "{resource: service}", is: ErrUnsupported},
		{name: "two pod labels", old: "        pod: {resource: pod}\n", new: "        pod: {resource: pod}\n        pod_name: {resource: pods}\n", contains: "both name resource pod"},
		{name: "name does not match", old: `"^(.*)_total$"`, new: `"^y$"`, contains: "does not match"},
		{name: "two groups without as", old: `"^(.*)_total$"`, new: `"^(x)(_total)$"`, contains: "name.as is needed"},
		{name: "bad regexp", old: `"^(.*)_total$"`, new: `"^(x"`, contains: "name.matches"},
		{name: "template field prometheus-adapter lacks", old: "<<.GroupBy>>", new: "<<.Groups>>", contains: "Groups"},
		{name: "empty query", old: "'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'", new: "'<<if false>>x<<end>>'", contains: "empty"},
		{name: "template syntax", old: "<<.GroupBy>>", new: "<<.GroupBy", contains: "metricsQuery"},
		{name: "duplicate metric", old: "rules:\n", new: "rules:\n  - seriesQuery: x_total\n    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}\n    name: {matches: \"^x\"}\n", contains: "also served by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(goodRule, tc.old) {
				t.Fatalf("%q is not in the rule", tc.old)
			}
			_, err := Load([]byte(strings.Replace(goodRule, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("loaded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("error %q does not say %q", err, tc.contains)
			}
		})
	}
}

func TestLoadConfigMapErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, contains string }{
		{"no config.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: r, namespace: m}\ndata: {other.yaml: x}\n", `no data "config.yaml"`},
		{"misspelt ConfigMap field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: r}\ndatas: {config.yaml: x}\n", "datas"},
		{"not a ConfigMap", "apiVersion: apps/v1\nkind: Deployment\n", `kind "Deployment"`},
		{"no rules", "rules: []\n", "no rules"},
		{"not yaml", "rules: [\n", "decoding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("error %v, want one saying %q", err, tc.contains)
			}
		})
	}
	if _, err := LoadFile("testdata/does-not-exist.yaml"); err == nil {
		t.Error("loaded a missing file")
	}
}
