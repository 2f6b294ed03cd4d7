package adapter

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ErrUnsupported is returned for a part of prometheus-adapter's
// configuration that this stand-in does not implement.
var ErrUnsupported = errors.New("adapter: not supported by this stand-in for prometheus-adapter")

// ConfigMapKey is the key of the ConfigMap's data that holds the config,
// the one prometheus-adapter's Helm chart mounts as its --config file.
const ConfigMapKey = "config.yaml"

// defaultMetricsQuery is prometheus-adapter's metricsQuery when a rule has none.
const defaultMetricsQuery = "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"

// Config is prometheus-adapter's MetricsDiscoveryConfig, reduced to what
// this stand-in implements. The json.RawMessage fields are known to
// prometheus-adapter but refused here when set.
type Config struct {
	Rules         []Rule          `json:"rules"`
	ResourceRules json.RawMessage `json:"resourceRules,omitempty"`
	ExternalRules json.RawMessage `json:"externalRules,omitempty"`
}

// Rule is one of prometheus-adapter's discovery rules.
type Rule struct {
	SeriesQuery            string          `json:"seriesQuery"`
	SeriesFilters          json.RawMessage `json:"seriesFilters,omitempty"`
	Resources              Resources       `json:"resources"`
	Name                   NameMapping     `json:"name"`
	MetricsQuery           string          `json:"metricsQuery,omitempty"`
	LabelValueReplacements json.RawMessage `json:"labelValueReplacements,omitempty"`
}

// Resources maps Prometheus labels to Kubernetes resources.
type Resources struct {
	Template  json.RawMessage          `json:"template,omitempty"`
	Overrides map[string]GroupResource `json:"overrides,omitempty"`
}

// GroupResource names a Kubernetes resource.
type GroupResource struct {
	Group    string `json:"group,omitempty"`
	Resource string `json:"resource"`
}

// NameMapping turns a series name into the custom metric's name.
type NameMapping struct {
	Matches string `json:"matches"`
	As      string `json:"as"`
}

// LoadFile reads path, either a ConfigMap manifest whose data holds
// config.yaml (k8s/overlays/prometheus-adapter/adapter-rules.yaml) or a
// bare config.yaml, and compiles its rules.
func LoadFile(path string) ([]*Metric, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("adapter: %w", err)
	}
	ms, err := Load(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ms, nil
}

// Load compiles the rules of a ConfigMap manifest or a bare config.yaml.
func Load(b []byte) ([]*Metric, error) {
	var probe struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("adapter: decoding: %w", err)
	}
	if probe.Kind != "" {
		if probe.Kind != "ConfigMap" {
			return nil, fmt.Errorf("adapter: kind %q: want a ConfigMap or a bare config", probe.Kind)
		}
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(b, &cm); err != nil {
			return nil, fmt.Errorf("adapter: decoding ConfigMap: %w", err)
		}
		data, ok := cm.Data[ConfigMapKey]
		if !ok {
			return nil, fmt.Errorf("adapter: ConfigMap %s/%s has no data %q", cm.Namespace, cm.Name, ConfigMapKey)
		}
		b = []byte(data)
	}
	var cfg Config
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return nil, fmt.Errorf("adapter: decoding config: %w", err)
	}
	return Compile(cfg)
}

// Compile checks cfg and compiles each rule into the metric it serves.
func Compile(cfg Config) ([]*Metric, error) {
	if set(cfg.ResourceRules) {
		return nil, fmt.Errorf("resourceRules: %w", ErrUnsupported)
	}
	if set(cfg.ExternalRules) {
		return nil, fmt.Errorf("externalRules: %w", ErrUnsupported)
	}
	if len(cfg.Rules) == 0 {
		return nil, errors.New("adapter: config has no rules")
	}
	var ms []*Metric
	seen := map[string]int{}
	for i, r := range cfg.Rules {
		m, err := compileRule(r)
		if err != nil {
			return nil, fmt.Errorf("rules[%d]: %w", i, err)
		}
		if j, dup := seen[m.Name]; dup {
			return nil, fmt.Errorf("rules[%d]: metric %q is also served by rules[%d]", i, m.Name, j)
		}
		seen[m.Name] = i
		ms = append(ms, m)
	}
	return ms, nil
}

