package adapter

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	apierr "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// Querier evaluates an instant PromQL query.
type Querier interface {
	Query(ctx context.Context, query string, t time.Time) ([]Sample, error)
}

// PodLister names the pods of a namespace that match a label selector.
type PodLister interface {
	ListPodNames(ctx context.Context, namespace string, selector labels.Selector) ([]string, error)
}

// podsResource is the group-resource every metric here describes.
var podsResource = schema.GroupResource{Resource: "pods"}

// Provider serves the compiled rules' metrics for pods through the custom
// metrics API, with the values Prometheus gives for each rule's query.
type Provider struct {
	metrics map[string]*Metric
	names   []string // metric names, in rule order
	prom    Querier
	pods    PodLister
	now     func() time.Time
}

var _ provider.CustomMetricsProvider = (*Provider)(nil)

// NewProvider returns a Provider for metrics. now gives the evaluation
// time of each query (time.Now in the binary).
func NewProvider(metrics []*Metric, prom Querier, pods PodLister, now func() time.Time) *Provider {
	p := &Provider{metrics: map[string]*Metric{}, prom: prom, pods: pods, now: now}
	for _, m := range metrics {
		p.metrics[m.Name] = m
		p.names = append(p.names, m.Name)
	}
	return p
}

// ListAllMetrics lists every rule's metric for namespaced pods. Unlike
// prometheus-adapter, which lists a metric only while its series exists
// in Prometheus, the list is fixed by the config; a metric whose series
// is absent is served as an empty list (GetMetricBySelector) or not found
// (GetMetricByName), which the HPA treats as failing to get the metric
// either way.
func (p *Provider) ListAllMetrics() []provider.CustomMetricInfo {
	out := make([]provider.CustomMetricInfo, 0, len(p.names))
	for _, n := range p.names {
		out = append(out, provider.CustomMetricInfo{GroupResource: podsResource, Namespaced: true, Metric: n})
	}
	return out
}

// lookup finds the metric info asks for: a rule's metric on namespaced pods.
func (p *Provider) lookup(info provider.CustomMetricInfo) (*Metric, error) {
	m, ok := p.metrics[info.Metric]
	gr := info.GroupResource
	isPods := gr.Group == "" && (gr.Resource == "pods" || gr.Resource == "pod")
	if !ok || !isPods || !info.Namespaced {
		return nil, provider.NewMetricNotFoundError(gr, info.Metric)
	}
	return m, nil
}

// GetMetricByName returns the metric of one pod.
func (p *Provider) GetMetricByName(ctx context.Context, name types.NamespacedName, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	m, err := p.lookup(info)
	if err != nil {
		return nil, err
	}
	values, at, err := p.values(ctx, m, name.Namespace, []string{name.Name}, metricSelector)
	if err != nil {
		return nil, err
	}
	v, ok := values[name.Name]
	if !ok {
		return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	mv := metricValue(m, name.Namespace, name.Name, v, at, metricSelector)
	return &mv, nil
}

// GetMetricBySelector returns the metric of each pod in namespace that
// matches selector and has a value. The pods are listed from the API
// server (as prometheus-adapter does), so only pods that exist are asked
// about and answered for.
func (p *Provider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	m, err := p.lookup(info)
	if err != nil {
		return nil, err
	}
	pods, err := p.pods.ListPodNames(ctx, namespace, selector)
	if err != nil {
		klog.ErrorS(err, "listing pods", "namespace", namespace, "selector", selector.String())
		return nil, apierr.NewInternalError(fmt.Errorf("listing pods in %q matching %q: %w", namespace, selector.String(), err))
	}
	list := &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{}}
	if len(pods) == 0 {
		return list, nil
	}
	slices.Sort(pods)
	values, at, err := p.values(ctx, m, namespace, pods, metricSelector)
	if err != nil {
		return nil, err
	}
	for _, pod := range pods {
		if v, ok := values[pod]; ok {
			list.Items = append(list.Items, metricValue(m, namespace, pod, v, at, metricSelector))
		}
	}
	return list, nil
}

// values runs m's query for pods and returns each answered pod's value.
// NaN is 0, as prometheus-adapter serves it and as our rules' metricsQuery
// already guarantees (it never yields NaN: an idle pod is 0, never "no
// metric"). ±Inf has no quantity form and is left out, so the HPA sees that
// pod as missing; histogram_quantile never returns it for our buckets.
func (p *Provider) values(ctx context.Context, m *Metric, namespace string, pods []string, metricSelector labels.Selector) (map[string]float64, time.Time, error) {
	q, err := m.Query(namespace, pods, metricSelector)
	if err != nil {
		return nil, time.Time{}, apierr.NewBadRequest(err.Error())
	}
	at := p.now()
	samples, err := p.prom.Query(ctx, q, at)
	if err != nil {
		klog.ErrorS(err, "querying prometheus", "metric", m.Name, "query", q)
		return nil, time.Time{}, apierr.NewInternalError(fmt.Errorf("metric %s: %w", m.Name, err))
	}
	out := make(map[string]float64, len(samples))
	for _, s := range samples {
		pod, ok := s.Labels[m.PodLabel]
		if !ok {
			continue
		}
		v := s.Value
		switch {
		case math.IsNaN(v):
			v = 0
		case math.IsInf(v, 0):
			klog.InfoS("leaving out an infinite value", "metric", m.Name, "pod", pod)
			continue
		}
		out[pod] = v
	}
	return out, at, nil
}

func metricValue(m *Metric, namespace, pod string, v float64, at time.Time, metricSelector labels.Selector) custom_metrics.MetricValue {
	mv := custom_metrics.MetricValue{
		DescribedObject: custom_metrics.ObjectReference{
			APIVersion: "v1",
			Kind:       "Pod",
			Namespace:  namespace,
			Name:       pod,
		},
		Metric:    custom_metrics.MetricIdentifier{Name: m.Name},
		Timestamp: metav1.NewTime(at),
		// prometheus-adapter's conversion: milli-units, truncated.
		Value: *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI),
	}
	if metricSelector != nil && !metricSelector.Empty() {
		if sel, err := metav1.ParseToLabelSelector(metricSelector.String()); err == nil {
			mv.Metric.Selector = sel
		}
	}
	return mv
}

// DynamicPodLister lists pods through a dynamic client (the one
// AdapterBase builds from --lister-kubeconfig).
type DynamicPodLister struct {
	Client dynamic.Interface
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// ListPodNames lists the names of the pods in namespace matching selector.
func (l DynamicPodLister) ListPodNames(ctx context.Context, namespace string, selector labels.Selector) ([]string, error) {
	list, err := l.Client.Resource(podsGVR).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		names = append(names, it.GetName())
	}
	return names, nil
}
