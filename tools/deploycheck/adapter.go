package deploycheck

import (
	"fmt"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// AdapterConfig is prometheus-adapter's config.yaml (its
// MetricsDiscoveryConfig), mirrored strictly for the fields it has.
type AdapterConfig struct {
	Rules         []DiscoveryRule `json:"rules,omitempty"`
	ExternalRules []DiscoveryRule `json:"externalRules,omitempty"`
	ResourceRules *ResourceRules  `json:"resourceRules,omitempty"`
}

// DiscoveryRule is one adapter rule.
type DiscoveryRule struct {
	SeriesQuery   string          `json:"seriesQuery"`
	SeriesFilters []RegexFilter   `json:"seriesFilters,omitempty"`
	Resources     ResourceMapping `json:"resources"`
	Name          NameMapping     `json:"name"`
	MetricsQuery  string          `json:"metricsQuery,omitempty"`
}

// RegexFilter keeps (is) or drops (isNot) series by name.
type RegexFilter struct {
	Is    string `json:"is,omitempty"`
	IsNot string `json:"isNot,omitempty"`
}

// ResourceMapping maps series labels to Kubernetes resources.
type ResourceMapping struct {
	Template   string                   `json:"template,omitempty"`
	Overrides  map[string]GroupResource `json:"overrides,omitempty"`
	Namespaced *bool                    `json:"namespaced,omitempty"`
}

// GroupResource is a Kubernetes group and resource.
type GroupResource struct {
	Group    string `json:"group,omitempty"`
	Resource string `json:"resource"`
}

// NameMapping turns a series name into a metric name.
type NameMapping struct {
	Matches string `json:"matches,omitempty"`
	As      string `json:"as,omitempty"`
}

// ResourceRules are the adapter's resource-metrics rules.
type ResourceRules struct {
	CPU    ResourceRule `json:"cpu"`
	Memory ResourceRule `json:"memory"`
	Window string       `json:"window,omitempty"`
}

// ResourceRule is the cpu or memory rule.
type ResourceRule struct {
	ContainerQuery string          `json:"containerQuery"`
	NodeQuery      string          `json:"nodeQuery"`
	Resources      ResourceMapping `json:"resources"`
	ContainerLabel string          `json:"containerLabel"`
}

// AdapterSource is one adapter config found in a ConfigMap.
type AdapterSource struct {
	Obj    Object
	Key    string
	Config AdapterConfig
}

func (a AdapterSource) ref() string { return fmt.Sprintf("%s key %s", a.Obj.Ref(), a.Key) }

// AdapterConfigs finds the prometheus-adapter configs among the ConfigMaps
// of objs: every data value whose top level has rules, externalRules or
// resourceRules, decoded strictly.
func AdapterConfigs(objs []Object) ([]AdapterSource, []error) {
	var out []AdapterSource
	var errs []error
	for _, o := range objs {
		cm, ok := o.Obj.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		keys := make([]string, 0, len(cm.Data))
		for k := range cm.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var top map[string]any
			if yaml.Unmarshal([]byte(cm.Data[k]), &top) != nil {
				continue
			}
			_, r := top["rules"]
			_, e := top["externalRules"]
			_, rr := top["resourceRules"]
			if !r && !e && !rr {
				continue
			}
			var cfg AdapterConfig
			if err := yaml.UnmarshalStrict([]byte(cm.Data[k]), &cfg); err != nil {
				errs = append(errs, fmt.Errorf("%s key %s: prometheus-adapter config: %w", o.Ref(), k, err))
				continue
			}
			out = append(out, AdapterSource{Obj: o, Key: k, Config: cfg})
		}
	}
	return out, errs
}

// adapterName is the metric name the adapter gives series, as its
// metric namer does: name.matches (default ".*") must match, and name.as
// (default $0, or $1 with one capture group) is expanded from the match.
func adapterName(m NameMapping, series string) (string, error) {
	pat := m.Matches
	if pat == "" {
		pat = ".*"
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return "", fmt.Errorf("name.matches %q: %v", m.Matches, err)
	}
	as := m.As
	if as == "" {
		switch re.NumSubexp() {
		case 0:
			as = "$0"
		case 1:
			as = "$1"
		default:
			return "", fmt.Errorf("name.matches %q has %d groups and no name.as", m.Matches, re.NumSubexp())
		}
	}
	idx := re.FindStringSubmatchIndex(series)
	if idx == nil {
		return "", fmt.Errorf("name.matches %q does not match series %q", m.Matches, series)
	}
	return string(re.ExpandString(nil, as, series, idx)), nil
}

// keepSeries applies a rule's seriesFilters.
func keepSeries(fs []RegexFilter, series string) (bool, error) {
	for _, f := range fs {
		if f.Is != "" {
			re, err := regexp.Compile(f.Is)
			if err != nil {
				return false, fmt.Errorf("seriesFilters is %q: %v", f.Is, err)
			}
			if !re.MatchString(series) {
				return false, nil
			}
		}
		if f.IsNot != "" {
			re, err := regexp.Compile(f.IsNot)
			if err != nil {
				return false, fmt.Errorf("seriesFilters isNot %q: %v", f.IsNot, err)
			}
			if re.MatchString(series) {
				return false, nil
			}
		}
	}
	return true, nil
}

// mapsPods tells whether a rule's resources attribute series to pods.
func mapsPods(r ResourceMapping) bool {
	if r.Template != "" {
		return true
	}
	for _, gr := range r.Overrides {
		if gr.Group == "" && (gr.Resource == "pod" || gr.Resource == "pods") {
			return true
		}
	}
	return false
}