func set(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}

// seriesQueryRE is a series selector that names one series:
// name or name{matchers}.
var seriesQueryRE = regexp.MustCompile(`^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{.*\})?\s*$`)

func compileRule(r Rule) (*Metric, error) {
	if set(r.SeriesFilters) {
		return nil, fmt.Errorf("seriesFilters: %w", ErrUnsupported)
	}
	if set(r.LabelValueReplacements) {
		return nil, fmt.Errorf("labelValueReplacements: %w", ErrUnsupported)
	}
	if set(r.Resources.Template) {
		return nil, fmt.Errorf("resources.template: %w", ErrUnsupported)
	}
	sm := seriesQueryRE.FindStringSubmatch(r.SeriesQuery)
	if sm == nil {
		return nil, fmt.Errorf("seriesQuery %q: only a single series name, with or without label matchers: %w", r.SeriesQuery, ErrUnsupported)
	}
	m := &Metric{Series: sm[1]}

	for label, gr := range r.Resources.Overrides {
		if gr.Group != "" {
			return nil, fmt.Errorf("resources.overrides.%s: group %q: %w", label, gr.Group, ErrUnsupported)
		}
		switch gr.Resource {
		case "namespace", "namespaces":
			if m.NamespaceLabel != "" {
				return nil, fmt.Errorf("resources.overrides: labels %q and %q both name resource namespace", m.NamespaceLabel, label)
			}
			m.NamespaceLabel = label
		case "pod", "pods":
			if m.PodLabel != "" {
				return nil, fmt.Errorf("resources.overrides: labels %q and %q both name resource pod", m.PodLabel, label)
			}
			m.PodLabel = label
		default:
			return nil, fmt.Errorf("resources.overrides.%s: resource %q (only namespace and pod): %w", label, gr.Resource, ErrUnsupported)
		}
	}
	if m.NamespaceLabel == "" || m.PodLabel == "" {
		return nil, fmt.Errorf("resources.overrides: need a label for resource namespace and one for resource pod: %w", ErrUnsupported)
	}

	matches := r.Name.Matches
	if matches == "" {
		matches = ".*"
	}
	re, err := regexp.Compile(matches)
	if err != nil {
		return nil, fmt.Errorf("name.matches: %w", err)
	}
	as := r.Name.As
	if as == "" {
		switch re.NumSubexp() {
		case 0:
			as = "$0"
		case 1:
			as = "$1"
		default:
			return nil, fmt.Errorf("name.matches %q has %d groups: name.as is needed", matches, re.NumSubexp())
		}
	}
	idx := re.FindStringSubmatchIndex(m.Series)
	if idx == nil {
		return nil, fmt.Errorf("name.matches %q does not match the series %q, so the rule would serve nothing", matches, m.Series)
	}
	m.Name = string(re.ExpandString(nil, as, m.Series, idx))
	if m.Name == "" {
		return nil, fmt.Errorf("name.as %q gives an empty metric name", as)
	}

	q := r.MetricsQuery
	if q == "" {
		q = defaultMetricsQuery
	}
	m.query, err = template.New(m.Name).Delims("<<", ">>").Option("missingkey=error").Parse(q)
	if err != nil {
		return nil, fmt.Errorf("metricsQuery: %w", err)
	}
	// Render once with placeholder values so a template naming a field
	// prometheus-adapter does not offer fails at load, not on the HPA's
	// first request.
	if _, err := m.Query("namespace", []string{"pod"}, nil); err != nil {
		return nil, err
	}
	return m, nil
}
