package battle

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"levee/internal/metrics"
)

// Outcomes of a Simulate call, the values of battle_requests_total{outcome}.
const (
	outcomeOK         = "ok"
	outcomeBadRequest = "bad_request"
	outcomeBusy       = "busy"
	outcomeCancelled  = "cancelled"
	outcomeError      = "error"
)

type serverMetrics struct {
	latency  prometheus.Histogram
	inflight prometheus.Gauge
	requests *prometheus.CounterVec
}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	f := promauto.With(reg)
	m := &serverMetrics{
		latency: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "battle_latency_seconds",
			Help:    "Time to run one completed battle simulation, in seconds.",
			Buckets: metrics.LatencyBuckets,
		}),
		inflight: f.NewGauge(prometheus.GaugeOpts{
			Name: "battle_inflight",
			Help: "Battle simulations running now.",
		}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "battle_requests_total",
			Help: "Simulate requests by outcome (ok, bad_request, busy, cancelled, error).",
		}, []string{"outcome"}),
	}
	for _, o := range []string{outcomeOK, outcomeBadRequest, outcomeBusy, outcomeCancelled, outcomeError} {
		m.requests.WithLabelValues(o)
	}
	return m
}
