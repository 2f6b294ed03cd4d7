package backoff

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Budget defaults: retries at most 10 % of requests over a 10 s window,
// plus 0.2 retries per second (2 per window) that any client may spend.
const (
	DefaultRatio        = 0.1
	DefaultMinPerSecond = 0.2
	DefaultWindow       = 10 * time.Second
)

// budgetSlots is how many slices the window is cut into; a deposit or a
// withdrawal expires between Window·(1-1/budgetSlots) and Window later.
const budgetSlots = 10

// unit is one retry, in the integer units the budget counts in.
const unit = 1_000_000

// BudgetConfig tunes a Budget. A zero field takes its default.
type BudgetConfig struct {
	// Ratio is the share of requests that may be retried (0.1).
	Ratio float64
	// MinPerSecond is the allowance every client has whatever its request
	// rate (0.2/s), so a quiet client can still retry a failed request.
	MinPerSecond float64
	// Window is how long a request's deposit and a retry's withdrawal
	// count (10 s).
	Window time.Duration
}

// DefaultBudgetConfig is 10 % of requests plus 0.2 retries/s over 10 s.
func DefaultBudgetConfig() BudgetConfig {
	return BudgetConfig{Ratio: DefaultRatio, MinPerSecond: DefaultMinPerSecond, Window: DefaultWindow}
}

// Validate reports a field that is negative, NaN or infinite, or a Ratio
// above 1 (more than one retry per request is no budget).
func (c BudgetConfig) Validate() error {
	switch {
	case !(c.Ratio >= 0 && c.Ratio <= 1):
		return fmt.Errorf("%w: Ratio must be in [0, 1], got %v", ErrInvalid, c.Ratio)
	case !(c.MinPerSecond >= 0) || math.IsInf(c.MinPerSecond, 0):
		return fmt.Errorf("%w: MinPerSecond must be >= 0, got %v", ErrInvalid, c.MinPerSecond)
	case c.Window < 0:
		return fmt.Errorf("%w: Window must be >= 0, got %v", ErrInvalid, c.Window)
	}
	return nil
}

func (c BudgetConfig) norm() BudgetConfig {
	if c.Ratio <= 0 {
		c.Ratio = DefaultRatio
	}
	if c.MinPerSecond <= 0 {
		c.MinPerSecond = DefaultMinPerSecond
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	return c
}

// Budget is a client-wide retry budget (Finagle's RetryBudget; the Google
// SRE book's "retries at most 10 % of requests"). Each request deposits
// Ratio of a retry, each retry withdraws one, and a retry is allowed while
// the deposits minus the withdrawals of the last Window, plus a reserve of
// MinPerSecond·Window, cover one more. So in any window
//
//	retries <= Ratio·requests + MinPerSecond·Window
//
// and a client that retries into a broadly failing server adds at most
// about Ratio extra load once its request rate is well above
// MinPerSecond/Ratio (2/s with the defaults); below that the reserve
// dominates (a client at 1 request/s that fails everything retries at most
// 0.3/s).
//
// The window slides in budgetSlots steps. The time is passed in. A Budget
// is safe for concurrent use.
type Budget struct {
	deposit int64 // per request, in units
	reserve int64 // in units
	width   int64 // slot width, ns

	mu      sync.Mutex
	started bool
	origin  time.Time
	cur     int64 // index of the newest slot, counted from origin
	net     int64 // sum of slots
	slots   [budgetSlots]int64
}

// NewBudget returns a Budget with a full reserve. It panics if cfg is
// invalid; call cfg.Validate first when cfg comes from user input.
func NewBudget(cfg BudgetConfig) *Budget {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.norm()
	width := int64(cfg.Window) / budgetSlots
	if width <= 0 {
		width = 1
	}
	return &Budget{
		deposit: int64(math.Round(cfg.Ratio * unit)),
		reserve: int64(math.Round(min(cfg.MinPerSecond*cfg.Window.Seconds(), 1e12) * unit)),
		width:   width,
	}
}

// OnRequest records one new request. Call it once per request, not for
// retries. The SDK (package client) calls it when a request gets its final
// answer, so that refused requests do not fund retries (see client's
// Options.Budget).
func (b *Budget) OnRequest(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.advance(now)
	b.slots[i] += b.deposit
	b.net += b.deposit
}

// TryRetry reports whether the budget allows one more retry now, and if so
// spends it.
func (b *Budget) TryRetry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.advance(now)
	if b.reserve+b.net < unit {
		return false
	}
	b.slots[i] -= unit
	b.net -= unit
	return true
}

// Available is how many retries the budget would allow now (fractional:
// 0.5 means half a retry's worth has been deposited).
func (b *Budget) Available(now time.Time) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	return float64(b.reserve+b.net) / unit
}

// advance expires the slots that fell out of the window at now and returns
// the index of now's slot. A time before the newest slot counts in it.
func (b *Budget) advance(now time.Time) int {
	if !b.started {
		b.started, b.origin = true, now
	}
	idx := int64(now.Sub(b.origin)) / b.width
	if idx > b.cur {
		if idx-b.cur >= budgetSlots {
			b.slots = [budgetSlots]int64{}
			b.net = 0
		} else {
			for j := b.cur + 1; j <= idx; j++ {
				s := &b.slots[j%budgetSlots]
				b.net -= *s
				*s = 0
			}
		}
		b.cur = idx
	}
	return int(b.cur % budgetSlots)
}
