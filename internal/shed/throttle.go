package shed

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// ThrottleConfig configures a Throttle.
type ThrottleConfig struct {
	// CPUThreshold is the CPU utilisation (0..1) above which requests are
	// delayed.
	CPUThreshold float64
	// MaxDelay bounds the delay: it is drawn uniformly from [0, MaxDelay).
	// 0 turns the throttle off.
	MaxDelay time.Duration
	// Int64N returns a uniform random number in [0, n) for n > 0 and must
	// be safe for concurrent use; nil means math/rand/v2.Int64N.
	Int64N func(n int64) int64
}

// DefaultThrottleConfig returns the seed-004 defaults: above 85 % CPU, delay
// each request by a random 0–100 ms.
func DefaultThrottleConfig() ThrottleConfig {
	return ThrottleConfig{CPUThreshold: 0.85, MaxDelay: 100 * time.Millisecond}
}

// Validate reports the first bad field, wrapping ErrConfig.
func (c ThrottleConfig) Validate() error {
	switch {
	case !(c.CPUThreshold >= 0 && c.CPUThreshold <= 1):
		return fmt.Errorf("%w: CPUThreshold must be in [0, 1], got %v", ErrConfig, c.CPUThreshold)
	case c.MaxDelay < 0:
		return fmt.Errorf("%w: MaxDelay must be >= 0, got %v", ErrConfig, c.MaxDelay)
	}
	return nil
}

// Throttle is the jittered CPU throttle: when the CPU is hot it spreads the
// requests over a random delay of up to MaxDelay, instead of delaying them
// all by the same amount and letting them come back together. It only
// decides the delay; the caller waits (on its clock, and giving up if the
// request's context ends). It is safe for concurrent use.
type Throttle struct {
	threshold float64
	max       int64
	int64N    func(int64) int64
}

// NewThrottle returns a Throttle for cfg.
func NewThrottle(cfg ThrottleConfig) (*Throttle, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Throttle{threshold: cfg.CPUThreshold, max: int64(cfg.MaxDelay), int64N: cfg.Int64N}
	if t.int64N == nil {
		t.int64N = rand.Int64N
	}
	return t, nil
}

// Delay returns how long to hold a request back when the CPU utilisation is
// cpu: a uniform random delay in [0, MaxDelay) when cpu is above the
// threshold, else 0.
func (t *Throttle) Delay(cpu float64) time.Duration {
	if cpu <= t.threshold || t.max <= 0 {
		return 0
	}
	return time.Duration(t.int64N(t.max))
}
