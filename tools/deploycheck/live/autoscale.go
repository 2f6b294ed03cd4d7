package live

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/leveehq/levee/tools/deploycheck"
)

// HPAPodsMetric is the current average value of the Pods metric name in
// an HPA's status.currentMetrics, or "-" when it reports none.
func HPAPodsMetric(h *autoscalingv2.HorizontalPodAutoscaler, name string) string {
	for _, m := range h.Status.CurrentMetrics {
		if m.Pods != nil && m.Pods.Metric.Name == name && m.Pods.Current.AverageValue != nil {
			return m.Pods.Current.AverageValue.String()
		}
	}
	return "-"
}

// AdapterRuleNames are the metric names that the prometheus-adapter
// rules in a file's ConfigMaps (decoded strictly, as make deploy-check
// does) give their rules and external rules, sorted.
func AdapterRuleNames(file string, data []byte) ([]string, error) {
	objs, errs := deploycheck.NewDecoder().Decode(file, data)
	srcs, e := deploycheck.AdapterConfigs(objs)
	if err := errors.Join(append(errs, e...)...); err != nil {
		return nil, err
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("%s: no prometheus-adapter rules (a ConfigMap whose data holds rules:)", file)
	}
	var out []string
	for _, src := range srcs {
		for _, r := range append(src.Config.Rules, src.Config.ExternalRules...) {
			if r.Name.As != "" && !slices.Contains(out, r.Name.As) {
				out = append(out, r.Name.As)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

var resourcePrefix = regexp.MustCompile(`^[a-z]+/`)

// DiscoveredMetrics are the metric names a custom metrics API's discovery
// lists ("pods/battle_pressure" is battle_pressure), sorted, each once.
func DiscoveredMetrics(resources []string) []string {
	var out []string
	for _, r := range resources {
		if n := resourcePrefix.ReplaceAllString(r, ""); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// FileSDGroup is one entry of a Prometheus file_sd list.
type FileSDGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// PodTargets stands real processes behind pods that have none (kwok's):
// each pod is given one of the processes' addresses, round-robin in the
// order the pods first appear, and keeps it while it exists.
type PodTargets struct {
	addrs []string
	given map[string]string
	next  int
}

// NewPodTargets hands out addrs.
func NewPodTargets(addrs []string) *PodTargets {
	return &PodTargets{addrs: addrs, given: map[string]string{}}
}

// Update gives the pods with an IP their address and forgets the pods
// gone; it returns the file_sd list, one group per pod, labelled as
// Kubernetes service discovery labels a pod (namespace, name, IP) for the
// relabelling a PodMonitor would do.
func (t *PodTargets) Update(pods []corev1.Pod) []FileSDGroup {
	seen := map[string]bool{}
	out := []FileSDGroup{}
	for _, p := range pods {
		if p.Name == "" || p.Status.PodIP == "" {
			continue
		}
		a, ok := t.given[p.Name]
		if !ok {
			a = t.addrs[t.next%len(t.addrs)]
			t.given[p.Name] = a
			t.next++
		}
		seen[p.Name] = true
		out = append(out, FileSDGroup{Targets: []string{a}, Labels: map[string]string{
			"__meta_kubernetes_namespace": p.Namespace,
			"__meta_kubernetes_pod_name":  p.Name,
			"__meta_kubernetes_pod_ip":    p.Status.PodIP,
		}})
	}
	for n := range t.given {
		if !seen[n] {
			delete(t.given, n)
		}
	}
	return out
}
