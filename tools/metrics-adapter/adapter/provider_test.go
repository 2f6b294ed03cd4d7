package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierr "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// fakeProm is a Prometheus HTTP API that answers /api/v1/query with the
// body its answer function gives for the query, and records the queries.
type fakeProm struct {
	t      *testing.T
	answer func(query string) (status int, body string)

	mu      sync.Mutex
	queries []string
	times   []string
}

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/prom/api/v1/query" || r.Method != http.MethodPost {
		f.t.Errorf("request %s %s, want POST /prom/api/v1/query", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	q, ts := r.FormValue("query"), r.FormValue("time")
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.times = append(f.times, ts)
	f.mu.Unlock()
	status, body := f.answer(q)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func (f *fakeProm) seen() (queries, times []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.queries), slices.Clone(f.times)
}

// vector is a successful instant-vector answer with one sample per pod
// (the value a string as Prometheus writes it), at unix time 1700000000.5.
func vector(values map[string]string) string {
	var rs []string
	for _, pod := range slices.Sorted(func(yield func(string) bool) {
		for k := range values {
			if !yield(k) {
				return
			}
		}
	}) {
		rs = append(rs, fmt.Sprintf(`{"metric":{"pod":%q},"value":[1700000000.5,%q]}`, pod, values[pod]))
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(rs, ",") + `]}}`
}

type fakePods struct {
	names []string
	err   error
	asked []string // namespace/selector of each call
}

func (f *fakePods) ListPodNames(_ context.Context, namespace string, selector labels.Selector) ([]string, error) {
	f.asked = append(f.asked, namespace+"/"+selector.String())
	return slices.Clone(f.names), f.err
}

var evalTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newTestProvider serves the shipped rules from a fake Prometheus.
func newTestProvider(t *testing.T, pods *fakePods, answer func(string) (int, string)) (*Provider, *fakeProm) {
	t.Helper()
	fp := &fakeProm{t: t, answer: answer}
	srv := httptest.NewServer(fp)
	t.Cleanup(srv.Close)
	prom, err := NewPrometheus(srv.URL+"/prom", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return NewProvider(loadShipped(t), prom, pods, func() time.Time { return evalTime }), fp
}

var latency = provider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "battle_latency_seconds_p99"}

func TestGetMetricBySelector(t *testing.T) {
	pods := &fakePods{names: []string{"c", "a", "b", "d"}}
	p, fp := newTestProvider(t, pods, func(string) (int, string) {
		// b has no series, e is not a listed pod, c is NaN, d +Inf.
		return 200, vector(map[string]string{"a": "0.25", "c": "NaN", "d": "+Inf", "e": "9", "f": "0.0129"})
	})
	sel := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "battle"})
	list, err := p.GetMetricBySelector(context.Background(), "levee", sel, latency, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range list.Items {
		got = append(got, fmt.Sprintf("%s/%s %s %s %s", it.DescribedObject.Namespace, it.DescribedObject.Name, it.DescribedObject.Kind, it.Metric.Name, it.Value.String()))
		if !it.Timestamp.Time.Equal(evalTime) {
			t.Errorf("%s: timestamp %v, want the evaluation time %v", it.DescribedObject.Name, it.Timestamp, evalTime)
		}
	}
	want := []string{
		"levee/a Pod battle_latency_seconds_p99 250m",
		"levee/c Pod battle_latency_seconds_p99 0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("items:\n got %q\nwant %q", got, want)
	}
	if want := []string{"levee/app.kubernetes.io/name=battle"}; !slices.Equal(pods.asked, want) {
		t.Errorf("listed pods for %q, want %q", pods.asked, want)
	}
	queries, times := fp.seen()
	wantQ, err := p.metrics[latency.Metric].Query("levee", []string{"a", "b", "c", "d"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(queries, []string{wantQ}) {
		t.Errorf("queries %q, want %q", queries, wantQ)
	}
	if want := "1772366400.000"; !slices.Equal(times, []string{want}) {
		t.Errorf("query times %q, want %q", times, want)
	}
}

func TestGetMetricBySelectorNoPods(t *testing.T) {
	p, fp := newTestProvider(t, &fakePods{}, func(string) (int, string) { return 200, vector(nil) })
	list, err := p.GetMetricBySelector(context.Background(), "levee", labels.Everything(), latency, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("items %v, want none", list.Items)
	}
	if q, _ := fp.seen(); len(q) != 0 {
		t.Errorf("asked Prometheus %q with no pods", q)
	}
}

func TestGetMetricByName(t *testing.T) {
	p, fp := newTestProvider(t, &fakePods{}, func(q string) (int, string) {
		if strings.Contains(q, `pod="gone"`) {
			return 200, vector(nil)
		}
		return 200, vector(map[string]string{"a": "0.0125"})
	})
	pressure := latency
	pressure.Metric = "battle_pressure"
	mv, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "levee", Name: "a"}, pressure, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if mv.DescribedObject.Name != "a" || mv.DescribedObject.Namespace != "levee" || mv.Metric.Name != "battle_pressure" || mv.Value.MilliValue() != 12 {
		t.Errorf("got %+v, want levee/a battle_pressure 12m (truncated, as prometheus-adapter does)", mv)
	}
	q, _ := fp.seen()
	want, err := p.metrics["battle_pressure"].Query("levee", []string{"a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(q, []string{want}) {
		t.Errorf("queries %q, want %q", q, want)
	}
	_, err = p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "levee", Name: "gone"}, pressure, labels.Everything())
	if !apierr.IsNotFound(err) {
		t.Errorf("pod without a series: error %v, want not found", err)
	}
}

