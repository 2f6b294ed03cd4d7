package loadtest

import (
	"context"
	"fmt"
	"math"
	"time"
)

// The capacity search: the closed loop's C0 is only a first guess at what
// the cluster serves at an even, open-loop pace: it can understate it (a
// protected cluster refuses some of the loop's bursts) or overstate it (the
// cheap critical purchases in the mix keep being served while battles are
// refused, and the loop runs faster). So after it an open loop is offered
// stepped rates, CapacityStepTime each. When the first step, at C0, holds,
// the steps climb, C0 × searchFactor(k), until one does not hold; when it
// does not, they descend, × downFactor a step, until one holds. C is the
// served rate of the best step that held.

// CapacityStep is one step of the capacity search.
type CapacityStep struct {
	Factor float64 `json:"factor"`            // of C0
	Rate   float64 `json:"target_rate_per_s"` // offered (asked for)
	// Served is served replies per second of the step's window (its
	// goodput); ServedRatio is served requests / requests the step planned.
	Served      float64       `json:"served_per_s"`
	ServedRatio float64       `json:"served_ratio"`
	P99         time.Duration `json:"p99_served_ns"`
	P99FromDue  time.Duration `json:"p99_served_from_due_ns"` // reported only: Held judges P99, from the send
	Held        bool          `json:"held"`                   // ServedRatio ≥ the minimum and P99 within the SLO
	Phase       *PhaseReport  `json:"phase"`
}

// searchFactor is step k's multiple of C0: 1, 1.25, 1.5, 1.75, 2, 2.5, 3,
// 4, then × 1.25 a step.
func searchFactor(k int) float64 {
	fs := [...]float64{1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4}
	if k < len(fs) {
		return fs[k]
	}
	return 4 * math.Pow(1.25, float64(k-len(fs)+1))
}

// downFactor is each descending step's multiple of the one before.
const downFactor = 0.85

// capacitySearch is the search's rule, a pure function of the steps so far.
type capacitySearch struct {
	C0        float64       // the closed loop's estimate
	MaxRate   float64       // no step offers more
	MaxSteps  int           // the time bound: search time / step time
	MinServed float64       // a step holds when served/offered ≥ this ...
	P99SLO    time.Duration // ... and p99 of served ≤ this
}

// held judges one step.
func (s capacitySearch) held(st CapacityStep) bool {
	return st.ServedRatio >= s.MinServed && st.P99 > 0 && st.P99 <= s.P99SLO
}

// nextStep is the rate of the next step, or done with C (the served rate of
// the best step that held, else the most served seen, else C0 when no step
// ran) and why the search ended.
func (s capacitySearch) nextStep(steps []CapacityStep) (rate float64, done bool, c float64, why string) {
	c = searchResult(steps)
	k := len(steps)
	descending := k > 0 && !steps[0].Held
	switch {
	case s.C0 <= 0:
		return 0, true, 0, "no closed-loop estimate"
	case descending && steps[k-1].Held:
		return 0, true, c, fmt.Sprintf("step %d (%.2f x C0) held, after C0 did not", k, steps[k-1].Factor)
	case descending && k >= s.MaxSteps:
		return 0, true, c, fmt.Sprintf("time bound (%d steps) reached with no step holding: C is the most served", k)
	case descending:
		return math.Pow(downFactor, float64(k)) * s.C0, false, 0, ""
	case k > 0 && !steps[k-1].Held:
		return 0, true, c, fmt.Sprintf("step %d (%.2f x C0) did not hold", k, steps[k-1].Factor)
	case k > 0 && steps[k-1].Rate >= s.MaxRate:
		return 0, true, c, fmt.Sprintf("reached -max-rate %v/s still holding: C is a lower bound", s.MaxRate)
	case k >= s.MaxSteps:
		if k == 0 {
			return 0, true, s.C0, "search off: C = C0 (closed loop)"
		}
		return 0, true, c, fmt.Sprintf("time bound (%d steps) reached still holding: C is a lower bound", k)
	}
	return min(searchFactor(k)*s.C0, s.MaxRate), false, 0, ""
}

// searchResult is C from the steps: the served rate of the best step that
// held, or the most served seen when none held.
func searchResult(steps []CapacityStep) float64 {
	best, most, anyHeld := 0.0, 0.0, false
	for _, st := range steps {
		most = max(most, st.Served)
		if st.Held {
			best, anyHeld = max(best, st.Served), true
		}
	}
	if anyHeld {
		return best
	}
	return most
}

// searchCapacity runs the stepped open loop after the closed loop's c0 and
// returns C, its steps and why it stopped.
func (o *overloadRun) searchCapacity(ctx context.Context, c0 float64) (float64, []CapacityStep, string) {
	s := capacitySearch{C0: c0, MaxRate: o.cfg.MaxRate, MinServed: o.cfg.CapacityMinServed, P99SLO: o.cfg.CapacityP99SLO}
	if o.cfg.CapacityStepTime > 0 {
		s.MaxSteps = int(o.cfg.CapacitySearchTime / o.cfg.CapacityStepTime)
	}
	var steps []CapacityStep
	for {
		rate, done, c, why := s.nextStep(steps)
		if done {
			return c, steps, why
		}
		if ctx.Err() != nil {
			return searchResult(steps), steps, "interrupted"
		}
		k := len(steps)
		p := o.openLoop(ctx, fmt.Sprintf("%s%d", PhaseSearch, k+1), rate, o.cfg.CapacityStepTime)
		st := CapacityStep{Factor: rate / c0, Rate: rate, Served: p.Goodput, P99: p.Latency.P99,
			P99FromDue: p.LatencyFromDue.P99, Phase: p}
		if n := p.Dispatch.Planned; n > 0 {
			st.ServedRatio = float64(p.Served) / float64(n)
		}
		st.Held = s.held(st)
		steps = append(steps, st)
		o.r.log.Info("capacity step", "step", k+1, "rate", rate, "served_per_s", st.Served,
			"served_ratio", st.ServedRatio, "p99_ms", st.P99.Seconds()*1000,
			"p99_from_due_ms", st.P99FromDue.Seconds()*1000, "held", st.Held)
	}
}
