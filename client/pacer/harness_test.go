package pacer

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

var t0 = time.Unix(1_700_000_000, 0)

const ms = time.Millisecond

type result struct {
	name string
	err  error
}

// harness drives a Pacer on a Fake clock with Wait calls on their own
// goroutines, and waits (on conditions, with a deadline) until they have
// all settled before it moves the clock.
type harness struct {
	t       *testing.T
	p       *Pacer
	clk     *clock.Fake
	started int
	results chan result
	wg      sync.WaitGroup
	cancels []context.CancelFunc
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	clk := clock.NewFake(t0)
	h := &harness{t: t, p: New(cfg, clk), clk: clk, results: make(chan result, 1024)}
	// No Wait outlives its test: cancel what is still queued, and wait.
	t.Cleanup(func() {
		for _, c := range h.cancels {
			c()
		}
		h.wg.Wait()
		if n := h.p.Len(); n != 0 {
			t.Errorf("Len = %d after every Wait returned", n)
		}
	})
	return h
}

// start calls Wait on a new goroutine; its result goes to h.results.
func (h *harness) start(ctx context.Context, name string, prio Priority) {
	h.started++
	ctx, cancel := context.WithCancel(ctx)
	h.cancels = append(h.cancels, cancel)
	h.wg.Go(func() {
		err := h.p.Wait(ctx, prio)
		h.results <- result{name, err}
	})
	h.settle()
}

// settled: every started Wait has been decided or queued, and the queue
// is at rest: its head (if any) is parked on the only pending timer.
func (h *harness) settled() bool {
	p := h.p
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	if int(s.Released+s.Evicted+s.Full+s.Canceled)+p.q.n != h.started {
		return false
	}
	hd := p.q.head()
	if hd == nil {
		return h.clk.Waiters() == 0
	}
	return hd.armed && h.clk.Waiters() == 1
}

func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !h.settled() {
		if time.Now().After(deadline) {
			h.t.Fatalf("pacer did not settle: len %d, stats %+v, timers %d", h.p.Len(), h.p.Stats(), h.clk.Waiters())
		}
		runtime.Gosched()
	}
}

// advance moves the fake clock by d in steps of at most step, settling
// after each.
func (h *harness) advance(d, step time.Duration) {
	h.t.Helper()
	for d > 0 {
		s := min(step, d)
		h.clk.Advance(s)
		d -= s
		h.settle()
	}
}

// next returns the next result, failing if none comes.
func (h *harness) next() result {
	h.t.Helper()
	select {
	case r := <-h.results:
		return r
	case <-time.After(10 * time.Second):
		h.t.Fatal("no result")
		return result{}
	}
}

// none fails if a result is pending.
func (h *harness) none() {
	h.t.Helper()
	select {
	case r := <-h.results:
		h.t.Fatalf("unexpected result %s: %v", r.name, r.err)
	default:
	}
}

// expect reads the next result and checks it.
func (h *harness) expect(name string, err error) {
	h.t.Helper()
	r := h.next()
	if r.name != name || !errors.Is(r.err, err) || (err == nil) != (r.err == nil) {
		h.t.Fatalf("got %s: %v; want %s: %v", r.name, r.err, name, err)
	}
}
