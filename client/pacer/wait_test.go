package pacer

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

var bg = context.Background()

// Waiters leave in priority order, FIFO within a priority, one per interval.
func TestWaitReleasesByPriorityThenFIFO(t *testing.T) {
	h := newHarness(t, Config{Rate: 10, Capacity: 10})
	h.start(bg, "prime", Default) // the bucket is empty: goes at once
	h.expect("prime", nil)
	for _, w := range []struct {
		name string
		prio Priority
	}{{"D1", Default}, {"S1", Sheddable}, {"D2", Default}, {"C1", Critical}, {"S2", Sheddable}, {"C2", Critical}} {
		h.start(bg, w.name, w.prio)
	}
	h.none()
	if h.p.Len() != 6 {
		t.Fatalf("Len = %d, want 6", h.p.Len())
	}
	for _, name := range []string{"C1", "C2", "D1", "D2", "S1", "S2"} {
		h.advance(99*ms, 100*ms)
		h.none() // not before its slot
		h.advance(1*ms, 1*ms)
		h.expect(name, nil)
	}
	h.none()
	// Six queued, released after 100, 200, ..., 600 ms.
	if s := h.p.Stats(); s.Released != 7 || s.Queued != 6 || s.Waited != 2100*ms || h.p.Len() != 0 {
		t.Fatalf("stats %+v, len %d", s, h.p.Len())
	}
}

// A full queue: a higher-priority request evicts the oldest waiter of the
// lowest priority below its own; with none below, the newcomer fails.
func TestEvictionOldestLowestFirst(t *testing.T) {
	h := newHarness(t, Config{Rate: 10, Capacity: 3})
	h.start(bg, "prime", Default)
	h.expect("prime", nil)

	h.start(bg, "S1", Sheddable)
	h.start(bg, "D1", Default)
	h.start(bg, "S2", Sheddable)
	h.none()

	h.start(bg, "C1", Critical) // evicts S1, the oldest sheddable
	h.expect("S1", ErrEvicted)
	h.start(bg, "D2", Default) // evicts S2
	h.expect("S2", ErrEvicted)
	h.start(bg, "S3", Sheddable) // nothing lower than sheddable
	h.expect("S3", ErrQueueFull)
	h.start(bg, "D3", Default) // queue is C1 D1 D2: nothing lower
	h.expect("D3", ErrQueueFull)
	h.start(bg, "C2", Critical) // evicts D1, the oldest default
	h.expect("D1", ErrEvicted)
	h.none()

	if s := h.p.Stats(); s.Evicted != 3 || s.Full != 2 || h.p.Len() != 3 {
		t.Fatalf("stats %+v, len %d", s, h.p.Len())
	}
	for _, name := range []string{"C1", "C2", "D2"} {
		h.advance(100*ms, 100*ms)
		h.expect(name, nil)
	}
	h.none()
}

// Eviction of the head itself (all waiters sheddable): the newcomer takes
// over the head's timer.
func TestEvictingTheHead(t *testing.T) {
	h := newHarness(t, Config{Rate: 10, Capacity: 2})
	h.start(bg, "prime", Default)
	h.expect("prime", nil)
	h.start(bg, "S1", Sheddable)
	h.start(bg, "S2", Sheddable)
	h.start(bg, "D1", Default)
	h.expect("S1", ErrEvicted)
	h.advance(100*ms, 100*ms)
	h.expect("D1", nil)
	h.advance(100*ms, 100*ms)
	h.expect("S2", nil)
}

