package engine

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/loadtest/arrival"
	"github.com/leveehq/levee/loadtest/record"
)

// drivers makes count drivers sharing one curve, whose players stay until
// the controller (or the run's end) makes them leave.
func drivers(t *testing.T, c arrival.Curve, count, capPer int) []*driver {
	t.Helper()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := &plan{curve: c, end: c.End() + time.Minute, acts: []act{{do: "get_profile", cum: 1}}, speed: 1}
	var ds []*driver
	for i := range count {
		d := newDriver(driverConfig{plan: p, gates: []string{"ws://127.0.0.1:1/ws"}, runID: "t", index: i, count: count,
			cap: capPer, clock: clock.NewFake(start)}, record.New(start), start)
		d.playFn = func(_, live context.Context, pl *player) {
			select {
			case <-pl.quit:
			case <-live.Done():
			}
		}
		ds = append(ds, d)
	}
	return ds
}

func present(ds []*driver) (n, started int, capped int64) {
	for _, d := range ds {
		d.mu.Lock()
		n += len(d.present)
		started += d.next
		capped += d.capped
		d.mu.Unlock()
	}
	return
}

// A 15-minute launch curve, in fake time: the players present follow it
// up and down, split exactly over three processes.
func TestControllerFollowsPlayersCurve(t *testing.T) {
	c, err := arrival.Phases(arrival.Players, 200, []arrival.Step{
		{Duration: 2 * time.Minute, Value: 5000}, {Duration: 3 * time.Minute, Value: 30000},
		{Duration: 5 * time.Minute, Value: 80000}, {Duration: 5 * time.Minute, Value: 40000},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Scaled to 0.01 (800 players at the peak), so the stand-in players
	// are cheap.
	c = c.Scale(0.01, 1)
	ds := drivers(t, c, 3, 1000)
	live, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel() // the stand-in players leave
		for _, d := range ds {
			d.wg.Wait()
		}
	})
	for el := time.Duration(0); el <= 15*time.Minute; el += tick {
		for _, d := range ds {
			d.control(live, live, el)
		}
		want := int(math.Floor(c.At(el)))
		if n, _, _ := present(ds); n != want {
			t.Fatalf("at %v: %d players present over 3 processes, want %d (the curve)", el, n, want)
		}
	}
	for i, d := range ds {
		d.mu.Lock()
		n := len(d.present)
		d.mu.Unlock()
		if n < 133 || n > 134 {
			t.Errorf("process %d holds %d of the final 400, want 133 or 134 (an even split)", i, n)
		}
	}
	if _, started, _ := present(ds); started != 800 {
		t.Errorf("%d players arrived in all, want 800 (the peak: leavers are not replaced while the curve falls)", started)
	}
}

// The cap: a process never holds more players than it may, and says how
// many arrivals it could not start.
func TestControllerCap(t *testing.T) {
	c, _ := arrival.Phases(arrival.Players, 0, []arrival.Step{{Duration: time.Minute, Value: 300}})
	ds := drivers(t, c, 3, 80)
	live, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel() // the stand-in players leave
		for _, d := range ds {
			d.wg.Wait()
		}
	})
	for el := time.Duration(0); el <= time.Minute; el += tick {
		for _, d := range ds {
			d.control(live, live, el)
			d.mu.Lock()
			if len(d.present) > 80 {
				t.Fatalf("process %d holds %d players, over its cap of 80", d.cfg.index, len(d.present))
			}
			d.mu.Unlock()
		}
	}
	n, _, capped := present(ds)
	if n != 240 {
		t.Errorf("%d present, want 3 x 80", n)
	}
	if capped == 0 {
		t.Error("no arrival counted as capped")
	}
}

// A rate curve: arrivals are its integral, whatever the players do.
func TestControllerRateCurve(t *testing.T) {
	c, _ := arrival.Phases(arrival.Rate, 0, []arrival.Step{{Duration: 100 * time.Second, Value: 10}})
	ds := drivers(t, c, 2, 10000)
	live, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel() // the stand-in players leave
		for _, d := range ds {
			d.wg.Wait()
		}
	})
	for el := time.Duration(0); el <= 100*time.Second; el += tick {
		for _, d := range ds {
			d.control(live, live, el)
		}
	}
	// The integral of a ramp 0 -> 10/s over 100 s is 500.
	if _, started, _ := present(ds); started != 500 {
		t.Errorf("%d arrivals, want 500", started)
	}
}

func TestShare(t *testing.T) {
	for _, count := range []int{1, 2, 3, 7} {
		for total := range 50 {
			sum := 0
			for i := range count {
				d := &driver{cfg: driverConfig{index: i, count: count}}
				sum += d.share(total)
			}
			if sum != total {
				t.Fatalf("count %d total %d: shares sum to %d", count, total, sum)
			}
		}
	}
}

func TestMerger(t *testing.T) {
	m := newMerger(2)
	pt := func(t int, sent int64) record.Point {
		return record.Point{T: t, Counters: map[string]int64{"sent": sent}}
	}
	m.add(sourcePoint{src: 0, p: pt(0, 1)})
	m.add(sourcePoint{src: 0, p: pt(1, 2)})
	if got := m.ready(); len(got) != 0 {
		t.Fatalf("ready before source 1 reported: %v", got)
	}
	m.add(sourcePoint{src: 1, p: pt(0, 10)})
	got := m.ready()
	if len(got) != 1 || got[0].T != 0 || got[0].Counters["sent"] != 11 {
		t.Fatalf("second 0 = %+v, want sent 11 merged", got)
	}
	m.add(sourcePoint{src: 1, done: true})
	got = m.ready()
	if len(got) != 1 || got[0].T != 1 || got[0].Counters["sent"] != 2 {
		t.Fatalf("after source 1 ended: %+v, want second 1 with sent 2", got)
	}
	m.add(sourcePoint{src: 0, p: pt(4, 3)})
	rest := m.rest()
	if len(rest) != 3 || rest[2].T != 4 || rest[0].T != 2 {
		t.Fatalf("rest = %+v, want seconds 2, 3 (empty) and 4", rest)
	}
}

func TestLabel(t *testing.T) {
	p := &plan{speed: 5, t0: time.Minute} // T+0 at 5 min of scenario time
	for wall, want := range map[time.Duration]string{0: "T-5:00", time.Minute: "T+0:00", 4 * time.Minute: "T+15:00", 66 * time.Second: "T+0:30"} {
		if got := p.label(wall); got != want {
			t.Errorf("label(%v) = %q, want %q", wall, got, want)
		}
	}
	if got := (&plan{speed: 2}).label(90 * time.Second); got != "3:00" {
		t.Errorf("without t0: %q, want 3:00", got)
	}
}

func TestSelfCPU(t *testing.T) {
	s := newSelfCPU()
	t0 := time.Now()
	if _, ok := s.rate(t0); ok {
		t.Fatal("a rate from one reading")
	}
	// Burn a little CPU so the second reading has something to count.
	x := 0
	for i := range 20_000_000 {
		x += i % 7
	}
	_ = x
	v, ok := s.rate(t0.Add(time.Second))
	if !ok || v < 0 {
		t.Fatalf("rate = %v %v", v, ok)
	}
	if _, ok := s.rate(t0.Add(time.Second)); ok {
		t.Error("a rate over no time")
	}
}
