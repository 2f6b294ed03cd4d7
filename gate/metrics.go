package gate

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Connection results counted by gate_connections_total.
const (
	resultAccepted     = "accepted"
	resultUnauthorized = "unauthorized"
	resultLogicRefused = "logic_refused"
	resultRefused      = "refused"       // the admission line said no
	resultShuttingDown = "shutting_down" // upgraded while the gate began to stop
	resultServerFull   = "server_full"   // refused at the connection cap
	actionLogin        = "login"         // Levee's own: no game may declare it
	actionInvalid      = "invalid"       // a frame refused before its action was known
	outcomeOK          = "ok"
)

// Reasons counted by gate_rejections_total; the per-request ones are also
// counted by gate_request_rejections_total with the request's criticality.
const (
	reasonServerFull  = "server_full"         // the connection cap
	reasonHandshakes  = "handshakes"          // the cap on handshakes in progress
	reasonRateLimited = "rate_limited"        // a connection's token bucket was empty
	reasonInflight    = "inflight"            // a connection had too many requests in flight
	reasonCooling     = "logic_cooling"       // logic refused the shard's requests a moment ago (-logic-pushback)
	reasonPlayerRate  = "player_rate"         // the player's token bucket (all its connections) was empty (-player-rate)
	reasonAddrRate    = "addr_handshake_rate" // too many handshakes from the source address bucket (-addr-handshake-rate)
	reasonAddrConns   = "addr_conns"          // too many open connections from the source address bucket (-addr-max-conns)
)

// requestReasons are the per-request rejection reasons, in index order.
var requestReasons = [...]string{reasonRateLimited, reasonInflight, reasonCooling, reasonPlayerRate}

const (
	reqRateLimited = iota // index into requestReasons
	reqInflight
	reqCooling
	reqPlayerRate
)

type gateMetrics struct {
	auth        *authMetrics // token refusals by reason (auth.go)
	active      prometheus.Gauge
	connections *prometheus.CounterVec
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	rejections  *prometheus.CounterVec
	reqRejects  *prometheus.CounterVec
	upgrades    *prometheus.CounterVec
	handshakes  prometheus.GaugeFunc
	connPeak    prometheus.GaugeFunc // gate_connections_peak
	connCap     prometheus.Gauge     // gate_connection_cap
	// logicUnreachable counts requests refused BUSY without being sent
	// because their logic instance was unreachable.
	logicUnreachable prometheus.Counter
	// replaced counts connections replaced by a newer one of the same
	// player (gate_sessions_replaced_total).
	replaced prometheus.Counter
	// redirectFollowed and redirectTooMany count logic's NotOwner answers
	// (gate_logic_redirects_total{result}): followed to the owner, or one
	// hop too many, the request refused BUSY.
	redirectFollowed prometheus.Counter
	redirectTooMany  prometheus.Counter
	// ownerCache is gate_logic_owner_cache_size: shards with a cached owner.
	ownerCache prometheus.Gauge

	// Resolved once, so the refusal paths do no label look-ups.
	fullConns         prometheus.Counter // gate_connections_total{server_full}
	rejectFull        prometheus.Counter
	rejectHandshakes  prometheus.Counter
	rejectAddrRate    prometheus.Counter
	rejectAddrConns   prometheus.Counter
	rejectRequest     [len(requestReasons)]prometheus.Counter
	rejectRequestCrit [len(requestReasons)][priority.NumClasses]prometheus.Counter // [reason][Class.Index]

	line      *lineMetrics      // the admission line's
	keepalive *keepaliveMetrics // the keepalive's
}

// requestBuckets are finer than metrics.LatencyBuckets: 0.5 ms × 2^0..15
// (up to about 16 s), because a gate's fast drops take well under 10 ms.
var requestBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

