package logic

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// tierMetrics are the logic tier's own series, registered on the server's
// registry.
type tierMetrics struct {
	queueDepth  *prometheus.GaugeVec
	requests    *prometheus.CounterVec
	duration    prometheus.Histogram
	batchSize   prometheus.Histogram
	commitTime  prometheus.Histogram
	expired     prometheus.Counter
	battleCalls *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *tierMetrics {
	f := promauto.With(reg)
	return &tierMetrics{
		queueDepth: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "logic_queue_depth",
			Help: "Requests waiting in each shard's channel.",
		}, []string{"shard"}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "logic_requests_total",
			Help: "Requests answered, by action and outcome (ok, replayed, rejected, busy, expired, wrong_shard, invalid, shutting_down, failed).",
		}, []string{"action", "outcome"}),
		duration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "logic_request_duration_seconds",
			Help:    "Time from a request's arrival to its reply, queueing, commit and battle included.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16), // 0.25 ms .. 8 s
		}),
		batchSize: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "logic_commit_batch_size",
			Help:    "Mutations written by one group commit (one bbolt transaction, one fsync).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10), // 1 .. 512
		}),
		commitTime: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "logic_commit_duration_seconds",
			Help:    "Time one group commit takes, fsync included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14), // 0.1 ms .. 0.8 s
		}),
		expired: f.NewCounter(prometheus.CounterOpts{
			Name: "logic_expired_total",
			Help: "Requests dropped unexecuted because their caller's context was done when the shard picked them up.",
		}),
		battleCalls: f.NewCounterVec(prometheus.CounterOpts{
			Name: "logic_battle_calls_total",
			Help: "Calls to the battle tier, by outcome (ok, busy, unavailable, deadline, error).",
		}, []string{"outcome"}),
	}
}
