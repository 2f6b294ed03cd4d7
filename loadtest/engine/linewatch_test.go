package engine

import (
	"math"
	"testing"
	"time"

	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
)

// A wait's longest gap: between two statuses, or from the last one to the
// end of the wait; a wait without a status records nothing.
func TestStatusGaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rec := record.New(t0)
	var g statusGaps
	g.status(t0)
	g.status(t0.Add(3 * time.Second))
	g.status(t0.Add(4 * time.Second))
	g.end(t0.Add(5*time.Second), rec)
	var tail statusGaps
	tail.status(t0)
	tail.end(t0.Add(9*time.Second), rec) // from the only status to the end
	var none statusGaps
	none.end(t0.Add(time.Second), rec)
	h := record.NewHist()
	for _, p := range rec.Close(t0.Add(10 * time.Second)) {
		h.Merge(p.Hists[report.HistStatusGap])
	}
	if h.Count() != 2 || h.Max().Round(10*time.Millisecond) != 9*time.Second {
		t.Fatalf("status gaps: %d recorded, longest %v; want 2, 9s", h.Count(), h.Max())
	}
	if q := h.Quantile(0.5).Round(10 * time.Millisecond); q != 3*time.Second {
		t.Errorf("the first wait's longest gap %v, want 3s", q)
	}
}

// sureOrder counts a pair only when its arrival order is sure (the first
// had its status before the second arrived) and its release order sure by
// the gate's waited_ms, whatever order the players saw their admissions
// in.
func TestSureOrder(t *testing.T) {
	// a joined at 10 ms, released at ~10+100; b arrived at 20 ms, released at ~20+50: b surely first.
	a := entry{Arrived: 0, Joined: 10, Waited: 100, Admitted: 130}
	b := entry{Arrived: 20, Joined: 25, Waited: 50, Admitted: 90}
	if inv, pairs := sureOrder([]entry{a, b}); inv != 1 || pairs != 1 {
		t.Errorf("inverted pair: %d inversions in %d pairs, want 1 in 1", inv, pairs)
	}
	// The same, but b's release is late enough to overlap a's window: not sure.
	b2 := b
	b2.Waited, b2.Admitted = 95, 125 // b released in [114, 122], a in [99, 112]: in order
	if inv, pairs := sureOrder([]entry{a, b2}); inv != 0 || pairs != 1 {
		t.Errorf("ordered pair: %d inversions in %d pairs, want 0 in 1", inv, pairs)
	}
	// b arrived 1 ms after a's status: within the millisecond, not sure.
	b3 := b
	b3.Arrived = 11
	if inv, pairs := sureOrder([]entry{a, b3}); inv != 0 || pairs != 0 {
		t.Errorf("unsure arrival order: %d inversions in %d pairs, want 0 in 0", inv, pairs)
	}
	// Admitted pushes seen in the other order, releases in order (a batch
	// written in any order): no inversion.
	c := entry{Arrived: 0, Joined: 5, Waited: 100, Admitted: 180}
	d := entry{Arrived: 10, Joined: 12, Waited: 100, Admitted: 150}
	if inv, pairs := sureOrder([]entry{c, d}); inv != 0 || pairs != 1 {
		t.Errorf("pushes seen out of order: %d inversions in %d pairs, want 0 in 1", inv, pairs)
	}
	// Undated releases (Waited -1) and players never admitted are left out.
	u := entry{Arrived: 50, Joined: 60, Waited: -1, Admitted: 70}
	n := entry{Arrived: 50, Joined: 60, Waited: -1, Admitted: -1}
	if inv, pairs := sureOrder([]entry{a, u, n}); inv != 0 || pairs != 0 {
		t.Errorf("undated: %d inversions in %d pairs, want 0 in 0", inv, pairs)
	}
	// Per gate: a pair split over two gates is not judged.
	a.Gate, b.Gate = 0, 1
	if inv, pairs := sureOrderByGate([]entry{a, b}); inv != 0 || pairs != 0 {
		t.Errorf("two gates: %d inversions in %d pairs, want 0 in 0", inv, pairs)
	}
}

// sureOrder agrees with the pairwise definition on a FIFO line of many
// players seen in a scrambled order, and on one with a few swapped.
func TestSureOrderMatchesPairwise(t *testing.T) {
	var es []entry
	for i := range 400 {
		arr := int64(i * 3)
		join := arr + 2
		rel := int64(2000 + i*5) // released in arrival order
		if i%50 == 7 {
			rel -= 60 // released ahead of about a dozen earlier arrivals
		}
		es = append(es, entry{Arrived: arr, Joined: join, Waited: rel - join, Admitted: rel + int64((i*37)%40)})
	}
	var inv, pairs int64
	for _, x := range es {
		for _, y := range es {
			if x.Joined+2 > y.Arrived {
				continue
			}
			pairs++
			if min(y.Admitted+1, y.Joined+y.Waited+2) < x.Arrived-1+x.Waited {
				inv++
			}
		}
	}
	gi, gp := sureOrder(es)
	if gi != inv || gp != pairs || inv == 0 {
		t.Fatalf("sureOrder %d in %d pairs, pairwise %d in %d (want equal and > 0)", gi, gp, inv, pairs)
	}
}

// The configured rate over a second: time-weighted across the steps
// applied in it; unknown before the first step, in open mode, after a
// failure; a step keeps the fields it leaves out; a rate is the
// cluster's over all gates.
func TestLineRateDuring(t *testing.T) {
	var l lineRate
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	l.applied(sec(0.5), step{mode: "queueing"}, 2, true)
	l.applied(sec(2.25), step{mode: "paced", rate: 100, interval: time.Second}, 2, true)
	l.applied(sec(4), step{rate: 300}, 2, true) // interval kept
	l.applied(sec(6), step{mode: "open"}, 2, true)
	l.applied(sec(7), step{mode: "paced"}, 2, true) // paced again, rate and interval kept
	l.applied(sec(8.5), step{rate: 10}, 2, false)
	for _, c := range []struct {
		from, to float64
		want     float64 // NaN: unknown
	}{
		{0, 1, math.NaN()}, {1, 2, 0}, {2, 3, 75}, {3, 4, 100}, {4, 5, 300},
		{5, 6, 300}, {6, 7, math.NaN()}, {7, 8, 300}, {8, 9, math.NaN()}, {9, 10, math.NaN()},
	} {
		got, ok := l.during(sec(c.from), sec(c.to))
		if math.IsNaN(c.want) {
			if ok {
				t.Errorf("[%v, %v): %v, want unknown", c.from, c.to, got)
			}
			continue
		}
		if !ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("[%v, %v): %v, %v; want %v", c.from, c.to, got, ok, c.want)
		}
	}
	// 101 per second over 2 gates: 51 each, 102 in all.
	var odd lineRate
	odd.applied(0, step{mode: "paced", rate: 101, interval: time.Second}, 2, true)
	if got, _ := odd.during(0, time.Second); got != 102 {
		t.Errorf("101/s over 2 gates: %v, want 102 (51 each)", got)
	}
}
