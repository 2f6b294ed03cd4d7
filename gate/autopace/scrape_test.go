package autopace

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leveehq/levee/internal/metrics"
)

// tierPage serves a /metrics page from a registry with the logic or battle
// metrics the auto mode reads, as the real tiers export them.
type tierPage struct {
	reg   *prometheus.Registry
	depth *prometheus.GaugeVec
	lat   prometheus.Histogram
	srv   *httptest.Server
	fail  sync.Mutex
	down  bool
}

func newTierPage(t *testing.T) *tierPage {
	t.Helper()
	p := &tierPage{reg: prometheus.NewRegistry()}
	p.depth = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "logic_queue_depth", Help: "d"}, []string{"shard"})
	p.lat = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "battle_latency_seconds", Help: "l", Buckets: metrics.LatencyBuckets})
	p.reg.MustRegister(p.depth, p.lat)
	h := promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.fail.Lock()
		down := p.down
		p.fail.Unlock()
		if down {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *tierPage) setDown(down bool) {
	p.fail.Lock()
	p.down = down
	p.fail.Unlock()
}

func TestParsePage(t *testing.T) {
	text := `# HELP logic_queue_depth d
# TYPE logic_queue_depth gauge
logic_queue_depth{shard="0"} 120
logic_queue_depth{shard="1"} 30.5
# TYPE battle_latency_seconds histogram
battle_latency_seconds_bucket{le="0.1"} 50
battle_latency_seconds_bucket{le="0.2"} 90
battle_latency_seconds_bucket{le="0.4"} 100
battle_latency_seconds_bucket{le="+Inf"} 100
battle_latency_seconds_sum 12
battle_latency_seconds_count 100
other_metric 7
`
	p, err := parsePage(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if !p.depthKnown || p.depth != 150.5 {
		t.Fatalf("depth %v %v", p.depth, p.depthKnown)
	}
	q, ok := p.hist.Quantile(0.99) // rank 99 in (0.2, 0.4]: 0.2 + 0.2 × 9/10
	if !ok || math.Abs(q-0.38) > 1e-9 {
		t.Fatalf("p99 %v %v, want 0.38", q, ok)
	}
	if q, _ := p.hist.Quantile(0.5); q != 0.1 {
		t.Fatalf("p50 %v, want 0.1", q)
	}
	if _, err := parsePage(strings.NewReader("this is { not metrics")); err == nil {
		t.Fatal("garbage parsed")
	}
	if p, err := parsePage(strings.NewReader("up 1\n")); err != nil || p.depthKnown || p.hist != nil {
		t.Fatalf("a page without the metrics: %+v %v", p, err)
	}
}

func TestScraperReadsDepthAndIntervalP99(t *testing.T) {
	logic1, logic2, battle1, battle2 := newTierPage(t), newTierPage(t), newTierPage(t), newTierPage(t)
	logic1.depth.WithLabelValues("0").Set(200)
	logic2.depth.WithLabelValues("1").Set(150)
	for range 1000 {
		battle1.lat.Observe(0.05) // an old burst of slow battles must not count later
		battle1.lat.Observe(3)
	}
	sc := NewScraper([]string{logic1.srv.URL, logic2.srv.URL, battle1.srv.URL, battle2.srv.URL})
	defer sc.Close()
	ctx := context.Background()
	r := sc.Scrape(ctx)
	if !r.QueueKnown || r.QueueDepth != 350 || r.P99Known || len(r.Errors) != 0 {
		t.Fatalf("first scrape %+v: depth summed, no p99 yet (no previous reading)", r)
	}
	for range 100 {
		battle1.lat.Observe(0.015)
		battle2.lat.Observe(0.3)
	}
	r = sc.Scrape(ctx)
	if !r.P99Known || r.BattleP99 < 300*time.Millisecond || r.BattleP99 > 320*time.Millisecond {
		t.Fatalf("second scrape %+v: want the max of the instances' interval p99, about 0.32 s", r)
	}
	r = sc.Scrape(ctx)
	if r.P99Known {
		t.Fatalf("no battles since the last scrape: %+v", r)
	}
	logic2.setDown(true)
	r = sc.Scrape(ctx)
	if len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "HTTP 500") || r.QueueDepth != 200 {
		t.Fatalf("one tier down: %+v", r)
	}
}
