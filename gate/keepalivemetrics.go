package gate

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Results of one keepalive ping, counted by gate_keepalive_pings_total.
const (
	pingSent    = iota // written
	pingFailed         // the write failed; the socket is closed
	pingSkipped        // another write to the player was in progress; pinged next turn
	numPingResults
)

var pingResults = [numPingResults]string{"sent", "failed", "skipped"}

// keepaliveLagBuckets are gate_keepalive_lag_seconds' buckets: 1 ms to
// about 65 s.
var keepaliveLagBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

// keepaliveMetrics are the keepalive's metrics (keepalive.go).
type keepaliveMetrics struct {
	lag     prometheus.Histogram
	excused prometheus.Counter
	drops   prometheus.Counter
	unread  prometheus.Counter
	pings   [numPingResults]prometheus.Counter
}

func newKeepaliveMetrics(reg prometheus.Registerer) *keepaliveMetrics {
	f := promauto.With(reg)
	m := &keepaliveMetrics{
		lag: f.NewHistogram(prometheus.HistogramOpts{
			Name: "gate_keepalive_lag_seconds",
			Help: "How late each keepalive round started, beyond its step after the previous one " +
				"(the process was starved of CPU, stopped, or its ping writes lagged); 0 when on time.",
			Buckets: keepaliveLagBuckets,
		}),
		excused: f.NewCounter(prometheus.CounterOpts{
			Name: "gate_keepalive_excused_seconds_total",
			Help: "Keepalive lateness added to every player's liveness deadline, so the gate does not drop players for its own delays.",
		}),
		drops: f.NewCounter(prometheus.CounterOpts{
			Name: "gate_keepalive_drops_total",
			Help: "Players dropped because nothing arrived from them for -ping-interval + -pong-timeout after a ping.",
		}),
		unread: f.NewCounter(prometheus.CounterOpts{
			Name: "gate_keepalive_unread_reprieves_total",
			Help: "Players past their deadline who were kept because bytes from them waited unread on the socket (the gate's readers were behind).",
		}),
	}
	pings := f.NewCounterVec(prometheus.CounterOpts{
		Name: "gate_keepalive_pings_total",
		Help: "Keepalive pings, by result (sent; failed: the write failed and the socket was closed; skipped: another write to the player was in progress, pinged at its next turn).",
	}, []string{"result"})
	for i, r := range pingResults {
		m.pings[i] = pings.WithLabelValues(r)
	}
	return m
}
