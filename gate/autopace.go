package gate

import (
	"fmt"
	"math"
	"strings"
	"time"

	"levee/queue"
)

// autoPace is auto mode's rate controller: while the tiers below are
// healthy the release rate rises by a factor (Up) each interval, when they
// are not it falls by another (Down), always between the operator's bounds.
// It is pure: no goroutines, no I/O, and the time is passed in, so every
// decision is a unit test away.
//
// Rules, for one step with the signals of the last interval:
//   - a step sooner than 90 % of the interval after the previous one holds
//     (an operator's change does not make the rate move twice);
//   - any known signal over its threshold: unhealthy, the rate falls;
//   - no known signal at all (no metrics read, no logic replies): hold;
//   - otherwise healthy, and the rate rises, except on the first healthy
//     step after a fall, which holds: the signals lag the rate by an
//     interval, so the fall has not shown yet.
type autoPace struct {
	min, max float64 // players per second
	up, down float64
	interval time.Duration
	th       autoThresholds

	rate     float64 // current, players per second
	last     time.Time
	coolDown bool // the previous counted step was a fall

	lastDecision autoDecision // the last decision, for GET /admin/line
}

// autoThresholds say when a signal is unhealthy.
type autoThresholds struct {
	maxQueueDepth   float64       // sum of logic_queue_depth at or above: unhealthy
	maxP99          time.Duration // battle p99 at or above: unhealthy
	maxBackpressure float64       // EWMA of logic's backpressure ratio above: unhealthy
}

// autoSignals are the tiers' health as read for one interval. A signal
// whose Known flag is false is left out of the decision.
type autoSignals struct {
	QueueDepth   float64
	QueueKnown   bool
	BattleP99    time.Duration
	P99Known     bool
	Backpressure float64
	BPKnown      bool
	Errors       []string // scrapes that failed
}

// autoDecision is what one step decided.
type autoDecision struct {
	At      time.Time
	Old     float64
	Rate    float64
	Changed bool
	Verdict string // healthy, unhealthy, no signals, cooling down, too soon
	Reason  string // the unhealthy signals, or why the rate held
}

// Verdicts of a step.
const (
	verdictHealthy   = "healthy"
	verdictUnhealthy = "unhealthy"
	verdictUnknown   = "no signals"
	verdictCooling   = "cooling down"
	verdictTooSoon   = "too soon"
)

func newAutoPace(cfg Config) autoPace {
	a := autoPace{
		min: cfg.AutoMinRate, max: cfg.AutoMaxRate, up: cfg.AutoUp, down: cfg.AutoDown, interval: cfg.AutoInterval,
		th: autoThresholds{
			maxQueueDepth:   float64(cfg.AutoMaxQueueDepth),
			maxP99:          cfg.AutoBattleP99,
			maxBackpressure: cfg.AutoMaxBackpressure,
		},
	}
	a.rate = a.clamp(queue.Rate{N: cfg.LineRate, Interval: cfg.LineInterval}.PerSecond())
	return a
}

func (a *autoPace) clamp(r float64) float64 { return math.Min(math.Max(r, a.min), a.max) }

// setBounds changes the bounds (min <= max, checked by the caller) and
// brings the rate inside them.
func (a *autoPace) setBounds(lo, hi float64) {
	a.min, a.max = lo, hi
	a.rate = a.clamp(a.rate)
}

// step decides the rate for the next interval from the signals read at now.
func (a *autoPace) step(now time.Time, s autoSignals) autoDecision {
	d := autoDecision{At: now, Old: a.rate, Rate: a.rate}
	if !a.last.IsZero() && now.Sub(a.last) < a.interval*9/10 {
		d.Verdict = verdictTooSoon
		return d
	}
	a.last = now
	var bad []string
	if s.QueueKnown && s.QueueDepth >= a.th.maxQueueDepth {
		bad = append(bad, fmt.Sprintf("logic queue depth %g >= %g", s.QueueDepth, a.th.maxQueueDepth))
	}
	if s.P99Known && s.BattleP99 >= a.th.maxP99 {
		bad = append(bad, fmt.Sprintf("battle p99 %v >= %v", s.BattleP99, a.th.maxP99))
	}
	if s.BPKnown && s.Backpressure > a.th.maxBackpressure {
		bad = append(bad, fmt.Sprintf("logic backpressure %.2f > %.2f", s.Backpressure, a.th.maxBackpressure))
	}
	switch {
	case len(bad) > 0:
		d.Verdict, d.Reason = verdictUnhealthy, strings.Join(bad, "; ")
		a.rate = a.clamp(a.rate * a.down)
		a.coolDown = true
	case !s.QueueKnown && !s.P99Known && !s.BPKnown:
		d.Verdict, d.Reason = verdictUnknown, "no metrics read and no logic replies seen; holding the rate"
	case a.coolDown:
		d.Verdict, d.Reason = verdictCooling, "first healthy interval after a decrease; holding the rate"
		a.coolDown = false
	default:
		d.Verdict = verdictHealthy
		a.rate = a.clamp(a.rate * a.up)
	}
	d.Rate = a.rate
	d.Changed = d.Rate != d.Old
	if !d.Changed && d.Reason == "" {
		switch d.Rate {
		case a.max:
			d.Reason = "at -auto-max-rate"
		case a.min:
			d.Reason = "at -auto-min-rate"
		}
	}
	a.lastDecision = d
	return d
}

// rateFor is perSecond as a queue rate over interval: N per interval when
// that is at least one, else one per 1/perSecond.
func rateFor(perSecond float64, interval time.Duration) queue.Rate {
	if n := perSecond * interval.Seconds(); n >= 1 {
		r := queue.Rate{N: int(min(math.Round(n), float64(math.MaxInt32))), Interval: interval}
		if r.Validate() == nil {
			return r
		}
	}
	iv := time.Duration(float64(time.Second) / perSecond)
	return queue.Rate{N: 1, Interval: min(max(iv, queue.MinInterval), queue.MaxInterval)}
}
