package loadtest

import (
	"errors"
	"fmt"
	"time"
)

// Bounds on what one run may ask for.
const (
	MaxBots     = 200_000
	MaxRequests = 10_000_000 // latency samples are preallocated for this many
)

// Schedule gives bot i's arrival (0 <= i < bots) as an offset from the start
// of the run. Bots arriving at or after the run's Duration never start.
type Schedule func(i, bots int) time.Duration

// LinearRamp spreads bots evenly over ramp: bot i arrives at ramp*i/bots.
func LinearRamp(ramp time.Duration) Schedule {
	return func(i, bots int) time.Duration {
		if bots <= 1 || ramp <= 0 {
			return 0
		}
		return time.Duration(int64(ramp) * int64(i) / int64(bots))
	}
}

// Behaviour is what one connected bot does. Run returns when b.Running()
// turns false (the run's deadline, an interrupt, a lost connection or the
// request budget); every request goes through b.Call.
type Behaviour interface {
	Run(b *Bot)
}

// Scenario is one kind of traffic: who comes, when, for how long, doing what.
type Scenario struct {
	Name     string
	Bots     int
	Arrivals Schedule
	// Duration is the whole run, from the start of the arrivals: no request
	// starts after it; those in flight finish or time out.
	Duration time.Duration
	// MaxRequests bounds the requests of all bots together.
	MaxRequests int
	Behaviour   Behaviour
}

// ErrScenario reports an invalid scenario.
var ErrScenario = errors.New("loadtest: invalid scenario")

// Validate checks the scenario's bounds.
func (s Scenario) Validate() error {
	switch {
	case s.Bots < 1 || s.Bots > MaxBots:
		return fmt.Errorf("%w: bots must be in 1..%d, got %d", ErrScenario, MaxBots, s.Bots)
	case s.Duration <= 0:
		return fmt.Errorf("%w: duration must be > 0, got %v", ErrScenario, s.Duration)
	case s.MaxRequests < 1 || s.MaxRequests > MaxRequests:
		return fmt.Errorf("%w: max requests must be in 1..%d, got %d", ErrScenario, MaxRequests, s.MaxRequests)
	case s.Arrivals == nil:
		return fmt.Errorf("%w: no arrival schedule", ErrScenario)
	case s.Behaviour == nil:
		return fmt.Errorf("%w: no bot behaviour", ErrScenario)
	}
	return nil
}
