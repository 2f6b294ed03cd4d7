package pacer

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

// Errors Wait returns when a request fails locally, without being sent.
var (
	// ErrEvicted: the request was waiting and a higher-priority one took
	// its place in the full queue.
	ErrEvicted = errors.New("pacer: evicted from the local queue by a higher-priority request")
	// ErrQueueFull: the local queue is full of requests of the same or a
	// higher priority.
	ErrQueueFull = errors.New("pacer: local queue full")
)

// Pacer is an adaptive leaky bucket with a bounded priority queue. It is
// safe for concurrent use and owns no goroutine.
type Pacer struct {
	cfg Config
	clk clock.Clock

	mu       sync.Mutex
	pressure float64
	rate     float64
	sched    schedule
	q        queue
	stats    Stats
}

// Stats counts what a Pacer did with the requests it was given.
type Stats struct {
	Released uint64 // Wait returned nil
	Evicted  uint64 // ErrEvicted
	Full     uint64 // ErrQueueFull
	Canceled uint64 // the context ended first
	// Queued counts the Wait calls that could not go at once and joined
	// the queue (whatever became of them); Waited is the total time the
	// released ones among them spent there.
	Queued uint64
	Waited time.Duration
}

// New returns a Pacer at pressure 0 (the base rate) with an empty queue.
// Zero Config fields take their defaults; a nil clk means clock.Real. It
// panics if cfg is invalid; call cfg.Validate first when cfg comes from
// user input.
func New(cfg Config, clk clock.Clock) *Pacer {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if clk == nil {
		clk = clock.Real{}
	}
	p := &Pacer{cfg: cfg.norm(), clk: clk}
	p.setRate(0)
	return p
}

// setRate sets the pressure and the drip rate it gives. p.mu is held (or p
// is not shared yet).
func (p *Pacer) setRate(ratio float64) {
	p.pressure = ratio
	p.rate = p.cfg.rateFor(ratio)
	p.sched.interval = time.Duration(float64(time.Second) / p.rate)
}

// SetPressure records the latest backpressure ratio the server sent (0 to
// 1; values outside are clamped, NaN is ignored) and changes the drip rate
// at once. The SDK calls it with every reply that carries the ratio.
func (p *Pacer) SetPressure(ratio float64) {
	if math.IsNaN(ratio) {
		return
	}
	ratio = min(max(ratio, 0), 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.sched.interval
	p.setRate(ratio)
	// A shorter interval may open the head's slot sooner than its timer;
	// a longer one is noticed when the timer fires.
	if p.sched.interval < old {
		if h := p.q.head(); h != nil {
			h.wake()
		}
	}
}

// Pressure is the latest backpressure ratio, in [0, 1].
func (p *Pacer) Pressure() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pressure
}

// Rate is the current drip rate in requests per second.
func (p *Pacer) Rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rate
}

// Len is how many requests are waiting in the local queue.
func (p *Pacer) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.q.n
}

// Stats returns the counters so far.
func (p *Pacer) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Next is how long from now until the next release slot opens (0 if one
// is open). It takes nothing. A new request also waits behind the Len()
// queued ones of its priority or higher, one interval (1/Rate()) each.
func (p *Pacer) Next(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.sched.wait(now), 0)
}

// Wait blocks until the request may be sent, then returns nil. It returns
// ctx.Err() if ctx ends first (the request leaves the queue), ErrEvicted
// if a higher-priority request pushed it out of the full queue, or
// ErrQueueFull at once if the queue is full and holds nothing of lower
// priority. An ended ctx fails at once without taking a slot. A prio
// that is not one of Sheddable, Default and Critical counts as Default.
func (p *Pacer) Wait(ctx context.Context, prio Priority) error {
	if err := ctx.Err(); err != nil {
		p.mu.Lock()
		p.stats.Canceled++
		p.mu.Unlock()
		return err
	}
	level := prio.Index()

	p.mu.Lock()
	now := p.clk.Now()
	if p.q.n == 0 && p.sched.reserve(now) == 0 {
		p.stats.Released++
		p.mu.Unlock()
		return nil
	}
	oldHead := p.q.head()
	if p.q.n >= p.cfg.Capacity {
		v := p.q.victim(level)
		if v == nil {
			p.stats.Full++
			p.mu.Unlock()
			return ErrQueueFull
		}
		p.q.remove(v)
		v.err = ErrEvicted
		p.stats.Evicted++
		v.wake()
	}
	w := &waiter{level: level, kick: make(chan struct{}, 1), since: now}
	p.q.push(w)
	p.stats.Queued++
	if h := p.q.head(); h != oldHead {
		// The new waiter went to the front, or the old head was evicted.
		if oldHead != nil && oldHead.queued {
			oldHead.wake() // so it drops its timer
		}
		if h != w {
			h.wake() // w looks for itself in await
		}
	}
	p.mu.Unlock()
	return p.await(ctx, w)
}

// await runs w's turn: while w is not the head it sleeps until kicked; as
// the head it sleeps until its slot opens (on a timer of the injected
// clock), then releases itself and kicks the next head.
func (p *Pacer) await(ctx context.Context, w *waiter) error {
	for {
		var tm clock.Timer
		var fire <-chan time.Time
		p.mu.Lock()
		if w.err != nil {
			p.mu.Unlock()
			return w.err
		}
		// Any kick sent so far is answered by this look at the queue;
		// dropping it keeps a stale one from waking the next select.
		select {
		case <-w.kick:
		default:
		}
		w.armed = false
		if p.q.head() == w {
			now := p.clk.Now()
			d := p.sched.wait(now)
			if d <= 0 {
				p.sched.take(now)
				p.q.remove(w)
				p.stats.Released++
				p.stats.Waited += max(now.Sub(w.since), 0)
				if h := p.q.head(); h != nil {
					h.wake()
				}
				p.mu.Unlock()
				return nil
			}
			tm = p.clk.NewTimer(d)
			fire = tm.C()
			w.armed = true
		}
		p.mu.Unlock()

		select {
		case <-fire:
		case <-w.kick:
		case <-ctx.Done():
			if tm != nil {
				tm.Stop()
			}
			return p.leave(w, ctx.Err())
		}
		if tm != nil {
			tm.Stop()
		}
	}
}

// leave takes w out of the queue after its ctx ended, unless it was
// evicted first.
func (p *Pacer) leave(w *waiter, err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	wasHead := p.q.head() == w
	p.q.remove(w)
	p.stats.Canceled++
	if wasHead {
		if h := p.q.head(); h != nil {
			h.wake()
		}
	}
	return err
}

// reserve is the pacing decision on its own, for the benchmark: it takes
// the open slot and returns 0, or returns how long until the next one.
func (p *Pacer) reserve(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sched.reserve(now)
}