// newMetrics registers the gate's metrics and resolves each of actions'
// own counters; handshakes reads the number of handshakes in progress,
// peak the most connection slots held at once, and connCap is the
// connection cap (0: off).
func newMetrics(reg prometheus.Registerer, actions map[string]*action, handshakes, peak func() float64, connCap int) *gateMetrics {
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
		logicUnreachable: f.NewCounter(prometheus.CounterOpts{
			Name: "gate_logic_unreachable_total",
			Help: "Player requests refused BUSY without being sent, because the connection to their logic instance was failing.",
		}),
		ownerCache: f.NewGauge(prometheus.GaugeOpts{
			Name: "gate_logic_owner_cache_size",
			Help: "Shards whose owner the gate learnt from a logic redirect and routes to directly (logic on PostgreSQL; always 0 with bbolt).",
		}),
		replaced: f.NewCounter(prometheus.CounterOpts{
			Name: "gate_sessions_replaced_total",
			Help: "Player connections closed with 4001 because a newer connection of the same player id took their place (one player, one place).",
		}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_requests_total",
			Help: "Player requests answered, by action and outcome (ok or the error code).",
		}, []string{"action", "outcome"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gate_request_duration_seconds",
			Help:    "Time from reading a player's request to writing its reply.",
			Buckets: requestBuckets,
		}, []string{"action"}),
		rejections: f.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_rejections_total",
			Help: "Connections and requests the gate's own overload protection refused, by reason " +
				"(server_full, handshakes, rate_limited, inflight, logic_cooling, player_rate, addr_handshake_rate, addr_conns).",
		}, []string{"reason"}),
		reqRejects: f.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_request_rejections_total",
			Help: "Requests the gate refused itself, by reason (rate_limited, inflight, logic_cooling, player_rate) and criticality.",
		}, []string{"reason", "criticality"}),
		upgrades: f.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_criticality_upgrades_refused_total",
			Help: "Requests whose frame asked for a higher criticality than the game declares for the action, by action; " +
				"the gate ignored the request's class and handled it with the declared one.",
		}, []string{"action"}),
	}
	m.handshakes = f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gate_handshakes_in_progress",
		Help: "Player connections starting: from the upgrade request until the player is welcomed or refused.",
	}, handshakes)
	m.connPeak = f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gate_connections_peak",
		Help: "The most player connections this gate held at once since it started (slots taken: upgrading, waiting in line and " +
			"logged in); never above gate_connection_cap when the cap is on.",
	}, peak)
	m.connCap = f.NewGauge(prometheus.GaugeOpts{
		Name: "gate_connection_cap",
		Help: "The connection cap (-max-conns) when -conn-cap is on, 0 when it is off.",
	})
	m.connCap.Set(float64(connCap))
	for _, r := range []string{resultAccepted, resultUnauthorized, resultLogicRefused, resultRefused, resultShuttingDown, resultServerFull} {
		m.connections.WithLabelValues(r)
	}
	redirects := f.NewCounterVec(prometheus.CounterOpts{
		Name: "gate_logic_redirects_total",
		Help: "Logic's answers that a shard is served by another logic process (not executed), by result: followed " +
			"(the request sent again to the owner) or too_many_hops (refused BUSY after " + strconv.Itoa(maxRedirects) + " hops).",
	}, []string{"result"})
	m.redirectFollowed = redirects.WithLabelValues("followed")
	m.redirectTooMany = redirects.WithLabelValues("too_many_hops")
	m.fullConns = m.connections.WithLabelValues(resultServerFull)
	m.rejectFull = m.rejections.WithLabelValues(reasonServerFull)
	m.rejectHandshakes = m.rejections.WithLabelValues(reasonHandshakes)
	m.rejectAddrRate = m.rejections.WithLabelValues(reasonAddrRate)
	m.rejectAddrConns = m.rejections.WithLabelValues(reasonAddrConns)
	for i, r := range requestReasons {
		m.rejectRequest[i] = m.rejections.WithLabelValues(r)
		for _, c := range priority.Classes {
			m.rejectRequestCrit[i][c] = m.reqRejects.WithLabelValues(r, c.String())
		}
	}
	for _, a := range actions { // a login is no frame and asks for nothing
		a.upgradeRefused = m.upgrades.WithLabelValues(a.name)
	}
	return m
}

// outcome is the gate_requests_total outcome label of a reply: ok, or the
// error code's label from the error table ("busy", "rejected").
func outcome(f *leveev2.ServerFrame) string {
	e := f.GetError()
	if e == nil {
		return outcomeOK
	}
	return apperr.Outcome(e.GetCode())
}
