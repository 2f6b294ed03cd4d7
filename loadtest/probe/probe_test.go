package probe

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

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

// The gates' connection peak and cap, summed over two gates.
func TestSampleGateConnectionPeakAndCap(t *testing.T) {
	page := func(peak, capN int) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "# TYPE gate_connections_peak gauge\ngate_connections_peak %d\n# TYPE gate_connection_cap gauge\ngate_connection_cap %d\n", peak, capN)
		}))
	}
	a, b := page(90, 100), page(40, 0)
	defer a.Close()
	defer b.Close()
	got := New([]Target{{Tier: Gate, URL: a.URL}, {Tier: Gate, URL: b.URL}}, nil).Sample(context.Background(), time.Now())
	if got[GateConnectionsPeak] != 130 || got[GateConnectionCap] != 100 {
		t.Fatalf("levels %v, want peak 130 and cap 100", got)
	}
}

// Goroutines are summed per tier; logic's store errors are its counter.
func TestSampleGoroutinesAndStoreErrors(t *testing.T) {
	page := func(body string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
	}
	l1 := page("# TYPE go_goroutines gauge\ngo_goroutines 120\n# TYPE logic_store_errors_total counter\n" +
		"logic_store_errors_total{op=\"commit\",reason=\"no_space\"} 7\nlogic_store_errors_total{op=\"purge\",reason=\"io\"} 1\n")
	l2 := page("# TYPE go_goroutines gauge\ngo_goroutines 80\n")
	b := page("# TYPE go_goroutines gauge\ngo_goroutines 30\n")
	defer l1.Close()
	defer l2.Close()
	defer b.Close()
	got := New([]Target{{Tier: Logic, URL: l1.URL}, {Tier: Logic, URL: l2.URL}, {Tier: Battle, URL: b.URL}}, nil).Sample(context.Background(), time.Now())
	if got["goroutines_logic"] != 200 || got["goroutines_battle"] != 30 || got[LogicStoreErrors] != 8 {
		t.Fatalf("levels %v, want goroutines_logic 200, goroutines_battle 30, logic_store_errors 8", got)
	}
	if _, ok := got["goroutines_gate"]; ok {
		t.Error("a tier that was not probed has goroutines")
	}
}

// Logic on PostgreSQL: shards held and moves summed, shards without an
// owner the most any process saw, fenced commits the commits' store
// errors with reason fenced and the purges' apart; a bbolt logic (no lease
// series) has none of them.
func TestSampleShardLeases(t *testing.T) {
	page := func(body string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
	}
	pg := func(held, without, losses, fenced int) *httptest.Server {
		return page(fmt.Sprintf("# TYPE logic_shards_held gauge\nlogic_shards_held %d\n"+
			"# TYPE logic_shards_without_owner gauge\nlogic_shards_without_owner %d\n"+
			"# TYPE logic_shard_lease_losses_total counter\nlogic_shard_lease_losses_total %d\n"+
			"# TYPE logic_shard_moves_total counter\nlogic_shard_moves_total{reason=\"acquired\"} %d\nlogic_shard_moves_total{reason=\"released\"} 2\n"+
			"# TYPE logic_store_errors_total counter\nlogic_store_errors_total{op=\"commit\",reason=\"fenced\"} %d\nlogic_store_errors_total{op=\"purge\",reason=\"fenced\"} 3\n"+
			"logic_store_errors_total{op=\"commit\",reason=\"unavailable\"} 5\n",
			held, without, losses, held, fenced))
	}
	l1, l2 := pg(100, 3, 1, 4), pg(150, 7, 0, 0)
	bolt := page("# TYPE logic_store_errors_total counter\nlogic_store_errors_total{op=\"commit\",reason=\"io\"} 1\n")
	defer l1.Close()
	defer l2.Close()
	defer bolt.Close()
	got := New([]Target{{Tier: Logic, URL: l1.URL}, {Tier: Logic, URL: l2.URL}}, nil).Sample(context.Background(), time.Now())
	want := map[string]float64{LogicShardsHeld: 250, LogicShardsWithoutOwner: 7, LogicLeaseLosses: 1, LogicShardMoves: 254, LogicFencedCommits: 4, LogicFencedPurges: 6, LogicStoreErrors: 20}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (levels %v)", k, got[k], v, got)
		}
	}
	got = New([]Target{{Tier: Logic, URL: bolt.URL}}, nil).Sample(context.Background(), time.Now())
	for _, k := range []string{LogicShardsHeld, LogicShardsWithoutOwner, LogicLeaseLosses, LogicShardMoves, LogicFencedCommits, LogicFencedPurges} {
		if _, ok := got[k]; ok {
			t.Errorf("bbolt logic has %s: %v", k, got)
		}
	}
}
