// Package capacity finds the request rate a cluster serves within an SLO:
// a closed loop's estimate C0 first, then an open loop offered stepped
// rates, each step judged by what it served and how fast. The step rule
// (Search) is a pure function of the steps so far; Find runs it against a
// Runner, one call a step (cmd/loadtest's `loadtest capacity` runs each
// step on the players engine's pool source).
//
// The closed loop's C0 is only a first guess at what the cluster serves at
// an even, open-loop pace: it can understate it (a protected cluster
// refuses some of the loop's bursts) or overstate it (the cheap critical
// purchases in the mix keep being served while battles are refused, and
// the loop runs faster). So after it an open loop is offered stepped
// rates, StepTime each. When the first step, at C0, holds, the steps climb,
// C0 x searchFactor(k), until one does not hold; when it does not, they
// descend, x downFactor a step, until one holds. C is the served rate of
// the best step that held.
package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Step is one step of the capacity search.
type Step struct {
	Factor float64 `json:"factor"`            // of C0
	Rate   float64 `json:"target_rate_per_s"` // offered (asked for)
	// Served is served replies per second of the step's window (its
	// goodput); ServedRatio is served requests / requests the step planned.
	Served      float64       `json:"served_per_s"`
	ServedRatio float64       `json:"served_ratio"`
	P99         time.Duration `json:"p99_served_ns"`
	P99FromDue  time.Duration `json:"p99_served_from_due_ns"` // reported only: Held judges P99, from the send
	Held        bool          `json:"held"`                   // ServedRatio >= the minimum and P99 within the SLO
}

// searchFactor is step k's multiple of C0: 1, 1.25, 1.5, 1.75, 2, 2.5, 3,
// 4, then x 1.25 a step.
func searchFactor(k int) float64 {
	fs := [...]float64{1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4}
	if k < len(fs) {
		return fs[k]
	}
	return 4 * math.Pow(1.25, float64(k-len(fs)+1))
}

// downFactor is each descending step's multiple of the one before.
const downFactor = 0.85

// Search is the search's rule, a pure function of the steps so far.
type Search struct {
	C0        float64       // the closed loop's estimate
	MaxRate   float64       // no step offers more
	MaxSteps  int           // the time bound: search time / step time
	MinServed float64       // a step holds when served/offered >= this ...
	P99SLO    time.Duration // ... and p99 of served <= this
}

// Held judges one step.
func (s Search) Held(st Step) bool {
	return st.ServedRatio >= s.MinServed && st.P99 > 0 && st.P99 <= s.P99SLO
}

