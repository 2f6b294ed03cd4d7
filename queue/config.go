package queue

import (
	"fmt"
	"strings"
	"time"
)

// Bounds on the live controls. Values outside are rejected with a named error
// and change nothing.
const (
	MaxPerSecond    = 1_000_000 // fastest release rate, tickets per second
	MinInterval     = time.Millisecond
	MaxInterval     = time.Hour
	MaxMaxLength    = 10_000_000
	MaxGrace        = time.Hour
	MaxRetryAfter   = 24 * time.Hour
	MinWindow       = time.Second
	MaxWindow       = 10 * time.Minute
	windowBuckets   = 30
	minMeasuredBusy = time.Second // busy time before the measured rate is used
	minMeasuredN    = 5           // releases before the measured rate is used
)

// Mode is how the line admits players; see the package doc.
type Mode uint8

// The modes.
const (
	Open Mode = iota + 1
	Queueing
	Paced
	Closed
)

var modeNames = [...]string{Open: "open", Queueing: "queueing", Paced: "paced", Closed: "closed"}

func (m Mode) String() string {
	if m.valid() {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

func (m Mode) valid() bool { return m >= Open && m <= Closed }

// ParseMode parses "open", "queueing", "paced" or "closed" (any case).
func ParseMode(s string) (Mode, error) {
	for m := Open; m <= Closed; m++ {
		if strings.EqualFold(s, modeNames[m]) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want open, queueing, paced or closed)", ErrInvalidMode, s)
}

// Rate is N tickets per Interval, released smoothly (one every Interval/N).
type Rate struct {
	N        int
	Interval time.Duration
}

// PerSecond returns the rate in tickets per second.
func (r Rate) PerSecond() float64 {
	if r.Interval <= 0 {
		return 0
	}
	return float64(r.N) / r.Interval.Seconds()
}

func (r Rate) String() string { return fmt.Sprintf("%d per %v", r.N, r.Interval) }

// Validate checks 1 <= N, MinInterval <= Interval <= MaxInterval and at most
// MaxPerSecond tickets per second; errors wrap ErrInvalidRate.
func (r Rate) Validate() error {
	switch {
	case r.N < 1:
		return fmt.Errorf("%w: %d tickets per interval, want at least 1", ErrInvalidRate, r.N)
	case r.Interval < MinInterval || r.Interval > MaxInterval:
		return fmt.Errorf("%w: interval %v, want %v to %v", ErrInvalidRate, r.Interval, MinInterval, MaxInterval)
	case int64(r.N) > int64(r.Interval)/(int64(time.Second)/MaxPerSecond):
		return fmt.Errorf("%w: %v is %.0f per second, want at most %d", ErrInvalidRate, r, r.PerSecond(), MaxPerSecond)
	}
	return nil
}

// Config configures a Queue.
type Config struct {
	// Mode is the starting mode.
	Mode Mode
	// Rate is the paced release rate.
	Rate Rate
	// MaxLength is the most tickets the line holds (both lanes, away
	// tickets included); Join beyond it is refused with ErrLineFull.
	MaxLength int
	// Grace is how long an away ticket keeps its place.
	Grace time.Duration
	// ClosedRetryAfter is the retry-after given with ErrClosed.
	ClosedRetryAfter time.Duration
	// Window is how far back the release rate is measured for the ETA.
	Window time.Duration
}

// DefaultConfig returns the seed-004 defaults: open, 1,000 per 10 s when
// paced, at most 200,000 in line, 60 s grace, closed retry-after 60 s, a
// 30 s measuring window.
func DefaultConfig() Config {
	return Config{
		Mode:             Open,
		Rate:             Rate{N: 1000, Interval: 10 * time.Second},
		MaxLength:        200_000,
		Grace:            60 * time.Second,
		ClosedRetryAfter: 60 * time.Second,
		Window:           30 * time.Second,
	}
}

// Validate reports the first field out of bounds.
func (c Config) Validate() error {
	if !c.Mode.valid() {
		return fmt.Errorf("%w: mode: %w: %v", ErrInvalidConfig, ErrInvalidMode, c.Mode)
	}
	if err := c.Rate.Validate(); err != nil {
		return fmt.Errorf("%w: rate: %w", ErrInvalidConfig, err)
	}
	if err := validMaxLength(c.MaxLength); err != nil {
		return fmt.Errorf("%w: max length: %w", ErrInvalidConfig, err)
	}
	if c.Grace <= 0 || c.Grace > MaxGrace {
		return fmt.Errorf("%w: grace %v, want > 0 and <= %v", ErrInvalidConfig, c.Grace, MaxGrace)
	}
	if err := validRetryAfter(c.ClosedRetryAfter); err != nil {
		return fmt.Errorf("%w: closed retry-after: %w", ErrInvalidConfig, err)
	}
	if c.Window < MinWindow || c.Window > MaxWindow {
		return fmt.Errorf("%w: window %v, want %v to %v", ErrInvalidConfig, c.Window, MinWindow, MaxWindow)
	}
	return nil
}

func validMaxLength(n int) error {
	if n < 1 || n > MaxMaxLength {
		return fmt.Errorf("%w: %d, want 1 to %d", ErrInvalidLength, n, MaxMaxLength)
	}
	return nil
}

func validRetryAfter(d time.Duration) error {
	if d <= 0 || d > MaxRetryAfter {
		return fmt.Errorf("%w: %v, want > 0 and <= %v", ErrInvalidRetryAfter, d, MaxRetryAfter)
	}
	return nil
}
