package gate

import (
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leveehq/levee/internal/testwait"
)

// logicPage serves a logic tier's /metrics page with logic_queue_depth, as
// the real tier exports it.
func logicPage(t *testing.T) (*prometheus.GaugeVec, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	depth := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "logic_queue_depth", Help: "d"}, []string{"shard"})
	reg.MustRegister(depth)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return depth, srv.URL + "/metrics"
}

// TestAutoModeFollowsTheTiers runs a gate in auto mode against a fake logic
// /metrics page: the rate rises while the queue is short and falls when it
// is deep.
func TestAutoModeFollowsTheTiers(t *testing.T) {
	depth, url := logicPage(t)
	depth.WithLabelValues("0").Set(10)
	logs := &syncBuffer{}
	g := startGateLog(t, func(c *Config) {
		c.LineMode = "auto"
		c.LineRate, c.LineInterval = 1000, 10*time.Second
		c.AutoMinRate, c.AutoMaxRate = 20, 200
		c.AutoInterval = 5 * time.Second
		c.AutoMetricsURLs = []string{url}
	}, newTextLogger(logs), startFakeLogic(t))
	testwait.Until(t, "the walker's ticker", g.line.ticking.Load)
	rate := func() float64 { return g.stats().ConfiguredPerSecond }
	if rate() != 100 {
		t.Fatalf("auto starts at %v/s, want the configured 100/s", rate())
	}
	steps := func() float64 {
		return testGauge(g, "gate_line_auto_steps_total")
	}
	tick := func() {
		t.Helper()
		n := steps()
		g.advance(t, 5*time.Second)
		testwait.Until(t, "an auto step", func() bool { return steps() > n })
	}
	tick()
	if rate() != 125 {
		t.Fatalf("healthy: %v/s, want 125", rate())
	}
	tick()
	if math.Abs(rate()-156.25) > 0.1 {
		t.Fatalf("healthy again: %v/s, want about 156", rate())
	}
	depth.WithLabelValues("0").Set(900)
	tick()
	if math.Abs(rate()-78.1) > 0.1 {
		t.Fatalf("deep queue: %v/s, want about 78", rate())
	}
	if !strings.Contains(logs.String(), "auto pace: release rate changed") || !strings.Contains(logs.String(), "logic queue depth 900") {
		t.Fatalf("changes not logged with their reason:\n%s", logs)
	}
	if v := g.line.view(g.clock.Now()).Auto.Signals.QueueDepth; v == nil || *v != 900 {
		t.Fatalf("GET /admin/line signals depth %v, want 900", v)
	}
}

// testGauge sums every series of a metric in the gate's registry.
func testGauge(g *testGate, name string) float64 {
	mfs, _ := g.reg.Gather()
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
