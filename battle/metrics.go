package battle

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/leveehq/levee/internal/metrics"
	"github.com/leveehq/levee/internal/priority"
)

// Outcomes of a Jobs.Run call, the values of battle_requests_total{outcome}.
// Every request ends in exactly one.
const (
	outcomeOK         = "ok"
	outcomeBadRequest = "bad_request" // an unknown job, a request that does not decode, or the job's game.Invalid
	outcomeShed       = "shed"        // refused under load; battle_shed_total says why
	outcomeCancelled  = "cancelled"   // the caller went away or its deadline passed, before or during the job
	outcomeGameError  = "game_error"  // the job's own Reject, NotFound or Forbidden: an answer, passed on with its reason
	outcomeError      = "error"       // the job failed otherwise, or panicked: INTERNAL
)

// JobLabel is the label that names the game's job on the per-job metrics
// (battle_latency_seconds, battle_job_panics_total). It is not "job":
// Prometheus gives every scraped series its own job label (the scrape
// job, which the tier-wide rules and the HPA select on) and would rename a
// "job" of the tier's to exported_job.
const JobLabel = "game_job"

// ThrottleDelayBuckets are battle_throttle_delay_seconds' buckets: 1 ms × 2^0..9
// (up to about half a second), around the default 0–100 ms.
var ThrottleDelayBuckets = prometheus.ExponentialBuckets(0.001, 2, 10)

type serverMetrics struct {
	latency  *prometheus.HistogramVec // by JobLabel
	panics   *prometheus.CounterVec   // by JobLabel
	inflight prometheus.Gauge
	requests *prometheus.CounterVec
	shed     *prometheus.CounterVec
	// shedBy holds shed's children, resolved once: [reason][Class.Index].
	shedBy   [numRefusals][priority.NumClasses]prometheus.Counter
	throttle prometheus.Histogram
}

// newServerMetrics registers the tier's metrics on reg. cpu and limit are
// read at scrape time for the battle_cpu_utilization and
// battle_adaptive_limit gauges, so keeping them current costs nothing on the
// request path.
func newServerMetrics(reg prometheus.Registerer, cpu, limit func() float64) *serverMetrics {
	f := promauto.With(reg)
	m := &serverMetrics{
		latency: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "battle_latency_seconds",
			Help:    "Time to run one completed job, in seconds, by the game's job (game_job); the autoscaler's histogram, summed over jobs.",
			Buckets: metrics.LatencyBuckets,
		}, []string{JobLabel}),
		panics: f.NewCounterVec(prometheus.CounterOpts{
			Name: "battle_job_panics_total",
			Help: "Job runs that panicked (each failed its own call with INTERNAL), by the game's job (game_job).",
		}, []string{JobLabel}),
		inflight: f.NewGauge(prometheus.GaugeOpts{
			Name: "battle_inflight",
			Help: "Jobs running now.",
		}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "battle_requests_total",
			Help: "Jobs.Run requests by outcome (ok, bad_request, shed, cancelled, game_error, error).",
		}, []string{"outcome"}),
		shed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "battle_shed_total",
			Help: "Requests refused under load, by reason (adaptive: the adaptive shedder; inflight_cap: the hard in-flight cap) and criticality.",
		}, []string{"reason", "criticality"}),
		throttle: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "battle_throttle_delay_seconds",
			Help:    "Delays the CPU throttle imposed before a job, in seconds (only requests it delayed).",
			Buckets: ThrottleDelayBuckets,
		}),
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "battle_cpu_utilization",
		Help: "Smoothed CPU utilisation (0..1) of the CPUs this process may use, as the throttle and the shedder see it.",
	}, cpu)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "battle_adaptive_limit",
		Help: "The adaptive shedder's in-flight limit (maxPass x minRTT); 0 while there is no estimate yet.",
	}, limit)
	for _, o := range []string{outcomeOK, outcomeBadRequest, outcomeShed, outcomeCancelled, outcomeGameError, outcomeError} {
		m.requests.WithLabelValues(o)
	}
	for r := refusedAdaptive; r < numRefusals; r++ {
		for _, c := range priority.Classes {
			m.shedBy[r][c] = m.shed.WithLabelValues(refusalReasons[r], c.String())
		}
	}
	return m
}
