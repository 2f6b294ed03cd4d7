package logic

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/leveehq/levee/internal/gamedef"
)

// tierMetrics are the logic tier's own series, registered on the server's
// registry.
type tierMetrics struct {
	queueDepth  *prometheus.GaugeVec
	requests    *prometheus.CounterVec
	duration    prometheus.Histogram
	batchSize   prometheus.Histogram
	commitTime  prometheus.Histogram
	storeErrors *prometheus.CounterVec
	rejections  *prometheus.CounterVec
	blocked     prometheus.Gauge
	battleCalls *prometheus.CounterVec
	retries     *prometheus.CounterVec
	battleWaits *prometheus.CounterVec
	battleLimit *prometheus.GaugeVec

	battleInstances prometheus.Gauge
	battleResolves  *prometheus.CounterVec

	handlerDuration *prometheus.HistogramVec
	handlerPanics   *prometheus.CounterVec

	notOwner *prometheus.CounterVec
}

// handlerSeries are the handler series of every action of def, and of the
// login (the initial state), created at zero so that a rate over them
// exists from the start.
func (m *tierMetrics) handlerSeries(def *gamedef.Def) map[string]*handlerMetrics {
	out := map[string]*handlerMetrics{}
	names := []string{gamedef.LoginAction}
	for _, a := range def.Actions() {
		names = append(names, a.Name)
	}
	for _, n := range names {
		out[n] = &handlerMetrics{duration: m.handlerDuration.WithLabelValues(n), panics: m.handlerPanics.WithLabelValues(n)}
	}
	return out
}

// HandlerBudget is how long a game's handler may hold its shard per call:
// the alert LeveeHandlerSlow fires when an action's p99 is above it.
const HandlerBudget = time.Millisecond

// logic_rejections_total reasons.
const (
	reasonQueueFull     = "queue_full"
	reasonWaitEstimate  = "wait_estimate"
	reasonQueueWait     = "queue_wait"
	reasonExpired       = "expired"
	reasonBattleCooling = "battle_cooling"
)

// logic_not_owner_total reasons.
const (
	notOwnerRedirect = "redirect" // the owner is known: apperr.NotOwner
	notOwnerNone     = "no_owner" // it is not: apperr.NoOwner
)

// logic_store_errors_total ops.
const (
	storeOpCommit = "commit"
	storeOpPurge  = "purge"
)

// logic_battle_calls_total outcome of a call refused locally because every
// battle instance was cooling (no RPC was made).
const outcomeCooling = "cooling"

// logic_battle_retries_total outcomes.
const (
	retryOK        = "ok"
	retryFailed    = "failed"
	retryThrottled = "throttled"
	retryCooling   = "cooling"
)

