// Package clock lets code that waits or ticks take its time from outside, so
// that tests drive it with a Fake instead of sleeping.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock is the time source. Real returns the wall clock.
type Clock interface {
	Now() time.Time
	// NewTimer fires once after d.
	NewTimer(d time.Duration) Timer
	// NewTicker fires every d.
	NewTicker(d time.Duration) Ticker
}

// Timer is the part of *time.Timer that Levee uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker is the part of *time.Ticker that Levee uses.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Sleep waits d on clk, or until ctx ends. It returns nil once d has
// passed and ctx's error when ctx ends first. A d <= 0 returns at once,
// with ctx's error (nil while ctx lives), and starts no timer.
func Sleep(ctx context.Context, clk Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

func (Real) Now() time.Time { return time.Now() }

func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }

// Fake is a clock that moves only when Advance is called.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d and fires every timer and ticker that
// falls due, in time order.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	end := f.now.Add(d)
	for {
		sort.Slice(f.waiters, func(i, j int) bool { return f.waiters[i].when.Before(f.waiters[j].when) })
		if len(f.waiters) == 0 || f.waiters[0].when.After(end) {
			break
		}
		w := f.waiters[0]
		f.now = w.when
		if w.period > 0 {
			w.when = w.when.Add(w.period)
		} else {
			f.waiters = f.waiters[1:]
			w.active = false
		}
		select {
		case w.ch <- f.now:
		default: // like time.Ticker, drop a tick nobody took
		}
	}
	f.now = end
	f.mu.Unlock()
}

// Waiters reports how many timers and tickers are pending; tests use it to
// wait until the code under test has started waiting.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

func (f *Fake) add(w *fakeWaiter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.when = f.now.Add(w.delay())
	w.active = true
	f.waiters = append(f.waiters, w)
}

func (f *Fake) remove(w *fakeWaiter) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := w.active
	w.active = false
	for i, x := range f.waiters {
		if x == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			break
		}
	}
	return was
}

func (f *Fake) NewTimer(d time.Duration) Timer {
	w := &fakeWaiter{f: f, ch: make(chan time.Time, 1), d: d}
	f.add(w)
	return w
}

func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker interval")
	}
	w := &fakeWaiter{f: f, ch: make(chan time.Time, 1), d: d, period: d}
	f.add(w)
	return fakeTicker{w}
}

type fakeWaiter struct {
	f      *Fake
	ch     chan time.Time
	d      time.Duration
	period time.Duration
	when   time.Time
	active bool
}

func (w *fakeWaiter) delay() time.Duration {
	if w.d < 0 {
		return 0
	}
	return w.d
}

func (w *fakeWaiter) C() <-chan time.Time { return w.ch }
func (w *fakeWaiter) Stop() bool          { return w.f.remove(w) }
func (w *fakeWaiter) Reset(d time.Duration) bool {
	was := w.f.remove(w)
	w.d = d
	if w.period > 0 {
		w.period = d
	}
	w.f.add(w)
	return was
}

type fakeTicker struct{ w *fakeWaiter }

func (t fakeTicker) C() <-chan time.Time   { return t.w.ch }
func (t fakeTicker) Stop()                 { t.w.Stop() }
func (t fakeTicker) Reset(d time.Duration) { t.w.Reset(d) }
