package deploycheck

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// AdapterMetric is one metric prometheus-adapter serves and the recorded
// series it comes from.
type AdapterMetric struct {
	Name     string
	Series   string
	External bool
	Pods     bool // the rule attributes series to pods
	Rule     string
}

// AdapterMetrics evaluates the adapter rules against the recording rules
// rec: every series a seriesQuery selects must be recorded, every
// metricsQuery must parse, and each rule yields the metrics it names.
func AdapterMetrics(srcs []AdapterSource, rec map[string]bool) ([]AdapterMetric, []error) {
	var out []AdapterMetric
	var errs []error
	for _, src := range srcs {
		for _, set := range []struct {
			field    string
			rules    []DiscoveryRule
			external bool
		}{{"rules", src.Config.Rules, false}, {"externalRules", src.Config.ExternalRules, true}} {
			for i, r := range set.rules {
				at := fmt.Sprintf("%s: %s[%d]", src.ref(), set.field, i)
				series, err := seriesOf(r.SeriesQuery, rec)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: seriesQuery: %v", at, err))
					continue
				}
				for _, s := range series {
					if keep, err := keepSeries(r.SeriesFilters, s); err != nil {
						errs = append(errs, fmt.Errorf("%s: %v", at, err))
						break
					} else if !keep {
						continue
					}
					name, err := adapterName(r.Name, s)
					if err != nil {
						errs = append(errs, fmt.Errorf("%s: %v", at, err))
						continue
					}
					out = append(out, AdapterMetric{Name: name, Series: s, External: set.external, Pods: mapsPods(r.Resources), Rule: at})
					if r.MetricsQuery != "" {
						if _, err := ParsePromQL(AdapterQuery(r.MetricsQuery, s)); err != nil {
							errs = append(errs, fmt.Errorf("%s: metricsQuery %q: %v", at, r.MetricsQuery, err))
						}
					}
				}
			}
		}
	}
	return out, errs
}

// seriesOf lists the recorded series a seriesQuery selects; a literal name
// that is not recorded is an error, as is a pattern that matches none.
func seriesOf(q string, rec map[string]bool) ([]string, error) {
	e, err := ParsePromQL(q)
	if err != nil {
		return nil, err
	}
	sels := selectors(e)
	if len(sels) == 0 {
		return nil, fmt.Errorf("%q selects no series", q)
	}
	var out []string
	for _, s := range sels {
		switch {
		case s.Pattern != nil:
			var hit []string
			for name := range rec {
				if s.Pattern.Matches(name) {
					hit = append(hit, name)
				}
			}
			if len(hit) == 0 {
				return nil, fmt.Errorf("__name__=~%q matches no recording rule (%v)", s.Pattern.Value, sortedKeys(rec))
			}
			sort.Strings(hit)
			out = append(out, hit...)
		case !rec[s.Name]:
			return nil, fmt.Errorf("series %q is not a recording rule of the rules file (%v)", s.Name, sortedKeys(rec))
		default:
			out = append(out, s.Name)
		}
	}
	return out, nil
}

// CheckAdapterChain checks the prometheus-adapter overlay: every metric of
// every HPA is served by an adapter rule (Pods metrics by a rule that maps
// series to pods), whose series are recording rules.
func CheckAdapterChain(objs []Object, rec map[string]bool) []error {
	srcs, errs := AdapterConfigs(objs)
	if len(srcs) == 0 && len(errs) == 0 {
		return []error{fmt.Errorf("no prometheus-adapter config (a ConfigMap whose data holds rules:)")}
	}
	served, e := AdapterMetrics(srcs, rec)
	errs = append(errs, e...)
	var hpas int
	for _, o := range objs {
		hpa, ok := o.Obj.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok {
			continue
		}
		hpas++
		for i, m := range hpa.Spec.Metrics {
			name, external, ok := hpaMetricName(m)
			if !ok {
				continue
			}
			j := slices.IndexFunc(served, func(a AdapterMetric) bool { return a.Name == name && a.External == external })
			switch {
			case j < 0:
				errs = append(errs, errorf(o, "metrics[%d] %s metric %q is produced by no prometheus-adapter rule (they produce %v)", i, m.Type, name, adapterNames(served)))
			case m.Type == autoscalingv2.PodsMetricSourceType && !served[j].Pods:
				errs = append(errs, errorf(o, "metrics[%d] Pods metric %q comes from %s, whose resources map no label to pods", i, name, served[j].Rule))
			}
		}
	}
	if hpas == 0 {
		errs = append(errs, fmt.Errorf("no HorizontalPodAutoscaler rendered for the adapter rules to feed"))
	}
	return errs
}

// HPAMetricName is the name of the metric an HPA's metric spec reads (a
// Pods, Object or External metric); ok is false for the other types.
func HPAMetricName(m autoscalingv2.MetricSpec) (name string, ok bool) {
	name, _, ok = hpaMetricName(m)
	return name, ok
}

func hpaMetricName(m autoscalingv2.MetricSpec) (name string, external, ok bool) {
	switch {
	case m.Pods != nil:
		return m.Pods.Metric.Name, false, true
	case m.Object != nil:
		return m.Object.Metric.Name, false, true
	case m.External != nil:
		return m.External.Metric.Name, true, true
	}
	return "", false, false
}

func hpaTarget(m autoscalingv2.MetricSpec) (float64, bool) {
	var t autoscalingv2.MetricTarget
	switch {
	case m.Pods != nil:
		t = m.Pods.Target
	case m.Object != nil:
		t = m.Object.Target
	case m.External != nil:
		t = m.External.Target
	default:
		return 0, false
	}
	switch {
	case t.AverageValue != nil:
		return t.AverageValue.AsApproximateFloat64(), true
	case t.Value != nil:
		return t.Value.AsApproximateFloat64(), true
	}
	return 0, false
}

