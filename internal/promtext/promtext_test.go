package promtext

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const page = `# TYPE logic_queue_depth gauge
logic_queue_depth{shard="0"} 120
logic_queue_depth{shard="1"} 30.5
# TYPE battle_latency_seconds histogram
battle_latency_seconds_bucket{b="1",le="0.1"} 50
battle_latency_seconds_bucket{b="1",le="0.2"} 90
battle_latency_seconds_bucket{b="1",le="+Inf"} 100
battle_latency_seconds_sum{b="1"} 12
battle_latency_seconds_count{b="1"} 100
battle_latency_seconds_bucket{b="2",le="0.1"} 10
battle_latency_seconds_bucket{b="2",le="0.2"} 10
battle_latency_seconds_bucket{b="2",le="+Inf"} 10
battle_latency_seconds_sum{b="2"} 1
battle_latency_seconds_count{b="2"} 10
`

func TestSumAndHist(t *testing.T) {
	f, err := Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := f.Sum("logic_queue_depth"); !ok || v != 150.5 {
		t.Errorf("Sum = %v %v, want 150.5", v, ok)
	}
	if v, ok := f.SumWhere("logic_queue_depth", "shard", "1"); !ok || v != 30.5 {
		t.Errorf("SumWhere shard=1 = %v %v, want 30.5", v, ok)
	}
	if _, ok := f.SumWhere("logic_queue_depth", "shard", "7"); ok {
		t.Error("no series has shard=7, yet SumWhere found one")
	}
	if _, ok := f.Sum("nope"); ok {
		t.Error("a missing family has a sum")
	}
	h, ok := f.Hist("battle_latency_seconds")
	if !ok || h.Count != 110 || h.Counts[0] != 60 || h.Counts[2] != 110 {
		t.Fatalf("Hist = %+v %v, want both series summed", h, ok)
	}
	if _, ok := f.Hist("logic_queue_depth"); ok {
		t.Error("a gauge read as a histogram")
	}
	if _, err := Parse(strings.NewReader("this is { not metrics")); err == nil {
		t.Error("garbage parsed")
	}
}

func TestQuantileAndSub(t *testing.T) {
	inf := math.Inf(1)
	b := []float64{0.1, 0.2, 0.4, inf}
	for _, c := range []struct {
		counts []float64
		q      float64
		want   float64
		ok     bool
	}{
		{[]float64{0, 0, 0, 0}, 0.99, 0, false},
		{[]float64{100, 100, 100, 100}, 0.5, 0.05, true},
		{[]float64{50, 90, 100, 100}, 0.99, 0.38, true}, // rank 99 in (0.2, 0.4]: 0.2 + 0.2 x 9/10
		{[]float64{50, 90, 100, 100}, 0.5, 0.1, true},
		{[]float64{0, 0, 0, 10}, 0.99, 0.4, true}, // all in +Inf: the highest finite bound
	} {
		h := Hist{Bounds: b, Counts: c.counts, Count: c.counts[3]}
		got, ok := h.Quantile(c.q)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Quantile(%v) of %v = %v %v, want %v %v", c.q, c.counts, got, ok, c.want, c.ok)
		}
	}
	now := Hist{Bounds: b, Counts: []float64{10, 20, 30, 30}, Count: 30}
	prev := Hist{Bounds: b, Counts: []float64{5, 8, 20, 20}, Count: 20}
	d, ok := now.Sub(prev)
	if !ok || d.Count != 10 || d.Counts[0] != 5 || d.Counts[1] != 12 {
		t.Errorf("Sub = %+v %v", d, ok)
	}
	if _, ok := prev.Sub(now); ok {
		t.Error("a count that went down (a restart) gave a delta")
	}
	if _, ok := now.Sub(Hist{}); ok {
		t.Error("a first reading gave a delta")
	}
	if _, ok := now.Sub(Hist{Bounds: []float64{1, inf}, Counts: []float64{1, 1}, Count: 1}); ok {
		t.Error("other buckets gave a delta")
	}
}

func TestFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	f, err := Fetch(context.Background(), srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Sum("logic_queue_depth"); !ok {
		t.Error("no queue depth")
	}
	if _, err := Fetch(context.Background(), srv.Client(), srv.URL+"/nope"); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("404: %v", err)
	}
}
