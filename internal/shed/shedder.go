// Package shed decides, in nanoseconds and without allocating, whether the
// battle tier should take on a request: an adaptive load shedder in the style
// of BBR and Little's law (seed 001) and a CPU-triggered jittered throttle
// (seed 004). It holds no goroutines and reads no clocks: every time-based
// method takes the time, and the CPU utilisation is passed in (see
// levee/internal/cpu), so tests drive it with made-up times and loads.
//
// # Adaptive shedding
//
// A sliding window (default 5 s in 50 buckets of 100 ms) records, per
// bucket, how many requests completed and the smallest latency among them.
// Over the completed buckets of the window (the one still filling is left out)
//
//	maxPass = the largest number of completions in one bucket
//	minRTT  = the smallest latency, in seconds
//	limit   = max(1, maxPass × bucketsPerSecond × minRTT)
//
// where bucketsPerSecond = 1 s / (Window / Buckets) (10 by default). maxPass
// × bucketsPerSecond is the best throughput seen, in requests per second, and
// minRTT is the latency without queueing, so by Little's law (L = λ × W) the
// limit is how many requests can be in flight before they start to queue.
// Example: at most 40 completions in a 100 ms bucket and a best latency of
// 20 ms give 40 × 10 × 0.020 = 8 requests in flight.
//
// A request that is not priority.Critical is shed (ErrShed) when the process
// is hot and more requests are in flight than the limit (than SheddableFactor
// × the limit for priority.Sheddable ones; a class that is not Valid counts
// as priority.Default). The process is hot when the CPU utilisation is
// above CPUThreshold, and also, after a request has been shed, until the CPU
// has stayed at or below the threshold for CoolOff (the same cool-off as
// go-zero's adaptive shedder: a brief dip in CPU does not reopen the gate
// while the backlog is still there, so shedding does not flap). Shedding
// always stops as soon as in-flight is back under the limit. With no
// completions in the window yet (cold start, or after 5 s of silence) there is
// no limit and nothing is shed.
//
// A hard in-flight cap is not this package's job; the caller keeps one as the
// last line of defence.
package shed

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leveehq/levee/internal/priority"
)

// ErrShed is returned by Allow when the adaptive rule sheds a request.
var ErrShed = errors.New("shed: overloaded")

// ErrConfig is wrapped by the errors of Config.Validate and
// ThrottleConfig.Validate.
var ErrConfig = errors.New("shed: invalid config")

// Config configures a Shedder.
type Config struct {
	// Window is how far back the pass rate and latency are looked at.
	Window time.Duration
	// Buckets is how many buckets Window is cut into.
	Buckets int
	// CPUThreshold is the CPU utilisation (0..1) above which shedding may
	// start.
	CPUThreshold float64
	// CoolOff is how long shedding stays possible after the CPU falls back
	// to the threshold, once a request has been shed.
	CoolOff time.Duration
	// SheddableFactor scales the limit for priority.Sheddable requests (0 < f <= 1),
	// so that they go before Default ones.
	SheddableFactor float64
}

// DefaultConfig returns the seed-001 defaults: 5 s in 50 buckets, 80 % CPU,
// a 1 s cool-off; sheddable requests are shed at 80 % of the limit.
func DefaultConfig() Config {
	return Config{
		Window:          5 * time.Second,
		Buckets:         50,
		CPUThreshold:    0.80,
		CoolOff:         time.Second,
		SheddableFactor: 0.8,
	}
}

// Validate reports the first bad field, wrapping ErrConfig.
func (c Config) Validate() error {
	switch {
	case c.Window <= 0:
		return fmt.Errorf("%w: Window must be > 0, got %v", ErrConfig, c.Window)
	case c.Buckets <= 0:
		return fmt.Errorf("%w: Buckets must be > 0, got %d", ErrConfig, c.Buckets)
	case c.Window/time.Duration(c.Buckets) <= 0:
		return fmt.Errorf("%w: Window %v is too short for %d buckets", ErrConfig, c.Window, c.Buckets)
	case !(c.CPUThreshold >= 0 && c.CPUThreshold <= 1):
		return fmt.Errorf("%w: CPUThreshold must be in [0, 1], got %v", ErrConfig, c.CPUThreshold)
	case c.CoolOff < 0:
		return fmt.Errorf("%w: CoolOff must be >= 0, got %v", ErrConfig, c.CoolOff)
	case !(c.SheddableFactor > 0 && c.SheddableFactor <= 1):
		return fmt.Errorf("%w: SheddableFactor must be in (0, 1], got %v", ErrConfig, c.SheddableFactor)
	}
	return nil
}