// CheckKEDA checks the KEDA overlay (objs) against the HPA and adapter
// rules of the prometheus-adapter overlay (hpaObjs): every ScaledObject
// scales with the HPA's bounds; its prometheus triggers query recording
// rules with metricType Value (AverageValue would divide a latency by the
// replica count); each trigger stands for one HPA metric (the same recorded
// quantity, at the tier level instead of per pod) with the same threshold,
// and every HPA metric has its trigger; and no HPA is rendered beside it.
func CheckKEDA(objs, hpaObjs []Object, rec map[string]bool) []error {
	var errs []error
	srcs, _ := AdapterConfigs(hpaObjs)
	served, _ := AdapterMetrics(srcs, rec)
	var sos int
	for _, o := range objs {
		if _, ok := o.Obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
			errs = append(errs, errorf(o, "is rendered beside a ScaledObject; the KEDA overlay must remove the base HPA (KEDA makes its own)"))
		}
		so, ok := o.Obj.(*ScaledObject)
		if !ok {
			continue
		}
		sos++
		if so.Spec.ScaleTargetRef == nil {
			errs = append(errs, errorf(o, "has no scaleTargetRef"))
			continue
		}
		target := so.Spec.ScaleTargetRef.Name
		var hpa *autoscalingv2.HorizontalPodAutoscaler
		for _, h := range hpaObjs {
			if v, ok := h.Obj.(*autoscalingv2.HorizontalPodAutoscaler); ok && v.Spec.ScaleTargetRef.Name == target && h.Meta.GetNamespace() == o.Meta.GetNamespace() {
				hpa = v
			}
		}
		if hpa == nil {
			errs = append(errs, errorf(o, "no HPA on %s to compare with", target))
			continue
		}
		hmin := int32(1)
		if hpa.Spec.MinReplicas != nil {
			hmin = *hpa.Spec.MinReplicas
		}
		if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount != hmin {
			errs = append(errs, errorf(o, "minReplicaCount %s, the HPA's minReplicas is %d", ptrString(so.Spec.MinReplicaCount), hmin))
		}
		if so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount != hpa.Spec.MaxReplicas {
			errs = append(errs, errorf(o, "maxReplicaCount %s, the HPA's maxReplicas is %d", ptrString(so.Spec.MaxReplicaCount), hpa.Spec.MaxReplicas))
		}
		// The recorded quantity (the rule name without its level) each
		// HPA metric scales on, and its target.
		type want struct {
			metric string
			target float64
			seen   bool
		}
		wants := map[string]*want{}
		for _, m := range hpa.Spec.Metrics {
			name, _, ok := hpaMetricName(m)
			t, ok2 := hpaTarget(m)
			if !ok || !ok2 {
				continue
			}
			for _, a := range served {
				if a.Name == name {
					wants[withoutLevel(a.Series)] = &want{metric: name, target: t}
				}
			}
		}
		for i, tr := range so.Spec.Triggers {
			if tr.Type != "prometheus" {
				continue
			}
			at := fmt.Sprintf("triggers[%d] (%s)", i, tr.Name)
			if tr.Metadata["serverAddress"] == "" {
				errs = append(errs, errorf(o, "%s: no metadata.serverAddress", at))
			}
			if tr.MetricType != autoscalingv2.ValueMetricType {
				errs = append(errs, errorf(o, "%s: metricType %q, want Value: AverageValue divides the query's value by the replica count", at, tr.MetricType))
			}
			th, thErr := strconv.ParseFloat(tr.Metadata["threshold"], 64)
			if thErr != nil {
				errs = append(errs, errorf(o, "%s: metadata.threshold %q is not a number", at, tr.Metadata["threshold"]))
			}
			q := tr.Metadata["query"]
			e, err := ParsePromQL(q)
			if err != nil {
				errs = append(errs, errorf(o, "%s: query %q: %v", at, q, err))
				continue
			}
			var recorded []string
			for _, n := range metricNames(e) {
				if rec[n] {
					recorded = append(recorded, n)
				}
			}
			if len(recorded) == 0 {
				errs = append(errs, errorf(o, "%s: query %q reads no recording rule (%v)", at, q, sortedKeys(rec)))
				continue
			}
			var w *want
			for _, n := range recorded {
				if x, ok := wants[withoutLevel(n)]; ok {
					w = x
				}
			}
			if w == nil {
				errs = append(errs, errorf(o, "%s: query %q reads %v, which feed none of the HPA's metrics", at, q, recorded))
				continue
			}
			w.seen = true
			if thErr == nil && math.Abs(th-w.target) > 1e-9 {
				errs = append(errs, errorf(o, "%s: threshold %v, the HPA's %s target is %v", at, th, w.metric, w.target))
			}
		}
		for q, w := range wants {
			if !w.seen {
				errs = append(errs, errorf(o, "no prometheus trigger stands for the HPA's metric %s (%s)", w.metric, q))
			}
		}
	}
	if sos == 0 {
		errs = append(errs, fmt.Errorf("no ScaledObject rendered"))
	}
	return errs
}

// withoutLevel drops a recording rule's level: instance:x:op and job:x:op
// are both x:op.
func withoutLevel(name string) string {
	if strings.Count(name, ":") >= 2 {
		return name[strings.Index(name, ":")+1:]
	}
	return name
}

func adapterNames(ms []AdapterMetric) []string {
	var ns []string
	for _, m := range ms {
		ns = append(ns, m.Name)
	}
	return ns
}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func ptrString(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}
