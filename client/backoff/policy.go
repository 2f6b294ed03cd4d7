package backoff

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// ErrInvalid is wrapped by every Validate error in this package.
var ErrInvalid = errors.New("backoff: invalid config")

// Seed-004 defaults for Policy.
const (
	DefaultBase        = 100 * time.Millisecond
	DefaultCap         = 5 * time.Second
	DefaultMaxAttempts = 3
)

// Policy is a request's retry schedule. A zero field takes its default, so
// Policy{} is DefaultPolicy().
type Policy struct {
	// Base is the ceiling of the first retry's delay (100 ms).
	Base time.Duration
	// Cap bounds every ceiling (5 s).
	Cap time.Duration
	// MaxAttempts is the most attempts per request, the first included
	// (3: the original and at most two retries).
	MaxAttempts int
}

// DefaultPolicy is the seed's schedule: min(100 ms · 2^n, 5 s), 3 attempts.
func DefaultPolicy() Policy {
	return Policy{Base: DefaultBase, Cap: DefaultCap, MaxAttempts: DefaultMaxAttempts}
}

// Validate reports a field that is negative or inconsistent.
func (p Policy) Validate() error {
	switch {
	case p.Base < 0:
		return fmt.Errorf("%w: Base must be >= 0, got %v", ErrInvalid, p.Base)
	case p.Cap < 0:
		return fmt.Errorf("%w: Cap must be >= 0, got %v", ErrInvalid, p.Cap)
	case p.MaxAttempts < 0:
		return fmt.Errorf("%w: MaxAttempts must be >= 0, got %d", ErrInvalid, p.MaxAttempts)
	}
	if n := p.norm(); n.Base > n.Cap {
		return fmt.Errorf("%w: Base %v is above Cap %v", ErrInvalid, n.Base, n.Cap)
	}
	return nil
}

func (p Policy) norm() Policy {
	if p.Base <= 0 {
		p.Base = DefaultBase
	}
	if p.Cap <= 0 {
		p.Cap = DefaultCap
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	return p
}

// CanRetry reports whether a request that has been sent attempts times
// (1 after the first send) may be sent again under MaxAttempts. The retry
// budget is a separate check.
func (p Policy) CanRetry(attempts int) bool {
	return attempts < p.norm().MaxAttempts
}

// Ceiling is the upper bound of the jitter before retry number attempt
// (0-based): min(Base·2^attempt, Cap). A negative attempt counts as 0.
func (p Policy) Ceiling(attempt int) time.Duration {
	p = p.norm()
	return ceiling(p.Base, p.Cap, attempt)
}

// Delay is how long to wait before retry number attempt (0-based: 0 before
// the first retry). It is retryAfter plus full jitter, uniform in
// [0, Ceiling(attempt)), so it is never sooner than retryAfter and clients
// that got the same retryAfter do not come back in step. With no
// retryAfter it lies in [0, Ceiling(attempt)) ⊆ [0, Cap).
//
// rnd returns a float in [0, 1), e.g. a *rand.Rand's Float64 method; nil
// means math/rand/v2.Float64, which is safe for concurrent use.
func (p Policy) Delay(attempt int, retryAfter time.Duration, rnd func() float64) time.Duration {
	return jittered(retryAfter, p.Ceiling(attempt), rnd)
}

// ceiling is min(base·2^attempt, limit) without overflow.
func ceiling(base, limit time.Duration, attempt int) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	if attempt >= 62 || base > limit>>attempt {
		return limit
	}
	return base << attempt
}

// jittered is max(floor, 0) plus a uniform draw from [0, span), saturating
// at the largest Duration.
func jittered(floor, span time.Duration, rnd func() float64) time.Duration {
	if floor < 0 {
		floor = 0
	}
	if floor > math.MaxInt64-span { // saturate rather than wrap
		return math.MaxInt64
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	f := rnd()
	if !(f > 0) || span <= 0 { // f <= 0 or NaN
		return floor
	}
	if f >= 1 { // a bad source
		return floor + span - 1
	}
	j := time.Duration(f * float64(span))
	if j >= span { // rounding
		j = span - 1
	}
	return floor + j
}