// Shedder is the adaptive load shedder. It is safe for concurrent use.
type Shedder struct {
	threshold       float64
	coolOff         time.Duration
	perSecond       float64 // buckets per second
	sheddableFactor float64

	inFlight atomic.Int64
	// dropped is set when a request is shed and cleared once the cool-off
	// has run out; while it is clear and the CPU is low, Allow takes no lock.
	dropped atomic.Bool

	mu       sync.Mutex
	win      window
	maxPass  int64
	minRTT   time.Duration
	limit    float64       // 0 while there is no estimate
	highSeen bool          // lastHigh is set
	lastHigh time.Duration // offset of the last Allow that saw the CPU above the threshold
}

// New returns a Shedder for cfg.
func New(cfg Config) (*Shedder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := newWindow(cfg.Window, cfg.Buckets)
	return &Shedder{
		threshold:       cfg.CPUThreshold,
		coolOff:         cfg.CoolOff,
		perSecond:       float64(time.Second) / float64(w.bucket),
		sheddableFactor: cfg.SheddableFactor,
		win:             w,
	}, nil
}

// Ticket is an admitted request. Exactly one of Done or Cancel must be called
// on it; the zero Ticket (what Allow returns with an error) ignores both.
type Ticket struct {
	s     *Shedder
	start time.Time
}

// Allow decides at now, with the process's CPU utilisation cpu (0..1),
// whether to take on a request of class crit. It returns ErrShed when
// the adaptive rule sheds it; otherwise the request counts as in flight until
// its Ticket is done.
func (s *Shedder) Allow(now time.Time, cpu float64, crit priority.Class) (Ticket, error) {
	if crit != priority.Critical && (cpu > s.threshold || s.dropped.Load()) && s.shouldShed(now, cpu, crit) {
		return Ticket{}, ErrShed
	}
	s.inFlight.Add(1)
	return Ticket{s: s, start: now}, nil
}

// shouldShed is the slow path of Allow, taken when the CPU is high or a
// request was shed recently.
func (s *Shedder) shouldShed(now time.Time, cpu float64, crit priority.Class) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	off := s.win.offset(now)
	s.advance(off)
	high := cpu > s.threshold
	if high {
		s.highSeen, s.lastHigh = true, off
	}
	hot := high || (s.dropped.Load() && s.highSeen && off-s.lastHigh < s.coolOff)
	if !hot {
		s.dropped.Store(false)
		return false
	}
	if s.limit == 0 {
		return false
	}
	limit := s.limit
	if crit == priority.Sheddable {
		limit *= s.sheddableFactor
	}
	if float64(s.inFlight.Load()) <= limit {
		return false
	}
	s.dropped.Store(true)
	return true
}

// Done ends the request at now and records it as a completion whose latency
// is now minus the time Allow was called.
func (t Ticket) Done(now time.Time) {
	if t.s == nil {
		return
	}
	t.s.inFlight.Add(-1)
	rtt := max(now.Sub(t.start), 0)
	t.s.mu.Lock()
	t.s.advance(t.s.win.offset(now))
	t.s.win.add(rtt)
	t.s.mu.Unlock()
}

// Cancel ends the request without recording a completion: use it for work
// that was abandoned (its caller went away) or failed, which says nothing
// about how fast the process serves requests.
func (t Ticket) Cancel() {
	if t.s != nil {
		t.s.inFlight.Add(-1)
	}
}

// advance rolls the window to off and recomputes the limit when a bucket
// closes (the limit depends only on completed buckets). Callers hold s.mu.
func (s *Shedder) advance(off time.Duration) {
	if !s.win.advance(off) {
		return
	}
	maxPass, minRTT, ok := s.win.stats()
	limit := 0.0
	if ok {
		limit = max(1, float64(maxPass)*s.perSecond*minRTT.Seconds())
	}
	s.maxPass, s.minRTT, s.limit = maxPass, minRTT, limit
}

// Stats is a snapshot of the shedder's estimate.
type Stats struct {
	MaxPass  int64         // most completions in one completed bucket of the window
	MinRTT   time.Duration // smallest latency in the completed buckets
	Limit    float64       // in-flight requests the estimate allows; 0 = no estimate yet
	InFlight int64         // requests admitted and not yet done
	Hot      bool          // a request was shed and the cool-off has not run out
}

// Stats rolls the window to now and returns the current estimate.
func (s *Shedder) Stats(now time.Time) Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(s.win.offset(now))
	return Stats{
		MaxPass:  s.maxPass,
		MinRTT:   s.minRTT,
		Limit:    s.limit,
		InFlight: s.inFlight.Load(),
		Hot:      s.dropped.Load() && s.highSeen && s.win.offset(now)-s.lastHigh < s.coolOff,
	}
}

// Limit rolls the window to now and returns the in-flight limit (for a
// gauge); 0 means there is no estimate yet and nothing is shed.
func (s *Shedder) Limit(now time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(s.win.offset(now))
	return s.limit
}

// InFlight returns the number of admitted requests not yet done.
func (s *Shedder) InFlight() int64 { return s.inFlight.Load() }