// NextStep is the rate of the next step, or done with C (the served rate
// of the best step that held, else the most served seen, else C0 when no
// step ran) and why the search ended.
func (s Search) NextStep(steps []Step) (rate float64, done bool, c float64, why string) {
	c = Result(steps)
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

// Result is C from the steps: the served rate of the best step that held,
// or the most served seen when none held.
func Result(steps []Step) float64 {
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

// Measurement is what one call of a Runner saw.
type Measurement struct {
	Served      float64       // served replies per second of the window
	ServedRatio float64       // served / planned (open loop); 0 for a closed loop
	P99         time.Duration // of served, from the send
	P99FromDue  time.Duration // of served, from the due time (open loop)
	Sent        int           // requests sent
}

// Runner offers load and measures it: one call, one run.
type Runner interface {
	// Closed keeps k requests outstanding for d (phase name).
	Closed(ctx context.Context, name string, k int, d time.Duration) (Measurement, error)
	// Open offers rate requests/s for d, open loop (phase name).
	Open(ctx context.Context, name string, rate float64, d time.Duration) (Measurement, error)
}

// Config is the search's knobs; DefaultConfig has today's.
type Config struct {
	ClosedConcurrency int           // requests outstanding in the closed loop
	ClosedTime        time.Duration // the closed loop's length
	StepTime          time.Duration // one step of the open-loop search
	SearchTime        time.Duration // the steps in all; 0: no search, C = C0
	P99SLO            time.Duration // a step holds when p99 of served <= this ...
	MinServed         float64       // ... and served/offered >= this
	MaxRate           float64       // no step offers more (requests/s)
}

// DefaultConfig: 64 outstanding for 10 s, then 3 s steps for at most 30 s,
// holding at p99 <= 250 ms and 95 % served, at most 20,000/s.
//
// 64 outstanding: on the 2-core development machine the local cluster
// served 1,880/s with 16, 3,850/s with 64 and 4,530/s with 256 (p99 28, 35
// and 119 ms); 16 is far below the knee and understates C.
func DefaultConfig() Config {
	return Config{ClosedConcurrency: 64, ClosedTime: 10 * time.Second, StepTime: 3 * time.Second,
		SearchTime: 30 * time.Second, P99SLO: 250 * time.Millisecond, MinServed: 0.95, MaxRate: 20_000}
}

// ErrConfig is wrapped by Validate's errors.
var ErrConfig = errors.New("capacity: bad config")

// Validate checks the knobs; errors name the flag of `loadtest capacity`.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.ClosedConcurrency < 1 || c.ClosedConcurrency > 10_000:
		return bad("-closed-concurrency: must be in 1..10000, got %d", c.ClosedConcurrency)
	case c.ClosedTime <= 0 || c.ClosedTime > 10*time.Minute:
		return bad("-closed-time: must be in (0, 10m], got %v", c.ClosedTime)
	case c.ClosedTime%time.Second != 0:
		return bad("-closed-time: must be whole seconds (the run's figures are per second), got %v", c.ClosedTime)
	case c.StepTime < time.Second || c.StepTime > time.Minute || c.StepTime%time.Second != 0:
		return bad("-step-time: must be whole seconds in [1s, 1m], got %v", c.StepTime)
	case c.SearchTime < 0 || c.SearchTime > 10*time.Minute:
		return bad("-search-time: must be in [0, 10m], got %v", c.SearchTime)
	case c.P99SLO <= 0:
		return bad("-p99-slo: must be > 0, got %v", c.P99SLO)
	case c.MinServed <= 0 || c.MinServed > 1:
		return bad("-min-served: must be in (0, 1], got %v", c.MinServed)
	case c.MaxRate <= 0 || c.MaxRate > 20_000:
		return bad("-max-rate: must be in (0, 20000], got %v", c.MaxRate)
	}
	return nil
}

// Outcome is a search's end.
type Outcome struct {
	C0    float64 `json:"c0"`       // the closed loop's served/s
	C     float64 `json:"capacity"` // requests/s; 0: not measured
	Steps []Step  `json:"steps"`
	Why   string  `json:"why"` // why the search ended
}

// PhaseClosed is the closed loop's phase name; the steps are PhaseStep1,
// 2, ...
const (
	PhaseClosed = "closed"
	PhaseStep   = "step"
)

// Find measures C0 with the closed loop, then runs the search, calling r
// once per step and onStep (when not nil) after each. An error of r ends
// the search with it; a cancelled ctx ends it with what was measured.
func Find(ctx context.Context, cfg Config, r Runner, onStep func(Step)) (Outcome, error) {
	if err := cfg.Validate(); err != nil {
		return Outcome{}, err
	}
	m, err := r.Closed(ctx, PhaseClosed, cfg.ClosedConcurrency, cfg.ClosedTime)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{C0: m.Served, C: m.Served}
	s := Search{C0: m.Served, MaxRate: cfg.MaxRate, MinServed: cfg.MinServed, P99SLO: cfg.P99SLO,
		MaxSteps: int(cfg.SearchTime / cfg.StepTime)}
	for {
		rate, done, c, why := s.NextStep(out.Steps)
		if done {
			out.C, out.Why = c, why
			return out, nil
		}
		if ctx.Err() != nil {
			out.C, out.Why = Result(out.Steps), "interrupted"
			return out, nil
		}
		k := len(out.Steps)
		m, err := r.Open(ctx, fmt.Sprintf("%s%d", PhaseStep, k+1), rate, cfg.StepTime)
		if err != nil {
			out.C, out.Why = Result(out.Steps), "error"
			return out, err
		}
		st := Step{Factor: rate / s.C0, Rate: rate, Served: m.Served, ServedRatio: m.ServedRatio, P99: m.P99, P99FromDue: m.P99FromDue}
		st.Held = s.Held(st)
		out.Steps = append(out.Steps, st)
		if onStep != nil {
			onStep(st)
		}
	}
}