// A cancelled waiter leaves the queue at once and takes no slot; the head
// leaving hands the timer to the next.
func TestCancelRemovesWaiter(t *testing.T) {
	h := newHarness(t, Config{Rate: 10, Capacity: 3})
	h.start(bg, "prime", Default)
	h.expect("prime", nil)

	ctx1, cancel1 := context.WithCancel(bg)
	ctx2, cancel2 := context.WithCancel(bg)
	defer cancel1()
	defer cancel2()
	h.start(ctx1, "D1", Default)
	h.start(ctx2, "D2", Default)
	h.start(bg, "D3", Default)

	cancel2() // a waiter in the middle
	h.expect("D2", context.Canceled)
	h.settle()
	if h.p.Len() != 2 {
		t.Fatalf("Len = %d after a cancel, want 2", h.p.Len())
	}
	// The freed place is usable: the queue is not full any more.
	h.start(bg, "S1", Sheddable)
	h.none()

	cancel1() // the head
	h.expect("D1", context.Canceled)
	h.settle()
	h.advance(100*ms, 100*ms)
	h.expect("D3", nil)
	h.advance(100*ms, 100*ms)
	h.expect("S1", nil)
	if s := h.p.Stats(); s.Canceled != 2 || s.Released != 3 {
		t.Fatalf("stats %+v", s)
	}

	// An ended ctx fails at once and takes no slot.
	h.advance(time.Second, 100*ms)
	h.start(ctx1, "late", Critical)
	h.expect("late", context.Canceled)
	if d := h.p.Next(h.clk.Now()); d != 0 {
		t.Fatalf("a cancelled Wait took the slot: Next = %v", d)
	}
}

// A critical request that arrives while a default one holds the head
// timer goes first.
func TestHigherPriorityTakesOverTheHead(t *testing.T) {
	h := newHarness(t, Config{Rate: 10, Capacity: 5})
	h.start(bg, "prime", Default)
	h.expect("prime", nil)
	h.start(bg, "D1", Default)
	h.advance(50*ms, 50*ms)
	h.start(bg, "C1", Critical)
	h.advance(50*ms, 50*ms)
	h.expect("C1", nil)
	h.advance(100*ms, 100*ms)
	h.expect("D1", nil)
}

// When the pressure drops, a waiting head goes at the new, sooner slot
// without waiting out the old timer; when it rises, the head waits longer.
func TestWaitFollowsPressureChanges(t *testing.T) {
	h := newHarness(t, Config{Rate: 10, Capacity: 5})
	h.p.SetPressure(1) // 1.5/s: interval 666.67 ms
	h.start(bg, "prime", Default)
	h.expect("prime", nil)
	h.start(bg, "D1", Default)
	h.advance(150*ms, 50*ms)
	h.none()
	h.p.SetPressure(0) // 10/s: the slot at 100 ms has passed
	h.expect("D1", nil)

	// D1 was credited to its 100 ms slot, so D2's slot is at 200 ms, and
	// after the rise at 100 + 666.67 ms.
	h.start(bg, "D2", Default)
	h.p.SetPressure(1)
	h.advance(500*ms, 50*ms) // 650 ms
	h.none()
	h.advance(116*ms, time.Millisecond) // 766 ms
	h.none()
	h.advance(1*ms, 1*ms)
	h.expect("D2", nil)
}

// Over simulated seconds of Wait calls on goroutines the number released
// matches the drip rate as it falls and recovers.
func TestWaitReleaseCountOverTime(t *testing.T) {
	h := newHarness(t, Config{Rate: 10, Capacity: 200})
	h.start(bg, "prime", Default)
	h.expect("prime", nil)
	for i := range 120 {
		h.start(bg, fmt.Sprint("w", i), Priority(i%levels))
	}
	count := func(d time.Duration) int {
		before := h.p.Stats().Released
		h.advance(d, 10*ms)
		return int(h.p.Stats().Released - before)
	}
	for _, ph := range []struct {
		ratio float64
		d     time.Duration
		want  float64
	}{
		{0, 3 * time.Second, 30},
		{1, 4 * time.Second, 6}, // 1.5/s
		{0.5, 2 * time.Second, 11.5},
		{0, 3 * time.Second, 30},
	} {
		h.p.SetPressure(ph.ratio)
		h.settle()
		got := count(ph.d)
		t.Logf("ratio %.1f for %v: %d released", ph.ratio, ph.d, got)
		if math.Abs(float64(got)-ph.want) > 1.5 {
			t.Errorf("ratio %.1f for %v: %d released, want %.1f ±1", ph.ratio, ph.d, got, ph.want)
		}
	}
	// Drain the results so the goroutines' sends are consumed.
	for range h.p.Stats().Released - 1 { // prime was read already
		if r := h.next(); r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
	}
}
