package autopace

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/leveehq/levee/queue"
)

// Config is auto mode's settings (the gate's -auto-* flags).
type Config struct {
	MinRate, MaxRate float64 // players per second
	Up, Down         float64 // rate factors when healthy (> 1) and unhealthy (< 1)
	Interval         time.Duration

	MaxQueueDepth   float64       // sum of logic_queue_depth at or above: unhealthy
	MaxBattleP99    time.Duration // battle p99 at or above: unhealthy
	MaxBackpressure float64       // EWMA of logic's backpressure ratio above: unhealthy
}

// Pace is auto mode's rate controller: while the tiers below are healthy
// the release rate rises by a factor (Up) each interval, when they are not
// it falls by another (Down), always between the operator's bounds. The
// zero value is not usable; make one with New. A Pace is not safe for
// concurrent use: its owner (the gate's line) guards it.
//
// Rules, for one step with the signals of the last interval:
//   - a step sooner than 90 % of the interval after the previous one holds
//     (an operator's change does not make the rate move twice);
//   - any known signal over its threshold: unhealthy, the rate falls;
//   - no known signal at all (no metrics read, no logic replies): hold;
//   - otherwise healthy, and the rate rises, except on the first healthy
//     step after a fall, which holds: the signals lag the rate by an
//     interval, so the fall has not shown yet.
type Pace struct {
	cfg Config

	rate     float64 // current, players per second
	last     time.Time
	coolDown bool // the previous counted step was a fall

	lastDecision Decision
}

// Signals are the tiers' health as read for one interval. A signal whose
// Known flag is false is left out of the decision.
type Signals struct {
	QueueDepth   float64
	QueueKnown   bool
	BattleP99    time.Duration
	P99Known     bool
	Backpressure float64
	BPKnown      bool
	Errors       []string // scrapes that failed
}

// Decision is what one step decided.
type Decision struct {
	At      time.Time
	Old     float64
	Rate    float64
	Changed bool
	Verdict string // one of the Verdict constants
	Reason  string // the unhealthy signals, or why the rate held
}

// Verdicts of a step (the gate_line_auto_steps_total label).
const (
	VerdictHealthy   = "healthy"
	VerdictUnhealthy = "unhealthy"
	VerdictUnknown   = "no signals"
	VerdictCooling   = "cooling down"
	VerdictTooSoon   = "too soon"
)

// New is a Pace with cfg starting at rate (per second), brought inside
// the bounds.
func New(cfg Config, rate float64) Pace {
	p := Pace{cfg: cfg}
	p.rate = p.Clamp(rate)
	return p
}

// Config is the controller's settings, the bounds as last set.
func (p *Pace) Config() Config { return p.cfg }

// Rate is the current rate, players per second.
func (p *Pace) Rate() float64 { return p.rate }

// Last is the last step's decision; its At is zero before the first step.
func (p *Pace) Last() Decision { return p.lastDecision }

// Clamp brings r inside the bounds.
func (p *Pace) Clamp(r float64) float64 { return math.Min(math.Max(r, p.cfg.MinRate), p.cfg.MaxRate) }

// SetBounds changes the bounds (lo <= hi, checked by the caller) and
// brings the rate inside them.
func (p *Pace) SetBounds(lo, hi float64) {
	p.cfg.MinRate, p.cfg.MaxRate = lo, hi
	p.rate = p.Clamp(p.rate)
}

// SetRate sets the current rate (an operator's, or the one applied),
// brought inside the bounds.
func (p *Pace) SetRate(r float64) { p.rate = p.Clamp(r) }

// Restart forgets the previous step, for a switch into auto mode: the next
// step counts at once and does not hold for an old fall.
func (p *Pace) Restart() { p.last, p.coolDown = time.Time{}, false }

// Step decides the rate for the next interval from the signals read at now.
func (p *Pace) Step(now time.Time, s Signals) Decision {
	d := Decision{At: now, Old: p.rate, Rate: p.rate}
	if !p.last.IsZero() && now.Sub(p.last) < p.cfg.Interval*9/10 {
		d.Verdict = VerdictTooSoon
		return d
	}
	p.last = now
	var bad []string
	if s.QueueKnown && s.QueueDepth >= p.cfg.MaxQueueDepth {
		bad = append(bad, fmt.Sprintf("logic queue depth %g >= %g", s.QueueDepth, p.cfg.MaxQueueDepth))
	}
	if s.P99Known && s.BattleP99 >= p.cfg.MaxBattleP99 {
		bad = append(bad, fmt.Sprintf("battle p99 %v >= %v", s.BattleP99, p.cfg.MaxBattleP99))
	}
	if s.BPKnown && s.Backpressure > p.cfg.MaxBackpressure {
		bad = append(bad, fmt.Sprintf("logic backpressure %.2f > %.2f", s.Backpressure, p.cfg.MaxBackpressure))
	}
	switch {
	case len(bad) > 0:
		d.Verdict, d.Reason = VerdictUnhealthy, strings.Join(bad, "; ")
		p.rate = p.Clamp(p.rate * p.cfg.Down)
		p.coolDown = true
	case !s.QueueKnown && !s.P99Known && !s.BPKnown:
		d.Verdict, d.Reason = VerdictUnknown, "no metrics read and no logic replies seen; holding the rate"
	case p.coolDown:
		d.Verdict, d.Reason = VerdictCooling, "first healthy interval after a decrease; holding the rate"
		p.coolDown = false
	default:
		d.Verdict = VerdictHealthy
		p.rate = p.Clamp(p.rate * p.cfg.Up)
	}
	d.Rate = p.rate
	d.Changed = d.Rate != d.Old
	if !d.Changed && d.Reason == "" {
		switch d.Rate {
		case p.cfg.MaxRate:
			d.Reason = "at -auto-max-rate"
		case p.cfg.MinRate:
			d.Reason = "at -auto-min-rate"
		}
	}
	p.lastDecision = d
	return d
}

// RateFor is perSecond as a queue rate over interval: N per interval when
// that is at least one, else one per 1/perSecond.
func RateFor(perSecond float64, interval time.Duration) queue.Rate {
	if n := perSecond * interval.Seconds(); n >= 1 {
		r := queue.Rate{N: int(min(math.Round(n), float64(math.MaxInt32))), Interval: interval}
		if r.Validate() == nil {
			return r
		}
	}
	iv := time.Duration(float64(time.Second) / perSecond)
	return queue.Rate{N: 1, Interval: min(max(iv, queue.MinInterval), queue.MaxInterval)}
}
