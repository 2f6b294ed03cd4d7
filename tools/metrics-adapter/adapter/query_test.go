package adapter

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestQueryShippedRules(t *testing.T) {
	ms := loadShipped(t)
	for _, tc := range []struct {
		metric int
		pods   []string
		want   string
	}{
		{0, []string{"battle-7d9-a", "battle-7d9-b", "battle-7d9-c"},
			`max by (pod) ((instance:battle_latency_seconds:p99_1m{namespace="levee",pod=~"battle-7d9-a|battle-7d9-b|battle-7d9-c"} >= 0) or (0 * (instance:battle_latency_seconds:p99_1m{namespace="levee",pod=~"battle-7d9-a|battle-7d9-b|battle-7d9-c"} == bool instance:battle_latency_seconds:p99_1m{namespace="levee",pod=~"battle-7d9-a|battle-7d9-b|battle-7d9-c"})))`},
		{1, []string{"battle-7d9-a"},
			`max by (pod) ((instance:battle_pressure:ratio_1m{namespace="levee",pod="battle-7d9-a"} >= 0) or (0 * (instance:battle_pressure:ratio_1m{namespace="levee",pod="battle-7d9-a"} == bool instance:battle_pressure:ratio_1m{namespace="levee",pod="battle-7d9-a"})))`},
	} {
		got, err := ms[tc.metric].Query("levee", tc.pods, labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s for %v:\n got %s\nwant %s", ms[tc.metric].Name, tc.pods, got, tc.want)
		}
	}
}

func TestQueryTemplateFields(t *testing.T) {
	ms, err := Load([]byte(`
rules:
  - seriesQuery: s
    resources: {overrides: {kubernetes_namespace: {resource: namespace}, kubernetes_pod_name: {resource: pod}}}
    metricsQuery: '<<.Series>>|<<.LabelMatchers>>|<<.GroupBy>>|<<index .GroupBySlice 0>>|<<index .LabelValuesByName "kubernetes_pod_name">>|<<index .LabelValuesByName "tier">>'
  - seriesQuery: d
    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := labels.Parse("tier in (gold,silver),zone=eu,!canary,shard")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ms[0].Query("ns", []string{"a", "b"}, sel)
	if err != nil {
		t.Fatal(err)
	}
	want := `s|canary="",shard!="",tier=~"gold|silver",zone="eu",kubernetes_namespace="ns",kubernetes_pod_name=~"a|b"|kubernetes_pod_name|kubernetes_pod_name|a|b|gold|silver`
	if got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	// The default metricsQuery, and no namespace for a root-scoped ask.
	got, err = ms[1].Query("", []string{"a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `sum(d{pod="a"}) by (pod)`; got != want {
		t.Errorf("default query: got %s, want %s", got, want)
	}
}

func TestQueryMatchers(t *testing.T) {
	m := loadShipped(t)[1]
	for sel, want := range map[string]string{
		"a!=x":          `a!="x"`,
		"a notin (x)":   `a!~"x"`,
		"a notin (x,y)": `a!~"x|y"`,
		"a in (x)":      `a=~"x"`,
		"a==x":          `a="x"`,
	} {
		s, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := s.Requirements()
		got, err := matcher(r[0])
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: got %s, want %s", sel, got, want)
		}
	}
	s, err := labels.Parse("a>1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Query("ns", []string{"p"}, s); !errors.Is(err, ErrSelector) {
		t.Errorf("a>1: error %v, want ErrSelector", err)
	}
}
