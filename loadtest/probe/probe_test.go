package probe

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const page1 = `# TYPE gate_active_connections gauge
gate_active_connections 120
# TYPE logic_queue_depth gauge
logic_queue_depth{shard="0"} 3
logic_queue_depth{shard="1"} 4
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 10
# TYPE battle_latency_seconds histogram
battle_latency_seconds_bucket{le="0.1"} 10
battle_latency_seconds_bucket{le="0.5"} 10
battle_latency_seconds_bucket{le="+Inf"} 10
battle_latency_seconds_sum 0.5
battle_latency_seconds_count 10
`

func TestParseSumsSeries(t *testing.T) {
	pg, err := Parse(strings.NewReader(page1))
	if err != nil {
		t.Fatal(err)
	}
	if pg.values["logic_queue_depth"] != 7 || pg.values["gate_active_connections"] != 120 {
		t.Errorf("values = %v", pg.values)
	}
	h := pg.hists["battle_latency_seconds"]
	if h == nil || len(h.bounds) != 3 || h.counts[2] != 10 {
		t.Fatalf("histogram = %+v", h)
	}
	if _, err := Parse(strings.NewReader("bad line {")); err == nil {
		t.Error("a malformed page parsed")
	}
}

func TestQuantile(t *testing.T) {
	bounds := []float64{0.1, 0.2, 0.4, math.Inf(1)}
	for _, c := range []struct {
		cum  []float64
		q    float64
		want float64
		ok   bool
	}{
		{[]float64{0, 0, 0, 0}, 0.99, 0, false},
		{[]float64{100, 100, 100, 100}, 0.5, 0.05, true},     // within the first bucket
		{[]float64{50, 100, 100, 100}, 0.75, 0.15, true},     // halfway through the second
		{[]float64{0, 0, 0, 10}, 0.99, 0.4, true},            // +Inf: the largest finite bound
		{[]float64{0, 0, 100, 100}, 0.99, 0.2 + 0.198, true}, // interpolated in (0.2, 0.4]
	} {
		got, ok := Quantile(c.q, bounds, c.cum)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Quantile(%v, %v) = %v, %v; want %v, %v", c.q, c.cum, got, ok, c.want, c.ok)
		}
	}
}

// Two samples a second apart: CPU as a rate, battle p99 from the
// histogram's increase (here all slow battles: 0.5 s bucket).
func TestSampleRatesAndWindow(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		k := n.Add(1)
		fmt.Fprintf(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %d\n", 10+k)
		fmt.Fprintf(w, "# TYPE battle_latency_seconds histogram\nbattle_latency_seconds_bucket{le=\"0.1\"} 10\n"+
			"battle_latency_seconds_bucket{le=\"0.5\"} %d\nbattle_latency_seconds_bucket{le=\"+Inf\"} %d\n"+
			"battle_latency_seconds_sum 1\nbattle_latency_seconds_count %d\n", 10+100*(k-1), 10+100*(k-1), 10+100*(k-1))
	}))
	defer srv.Close()
	p := New([]Target{{Tier: Battle, URL: srv.URL}}, nil)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	first := p.Sample(context.Background(), t0)
	if _, ok := first["cpu_battle"]; ok {
		t.Error("a CPU rate from one sample")
	}
	second := p.Sample(context.Background(), t0.Add(2*time.Second))
	if got := second["cpu_battle"]; math.Abs(got-0.5) > 1e-9 {
		t.Errorf("cpu_battle = %v, want 0.5 (1 CPU second over 2 s)", got)
	}
	if got := second[BattleP99]; got <= 0.1 || got > 0.5 {
		t.Errorf("battle p99 = %v, want in (0.1, 0.5]: the 100 new battles were all in that bucket", got)
	}
	if len(p.Errors()) != 0 {
		t.Errorf("errors: %v", p.Errors())
	}
	srv.Close()
	p.Sample(context.Background(), t0.Add(3*time.Second))
	if len(p.Errors()) == 0 {
		t.Error("a dead target left no error")
	}
}

func TestParseTargets(t *testing.T) {
	if ts, err := ParseTargets([]string{"gate=http://127.0.0.1:1/metrics", "battle=http://127.0.0.1:2/metrics"}); err != nil || len(ts) != 2 {
		t.Fatalf("%v %v", ts, err)
	}
	for _, bad := range []string{"http://127.0.0.1:1/metrics", "db=http://x", "gate=ftp://x"} {
		if _, err := ParseTargets([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
