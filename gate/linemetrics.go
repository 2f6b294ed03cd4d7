package gate

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/leveehq/levee/queue"
)

// lineWaitBuckets are gate_line_wait_seconds' buckets: 0.5 s to 30 min.
var lineWaitBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 180, 300, 450, 600, 900, 1200, 1800}

// lineMetrics are the admission line's metrics.
type lineMetrics struct {
	length       prometheus.Gauge
	waiting      prometheus.Gauge
	admitted     prometheus.Counter
	releaseRate  prometheus.Gauge
	measuredRate prometheus.Gauge
	wait         prometheus.Histogram
	refusals     map[string]prometheus.Counter
	passes       map[string]prometheus.Counter
	mode         *prometheus.GaugeVec
	pushes       [numPushResults]prometheus.Counter
	reasons      [numPushReasons]prometheus.Counter // [reasonNone] stays nil
	autoChanges  *prometheus.CounterVec
	autoSteps    *prometheus.CounterVec
}

func newLineMetrics(reg prometheus.Registerer) *lineMetrics {
	f := promauto.With(reg)
	m := &lineMetrics{
		length: f.NewGauge(prometheus.GaugeOpts{
			Name: "gate_line_length",
			Help: "Players in this gate's admission line (those away within their grace period included).",
		}),
		waiting: f.NewGauge(prometheus.GaugeOpts{
			Name: "gate_line_waiting",
			Help: "Players in the admission line with their connection open.",
		}),
		admitted: f.NewCounter(prometheus.CounterOpts{
			Name: "gate_line_admitted_total",
			Help: "Players the admission line let in: at once (open mode, empty line; an admission pass) or after waiting.",
		}),
		releaseRate: f.NewGauge(prometheus.GaugeOpts{
			Name: "gate_line_release_rate",
			Help: "Configured release rate of the admission line, players per second (in auto mode, the auto pacer's).",
		}),
		measuredRate: f.NewGauge(prometheus.GaugeOpts{
			Name: "gate_line_measured_rate",
			Help: "Measured release rate of the admission line over its window, players per second (0 until measured).",
		}),
		wait: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "gate_line_wait_seconds",
			Help:    "Time from joining the admission line to being let in, for players who waited.",
			Buckets: lineWaitBuckets,
		}),
		refusals: map[string]prometheus.Counter{},
		passes:   map[string]prometheus.Counter{},
		mode: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gate_line_mode",
			Help: "The admission line's mode: 1 for the current one (open, queueing, paced, closed, auto).",
		}, []string{"mode"}),
		autoChanges: f.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_line_auto_changes_total",
			Help: "Release rate changes made by auto mode, by direction (up, down).",
		}, []string{"direction"}),
		autoSteps: f.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_line_auto_steps_total",
			Help: "Auto mode decisions, by verdict (healthy, unhealthy, no signals, cooling down, too soon).",
		}, []string{"verdict"}),
	}
	refusals := f.NewCounterVec(prometheus.CounterOpts{
		Name: "gate_line_refusals_total",
		Help: "Players the admission line turned away, by reason (full, closed, bad_ticket, ticket_in_use).",
	}, []string{"reason"})
	for _, r := range lineRefusalReasons {
		m.refusals[r] = refusals.WithLabelValues(r)
	}
	passes := f.NewCounterVec(prometheus.CounterOpts{
		Name: "gate_line_passes_total",
		Help: "Admission passes presented, by result (admitted: another line's in the return window, let in at once; " +
			"priority: the priority lane; replayed: already honoured in this run; expired: this line's, grace over or used; " +
			"foreign_late: another line's after the return window; full: too many taken in the window). " +
			"replayed, expired, foreign_late and full join the back of the line.",
	}, []string{"result"})
	for _, r := range passResults {
		m.passes[r] = passes.WithLabelValues(r)
	}
	pushes := f.NewCounterVec(prometheus.CounterOpts{
		Name: "gate_line_pushes_total",
		Help: "QueueStatus pushes to waiting players, by result (sent; skipped: another write to the player was in progress, or it was closing; failed: the socket was closed).",
	}, []string{"result"})
	for i, r := range pushResults {
		m.pushes[i] = pushes.WithLabelValues(r)
	}
	reasons := f.NewCounterVec(prometheus.CounterOpts{
		Name: "gate_line_push_reasons_total",
		Help: "QueueStatus pushes sent to waiting players, by why (first: the connection's first, with the ticket; " +
			"mode_rate: the line's mode or release rate changed; moved: the position moved by 10 % or more; " +
			"eta: the ETA changed by 10 % and 1 s or more; heartbeat: nothing changed for a while). They add up to gate_line_pushes_total{result=\"sent\"}.",
	}, []string{"reason"})
	for i, r := range pushReasons {
		if i != reasonNone {
			m.reasons[i] = reasons.WithLabelValues(r)
		}
	}
	for _, d := range []string{"up", "down"} {
		m.autoChanges.WithLabelValues(d)
	}
	return m
}

// setMode sets gate_line_mode.
func (m *lineMetrics) setMode(name string) {
	for _, n := range lineModes {
		v := 0.0
		if n == name {
			v = 1
		}
		m.mode.WithLabelValues(n).Set(v)
	}
}

// observe updates the gauges from a snapshot of the line.
func (m *lineMetrics) observe(st queue.Stats) {
	m.length.Set(float64(st.Length))
	m.waiting.Set(float64(st.Length - st.Away))
	m.measuredRate.Set(st.MeasuredPerSecond)
}

// pushed counts one push: its result and, once written, its reason.
func (m *lineMetrics) pushed(result, reason int) {
	m.pushes[result].Inc()
	if result == pushSent && reason != reasonNone {
		m.reasons[reason].Inc()
	}
}

func (m *lineMetrics) autoVerdict(v string) { m.autoSteps.WithLabelValues(v).Inc() }
