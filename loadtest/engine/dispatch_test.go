package engine

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

var dispT0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func TestDueIsComputedFromStart(t *testing.T) {
	for _, c := range []struct {
		i    int
		rate float64
		want time.Duration
	}{
		{0, 100, 0},
		{1, 100, 10 * time.Millisecond},
		{7, 1000, 7 * time.Millisecond},
		{1, 3, 333333333}, // rounded to the nanosecond
		{2, 3, 666666667},
		{3, 3, time.Second},
		// Far into a run: no accumulated rounding, i/rate exactly.
		{3_000_000, 3, 1_000_000 * time.Second},
		{1_000_000_000, 1000, 1_000_000 * time.Second},
		{5, 0.5, 10 * time.Second},
	} {
		if got := dueTime(dispT0, c.i, c.rate).Sub(dispT0); got != c.want {
			t.Errorf("dueTime(%d, %v) = %v, want %v", c.i, c.rate, got, c.want)
		}
	}
	// Adding the intervals one by one would drift; Due does not.
	rate := 7.0
	step := time.Duration(float64(time.Second) / rate) // 142857142ns, 0.857ns short
	var summed time.Duration
	for range 7_000_000 {
		summed += step
	}
	if drift := time.Second*1_000_000 - summed; drift < time.Millisecond {
		t.Fatalf("expected summing to drift, drift %v", drift)
	}
	if got := dueTime(dispT0, 7_000_000, rate).Sub(dispT0); got != 1_000_000*time.Second {
		t.Errorf("dueTime(7e6, 7) = %v, want 1e6 s", got)
	}
}

func TestPlanned(t *testing.T) {
	for _, c := range []struct {
		rate float64
		d    time.Duration
		want int
	}{
		{100, time.Second, 100},
		{3, time.Second, 3},
		{2.5, time.Second, 3}, // due at 0, 0.4, 0.8
		{0.5, time.Second, 1},
		{1000, 10 * time.Millisecond, 10},
		{0.8 * 333.3, 10 * time.Second, 2667},
		{0, time.Second, 0},
		{10, 0, 0},
	} {
		got := plannedCount(c.rate, c.d)
		if got != c.want {
			t.Errorf("plannedCount(%v, %v) = %d, want %d", c.rate, c.d, got, c.want)
		}
		if got > 0 && !dueTime(dispT0, got-1, c.rate).Before(dispT0.Add(c.d)) {
			t.Errorf("plannedCount(%v, %v): the last request is due at the end", c.rate, c.d)
		}
		if c.rate > 0 && c.d > 0 && dueTime(dispT0, got, c.rate).Before(dispT0.Add(c.d)) {
			t.Errorf("plannedCount(%v, %v) = %d: request %d is due before the end too", c.rate, c.d, got, got)
		}
	}
}

// dispatchHarness runs a dispatcher on a fake clock.
type dispatchHarness struct {
	t      *testing.T
	clk    *clock.Fake
	issued atomic.Int64
	done   chan dispatchStats
}

func startDispatch(t *testing.T, rate float64, d time.Duration, issue func(i int) bool) *dispatchHarness {
	t.Helper()
	return startDispatchOn(t, clock.NewFake(dispT0), rate, d, issue)
}

// startDispatchOn is startDispatch on clk, which must stand at dispT0.
func startDispatchOn(t *testing.T, clk *clock.Fake, rate float64, d time.Duration, issue func(i int) bool) *dispatchHarness {
	t.Helper()
	h := &dispatchHarness{t: t, clk: clk, done: make(chan dispatchStats, 1)}
	if issue == nil {
		issue = func(int) bool { h.issued.Add(1); return true }
	}
	disp := dispatcher{clk: h.clk, start: dispT0, end: dispT0.Add(d), rate: rate, planned: plannedCount(rate, d),
		lateAfter: 10 * time.Millisecond, issue: issue}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { h.done <- disp.run(ctx) }()
	return h
}

// settle waits until the dispatcher waits on its timer again, or has
// returned (then it returns its stats).
func (h *dispatchHarness) settle() (dispatchStats, bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case st := <-h.done:
			return st, true
		default:
		}
		if h.clk.Waiters() == 1 {
			return dispatchStats{}, false
		}
		runtime.Gosched()
	}
	h.t.Fatal("dispatcher neither waits nor ends")
	return dispatchStats{}, false
}

// The dispatcher issues request i at start + i/rate: after the clock
// reaches t, exactly the requests due by t were issued, however the clock
// moves.
func TestDispatcherKeepsToTheSchedule(t *testing.T) {
	const rate = 1000.0
	h := startDispatch(t, rate, 100*time.Millisecond, nil)
	elapsed := time.Duration(0)
	for step := 0; ; step++ {
		st, ended := h.settle()
		if ended {
			if st.Issued != 100 || st.Planned != 100 || st.Unsent != 0 || st.Late != 0 {
				t.Fatalf("stats %+v", st)
			}
			break
		}
		want := min(int64(elapsed/time.Millisecond)+1, 100)
		if got := h.issued.Load(); got != want {
			t.Fatalf("at +%v issued %d, want %d", elapsed, got, want)
		}
		d := time.Duration(1+step%7) * time.Millisecond / 3 // uneven steps, some between due times
		h.clk.Advance(d)
		elapsed += d
	}
}

// A dispatcher that falls behind issues the overdue requests at once and
// counts those more than lateAfter past due.
func TestDispatcherCountsLateDispatch(t *testing.T) {
	h := startDispatch(t, 1000, 100*time.Millisecond, nil)
	h.settle()
	h.clk.Advance(50 * time.Millisecond) // requests 1..50 are overdue by 0..49 ms
	h.settle()
	if got := h.issued.Load(); got != 51 {
		t.Fatalf("issued %d, want 51", got)
	}
	h.clk.Advance(time.Second)
	st, ended := h.settle()
	if !ended {
		t.Fatal("dispatcher did not end")
	}
	// Phase 1: lags 49..0 ms for i = 1..50: 39 above 10 ms (11..49). Then the
	// clock jumps past the end: requests 51..99 are never sent.
	if st.Issued != 51 || st.Unsent != 49 || st.Late != 39 || st.MaxLag != 49*time.Millisecond {
		t.Fatalf("stats %+v", st)
	}
}

// issue may block (a full semaphore); what is not issued when the phase
// ends is unsent, and a false from issue stops the dispatcher.
func TestDispatcherStopsWhenIssueRefuses(t *testing.T) {
	var n atomic.Int64
	h := startDispatch(t, 100, time.Second, func(int) bool { return n.Add(1) <= 3 })
	for {
		st, ended := h.settle()
		if ended {
			if st.Issued != 3 || st.Unsent != 97 {
				t.Fatalf("stats %+v", st)
			}
			return
		}
		h.clk.Advance(10 * time.Millisecond)
	}
}

func TestDispatcherStopsOnCancel(t *testing.T) {
	clk := clock.NewFake(dispT0)
	ctx, cancel := context.WithCancel(context.Background())
	disp := dispatcher{clk: clk, start: dispT0, end: dispT0.Add(time.Second), rate: 10, planned: 10, lateAfter: time.Millisecond,
		issue: func(int) bool { return true }}
	done := make(chan dispatchStats)
	go func() { done <- disp.run(ctx) }()
	cancel()
	if st := <-done; st.Issued+st.Unsent != 10 || st.Issued > 1 {
		t.Fatalf("stats %+v", st)
	}
}
