package autopace

import (
	"context"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
)

type applied struct {
	now time.Time
	sig Signals
}

// chanApplier hands every Apply to the test.
type chanApplier chan applied

func (c chanApplier) Apply(now time.Time, sig Signals) { c <- applied{now, sig} }

func TestLoopReadsEachIntervalAndStopsWithItsContext(t *testing.T) {
	page := newTierPage(t)
	page.depth.WithLabelValues("0").Set(42)
	fc := clock.NewFake(t0)
	var p Pressure
	out := make(chanApplier, 1)
	l := NewLoop(fc, 5*time.Second, []string{page.srv.URL}, &p, out)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	testwait.Until(t, "the loop's ticker", func() bool { return fc.Waiters() == 1 })

	p.Observe(0.2)
	p.Observe(0.4)
	fc.Advance(5 * time.Second)
	a := <-out
	if !a.now.Equal(t0.Add(5*time.Second)) || !a.sig.QueueKnown || a.sig.QueueDepth != 42 ||
		!a.sig.BPKnown || a.sig.Backpressure < 0.299 || a.sig.Backpressure > 0.301 {
		t.Fatalf("first interval: %+v, want depth 42 and backpressure 0.3 at t0+5s", a)
	}
	fc.Advance(5 * time.Second) // no replies in this interval
	if a := <-out; a.sig.BPKnown {
		t.Fatalf("second interval: %+v, want the backpressure unknown", a)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if n := fc.Waiters(); n != 0 {
		t.Fatalf("%d tickers left after Run returned", n)
	}
}

func TestLoopWithoutURLsReadsOnlyTheBackpressure(t *testing.T) {
	var p Pressure
	l := NewLoop(clock.NewFake(t0), time.Second, nil, &p, make(chanApplier))
	if sig := l.Read(context.Background()); sig.QueueKnown || sig.P99Known || sig.BPKnown || len(sig.Errors) != 0 {
		t.Fatalf("nothing to read: %+v", sig)
	}
	p.Observe(2) // clamped to 1
	if sig := l.Read(context.Background()); !sig.BPKnown || sig.Backpressure != 1 {
		t.Fatalf("one reply over 1: %+v, want 1", sig)
	}
}