func newMetrics(reg prometheus.Registerer) *tierMetrics {
	f := promauto.With(reg)
	m := &tierMetrics{
		queueDepth: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "logic_queue_depth",
			Help: "Requests waiting in each shard's channel.",
		}, []string{"shard"}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "logic_requests_total",
			Help: "Requests answered, by action and outcome (ok, replayed, rejected, busy, expired, wrong_shard, not_owner, no_owner, invalid, shutting_down, failed).",
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
		storeErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "logic_store_errors_total",
			Help: "Failed writes to a shard's store (its bbolt file or PostgreSQL), by op (commit: a group commit, whose mutations were all refused and nothing of it kept; " +
				"purge: removing expired outcomes, tried again later) and reason (no_space: the file system is full or out of quota, " +
				"the commit's mutations answered UNAVAILABLE with a retry delay; unavailable: the database could not be reached, answered UNAVAILABLE with a retry delay; " +
				"fenced: the shard's lease is another process's, answered UNAVAILABLE with a retry delay; conflict: another process wrote the shard (an outcome already stored), " +
				"answered UNAVAILABLE with a retry delay; io: any other failure, answered INTERNAL).",
		}, []string{"op", "reason"}),
		rejections: f.NewCounterVec(prometheus.CounterOpts{
			Name: "logic_rejections_total",
			Help: "Requests a shard refused unexecuted, by shard, reason and criticality (critical, default, sheddable). " +
				"queue_full: refused at admission because the channel was past the class's fill threshold (RESOURCE_EXHAUSTED). " +
				"wait_estimate: refused at admission because queue depth x measured time per request exceeded -queue-max-wait (half of it for sheddable; RESOURCE_EXHAUSTED). " +
				"queue_wait: picked up after waiting longer than 2 x -queue-max-wait and answered busy unexecuted (RESOURCE_EXHAUSTED; never critical requests). " +
				"battle_cooling: a request for an action that runs a job refused at admission because every battle instance was cooling after refusing (RESOURCE_EXHAUSTED). " +
				"expired: the caller's deadline passed while the request waited in (or, with -reject-early off, for) the channel (DEADLINE_EXCEEDED).",
		}, []string{"shard", "reason", "criticality"}),
		blocked: f.NewGauge(prometheus.GaugeOpts{
			Name: "logic_enqueue_blocked",
			Help: "Requests waiting for room in a full shard channel; only with -reject-early off (or -protection off), otherwise always 0.",
		}),
		battleCalls: f.NewCounterVec(prometheus.CounterOpts{
			Name: "logic_battle_calls_total",
			Help: "Attempts at a battle call (a retry is a second attempt), by outcome (ok, busy, unavailable, deadline, error); " +
				"cooling: a call refused locally with no RPC because every battle instance was cooling after a refusal (-battle-pushback).",
		}, []string{"outcome"}),
		retries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "logic_battle_retries_total",
			Help: "Failed battle calls considered for a retry on another instance, by outcome: ok and failed (the retry's result), throttled (not retried: the retry throttle's tokens were at or below half), " +
				"cooling (not retried: every other instance was cooling after a refusal).",
		}, []string{"outcome"}),
	}
	m.handlerDuration = f.NewHistogramVec(prometheus.HistogramOpts{
		Name: "logic_handler_duration_seconds",
		Help: "Time inside the game's code on the shard (its handler, job start and continuation, key and target functions, the initial state), by action " +
			"(login: the initial state). The shard's other players wait meanwhile; the budget is 1 ms per call (alert LeveeHandlerSlow).",
		Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1},
	}, []string{"action"})
	m.handlerPanics = f.NewCounterVec(prometheus.CounterOpts{
		Name: "logic_handler_panics_total",
		Help: "Calls of the game's code that panicked, by action: each failed its own request with INTERNAL and changed nothing; the shard went on.",
	}, []string{"action"})
	m.battleWaits = f.NewCounterVec(prometheus.CounterOpts{
		Name: "logic_battle_waits_total",
		Help: "Battle calls that found every battle instance at its adaptive concurrency limit and waited for a slot (-battle-wait), " +
			"by outcome: slot (one freed in time), timeout (none did; refused), full (-battle-waiters were waiting already; refused at once).",
	}, []string{"outcome"})
	m.battleLimit = f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "logic_battle_limit",
		Help: "The adaptive concurrency limit logic keeps for each battle instance (-battle-pushback, -battle-rtt-tolerance): calls past it wait (-battle-wait) or are refused.",
	}, []string{"instance"})
	m.battleInstances = f.NewGauge(prometheus.GaugeOpts{
		Name: "logic_battle_instances",
		Help: "Battle instances logic calls: the -battle-addrs list, or the addresses its dns:/// name last resolved to.",
	})
	m.battleResolves = f.NewCounterVec(prometheus.CounterOpts{
		Name: "logic_battle_resolve_total",
		Help: "DNS lookups of a dns:/// -battle-addrs, by result: ok (addresses found; the instances follow them), " +
			"empty (no address) and error (the lookup failed), both of which keep the last known instances.",
	}, []string{"result"})
	m.notOwner = f.NewCounterVec(prometheus.CounterOpts{
		Name: "logic_not_owner_total",
		Help: "Requests for a shard this process does not hold (-store=postgres), refused unexecuted, by reason: " +
			"redirect (another process holds its lease: FAILED_PRECONDITION naming the owner's address, which the gate follows), " +
			"no_owner (no live owner known, the shard is moving: UNAVAILABLE with a retry_after of about -lease-renew).",
	}, []string{"reason"})
	for _, r := range []string{notOwnerRedirect, notOwnerNone} {
		m.notOwner.WithLabelValues(r)
	}
	for _, r := range []string{resolveOK, resolveEmpty, resolveError} {
		m.battleResolves.WithLabelValues(r)
	}
	for _, o := range []string{waitSlot, waitTimeout, waitFull} {
		m.battleWaits.WithLabelValues(o)
	}
	for _, o := range []string{retryOK, retryFailed, retryThrottled, retryCooling} {
		m.retries.WithLabelValues(o)
	}
	m.battleCalls.WithLabelValues(outcomeCooling)
	for _, op := range []string{storeOpCommit, storeOpPurge} {
		for _, r := range storeReasons {
			m.storeErrors.WithLabelValues(op, r)
		}
	}
	return m
}
