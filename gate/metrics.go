package gate

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	leveev1 "levee/proto/leveev1"
)

// Connection results counted by gate_connections_total.
const (
	resultAccepted     = "accepted"
	resultUnauthorized = "unauthorized"
	resultLogicRefused = "logic_refused"
	resultRefused      = "refused"       // the admission hook said no
	resultShuttingDown = "shutting_down" // upgraded while the gate began to stop
	actionLogin        = "login"
	actionGetProfile   = "get_profile"
	actionBuyItem      = "buy_item"
	actionStartBattle  = "start_battle"
	actionInvalid      = "invalid" // a frame with no known payload
	outcomeOK          = "ok"
)

type gateMetrics struct {
	active      prometheus.Gauge
	connections *prometheus.CounterVec
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
}

// requestBuckets are finer than metrics.LatencyBuckets: 0.5 ms × 2^0..15
// (up to about 16 s), because a gate's fast drops take well under 10 ms.
var requestBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

func newMetrics(reg prometheus.Registerer) *gateMetrics {
	f := promauto.With(reg)
	m := &gateMetrics{
		active: f.NewGauge(prometheus.GaugeOpts{
			Name: "gate_active_connections",
			Help: "Player WebSocket connections currently open on this gate.",
		}),
		connections: f.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_connections_total",
			Help: "Upgraded player WebSocket connections, by how their start ended.",
		}, []string{"result"}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_requests_total",
			Help: "Player requests answered, by action and outcome (ok or the error code).",
		}, []string{"action", "outcome"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gate_request_duration_seconds",
			Help:    "Time from reading a player's request to writing its reply.",
			Buckets: requestBuckets,
		}, []string{"action"}),
	}
	for _, r := range []string{resultAccepted, resultUnauthorized, resultLogicRefused, resultRefused, resultShuttingDown} {
		m.connections.WithLabelValues(r)
	}
	return m
}

// outcomes maps every ErrorCode to its label: the name, lowercased, without
// the ERROR_CODE_ prefix.
var outcomes = func() map[leveev1.ErrorCode]string {
	m := map[leveev1.ErrorCode]string{}
	for n, name := range leveev1.ErrorCode_name {
		m[leveev1.ErrorCode(n)] = strings.ToLower(strings.TrimPrefix(name, "ERROR_CODE_"))
	}
	return m
}()

// outcome is the gate_requests_total outcome label of a reply.
func outcome(f *leveev1.ServerFrame) string {
	e := f.GetError()
	if e == nil {
		return outcomeOK
	}
	if o, ok := outcomes[e.GetCode()]; ok {
		return o
	}
	return "unknown"
}
