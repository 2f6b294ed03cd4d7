package backoff

import (
	"fmt"
	"time"
)

// DefaultSpread is the default window of the first reconnect delay.
const DefaultSpread = 5 * time.Second

// Reconnect spreads reconnects after a connection closes, so that players
// dropped together (a gate restart) do not all come back in the same
// instant. A zero field takes its default.
type Reconnect struct {
	// Spread: the first reconnect waits a uniform delay in [0, Spread) (5 s).
	Spread time.Duration
	// Base and Cap: reconnect number n >= 1 waits full jitter over
	// min(Base·2^(n-1), Cap), the same schedule as Policy (100 ms, 5 s).
	Base, Cap time.Duration
}

// DefaultReconnect is [0, 5 s) first, then min(100 ms · 2^(n-1), 5 s).
func DefaultReconnect() Reconnect {
	return Reconnect{Spread: DefaultSpread, Base: DefaultBase, Cap: DefaultCap}
}

// Validate reports a field that is negative or inconsistent.
func (r Reconnect) Validate() error {
	if r.Spread < 0 {
		return fmt.Errorf("%w: Spread must be >= 0, got %v", ErrInvalid, r.Spread)
	}
	return Policy{Base: r.Base, Cap: r.Cap}.Validate()
}

// Delay is how long to wait before reconnect number attempt (0-based: 0 is
// the first reconnect after the close). Attempt 0 waits uniform
// [0, Spread); attempt n >= 1 waits full jitter over min(Base·2^(n-1), Cap).
// As with Policy.Delay the jitter is added on top of retryAfter (e.g. from
// a server_full refusal), so a reconnect never comes sooner than that.
// There is no attempt limit: the caller decides when to give up.
func (r Reconnect) Delay(attempt int, retryAfter time.Duration, rnd func() float64) time.Duration {
	if attempt <= 0 {
		spread := r.Spread
		if spread <= 0 {
			spread = DefaultSpread
		}
		return jittered(retryAfter, spread, rnd)
	}
	return Policy{Base: r.Base, Cap: r.Cap}.Delay(attempt-1, retryAfter, rnd)
}