func TestMetricNotServed(t *testing.T) {
	p, fp := newTestProvider(t, &fakePods{names: []string{"a"}}, func(string) (int, string) { return 200, vector(nil) })
	ctx := context.Background()
	for name, info := range map[string]provider.CustomMetricInfo{
		"unknown metric": {GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "battle_latency_p99"},
		"root-scoped":    {GroupResource: schema.GroupResource{Resource: "pods"}, Metric: latency.Metric},
		"services":       {GroupResource: schema.GroupResource{Resource: "services"}, Namespaced: true, Metric: latency.Metric},
		"other group":    {GroupResource: schema.GroupResource{Group: "apps", Resource: "pods"}, Namespaced: true, Metric: latency.Metric},
	} {
		if _, err := p.GetMetricBySelector(ctx, "levee", labels.Everything(), info, labels.Everything()); !apierr.IsNotFound(err) {
			t.Errorf("%s by selector: error %v, want not found", name, err)
		}
		if _, err := p.GetMetricByName(ctx, types.NamespacedName{Namespace: "levee", Name: "a"}, info, labels.Everything()); !apierr.IsNotFound(err) {
			t.Errorf("%s by name: error %v, want not found", name, err)
		}
	}
	if q, _ := fp.seen(); len(q) != 0 {
		t.Errorf("asked Prometheus %q for metrics not served", q)
	}
}

func TestPrometheusErrors(t *testing.T) {
	for name, answer := range map[string]struct {
		status int
		body   string
		says   string
	}{
		"query error":  {400, `{"status":"error","errorType":"bad_data","error":"parse error at char 3"}`, "bad_data: parse error at char 3"},
		"unavailable":  {503, `upstream connect error`, "HTTP 503"},
		"matrix":       {200, `{"status":"success","data":{"resultType":"matrix","result":[]}}`, `"matrix"`},
		"bad value":    {200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1,"x"]}]}}`, "sample value"},
		"number value": {200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1,0.5]}]}}`, "sample value"},
	} {
		t.Run(name, func(t *testing.T) {
			p, _ := newTestProvider(t, &fakePods{names: []string{"a"}}, func(string) (int, string) { return answer.status, answer.body })
			_, err := p.GetMetricBySelector(context.Background(), "levee", labels.Everything(), latency, labels.Everything())
			if !apierr.IsInternalError(err) || !strings.Contains(err.Error(), answer.says) {
				t.Errorf("error %v, want an internal error saying %q", err, answer.says)
			}
			_, err = p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "levee", Name: "a"}, latency, labels.Everything())
			if !apierr.IsInternalError(err) {
				t.Errorf("by name: error %v, want an internal error", err)
			}
		})
	}
}

func TestPrometheusUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	prom, err := NewPrometheus(srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prom.Query(context.Background(), "up", evalTime); !errors.Is(err, ErrPrometheus) {
		t.Errorf("error %v, want ErrPrometheus", err)
	}
	if _, err := NewPrometheus("127.0.0.1:9090", nil); err == nil {
		t.Error("accepted a URL without a scheme")
	}
}

func TestPodListerError(t *testing.T) {
	p, fp := newTestProvider(t, &fakePods{err: errors.New("forbidden")}, func(string) (int, string) { return 200, vector(nil) })
	_, err := p.GetMetricBySelector(context.Background(), "levee", labels.Everything(), latency, labels.Everything())
	if !apierr.IsInternalError(err) || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("error %v, want an internal error saying forbidden", err)
	}
	if q, _ := fp.seen(); len(q) != 0 {
		t.Errorf("asked Prometheus %q without pods", q)
	}
}

func TestMetricSelectorIsPassedOn(t *testing.T) {
	p, fp := newTestProvider(t, &fakePods{names: []string{"a"}}, func(string) (int, string) {
		return 200, vector(map[string]string{"a": "1"})
	})
	ms := labels.SelectorFromSet(labels.Set{"tier": "gold"})
	list, err := p.GetMetricBySelector(context.Background(), "levee", labels.Everything(), latency, ms)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Metric.Selector == nil || list.Items[0].Metric.Selector.MatchLabels["tier"] != "gold" {
		t.Errorf("items %+v, want one with the metric selector tier=gold", list.Items)
	}
	if q, _ := fp.seen(); len(q) != 1 || !strings.Contains(q[0], `{tier="gold",namespace="levee",pod="a"}`) {
		t.Errorf("queries %q, want the selector's matcher first", q)
	}
	bad, err := labels.Parse("tier>1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetMetricBySelector(context.Background(), "levee", labels.Everything(), latency, bad); !apierr.IsBadRequest(err) {
		t.Errorf("tier>1: error %v, want bad request", err)
	}
}

func TestDynamicPodLister(t *testing.T) {
	pod := func(ns, name, app string) runtime.Object {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Pod")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(map[string]string{"app": app})
		return u
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{podsGVR: "PodList"},
		pod("levee", "battle-1", "battle"), pod("levee", "gate-1", "gate"), pod("other", "battle-2", "battle"))
	names, err := DynamicPodLister{Client: client}.ListPodNames(context.Background(), "levee", labels.SelectorFromSet(labels.Set{"app": "battle"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"battle-1"}) {
		t.Errorf("names %q, want [battle-1]", names)
	}
}
