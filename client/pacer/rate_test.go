package pacer

import (
	"math"
	"testing"
	"time"
)

func TestRateFollowsPressure(t *testing.T) {
	p := New(Config{Rate: 100}, nil)
	for _, c := range []struct{ ratio, want float64 }{
		{0, 100},
		{0.5, 57.5},
		{1, 15},
		{0.2, 83},
		{0, 100}, // recovers
		{-3, 100},
		{7, 15},
	} {
		p.SetPressure(c.ratio)
		if got := p.Rate(); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("ratio %v: rate %v, want %v", c.ratio, got, c.want)
		}
	}
	p.SetPressure(0.5)
	p.SetPressure(math.NaN())
	if p.Pressure() != 0.5 {
		t.Errorf("NaN changed the pressure to %v", p.Pressure())
	}
	// The 1/s floor.
	f := New(Config{Rate: 2}, nil)
	f.SetPressure(1)
	if f.Rate() != 1 {
		t.Errorf("base 2 at full pressure: %v, want the 1/s floor", f.Rate())
	}
	if r := New(Config{}, nil).Rate(); r != DefaultRate {
		t.Errorf("zero config rate %v, want %v", r, DefaultRate)
	}
}

// releases counts how many requests a always-backlogged client gets
// through the pure pacing decision between from and to, polling every
// millisecond.
func releases(p *Pacer, from, to time.Time) int {
	n := 0
	for now := from; now.Before(to); now = now.Add(time.Millisecond) {
		for p.reserve(now) == 0 {
			n++
		}
	}
	return n
}

// The drip follows rising then falling pressure: the number of releases in
// each phase matches the rate, and it comes back to the base rate.
func TestReleaseCountUnderRisingAndFallingPressure(t *testing.T) {
	p := New(Config{Rate: 100}, nil)
	now := t0
	phases := []struct {
		ratio float64
		secs  int
		want  float64 // releases per second
	}{
		{0, 10, 100},
		{0.3, 10, 74.5},
		{0.6, 10, 49},
		{1, 10, 15},
		{0.6, 10, 49},
		{0, 10, 100},
		{1, 10, 15},
		{0, 10, 100},
	}
	for _, ph := range phases {
		p.SetPressure(ph.ratio)
		end := now.Add(time.Duration(ph.secs) * time.Second)
		got := releases(p, now, end)
		want := ph.want * float64(ph.secs)
		if math.Abs(float64(got)-want) > 1.5 {
			t.Errorf("ratio %.1f for %ds: %d releases, want %.0f ±1", ph.ratio, ph.secs, got, want)
		}
		now = end
	}
}

func TestReleaseCountAtTheFloor(t *testing.T) {
	p := New(Config{Rate: 3}, nil)
	p.SetPressure(1) // 3 × 0.15 = 0.45 -> 1/s
	if got := releases(p, t0, t0.Add(60*time.Second)); got < 59 || got > 61 {
		t.Fatalf("%d releases in 60 s at the floor, want 60", got)
	}
}

// No burst: after a quiet spell one request goes at once, the next one a
// full interval later.
func TestNoBurstAfterIdle(t *testing.T) {
	p := New(Config{Rate: 10}, nil)
	if d := p.reserve(t0); d != 0 {
		t.Fatalf("first: wait %v", d)
	}
	later := t0.Add(time.Hour)
	if d := p.reserve(later); d != 0 {
		t.Fatalf("after idle: wait %v", d)
	}
	if d := p.reserve(later); d != 100*ms {
		t.Fatalf("second after idle: wait %v, want 100ms", d)
	}
	if d := p.Next(later.Add(40 * ms)); d != 60*ms {
		t.Fatalf("Next = %v, want 60ms", d)
	}
	// A release a little late keeps the cadence: the next slot stays on
	// the 100 ms grid.
	if d := p.reserve(later.Add(130 * ms)); d != 0 {
		t.Fatalf("late release: wait %v", d)
	}
	if d := p.reserve(later.Add(130 * ms)); d != 70*ms {
		t.Fatalf("after a late release: wait %v, want 70ms", d)
	}
	if p.Next(later.Add(time.Minute)) != 0 {
		t.Fatal("Next negative or nonzero when a slot is open")
	}
}

func TestPriorityLevels(t *testing.T) {
	for p, want := range map[Priority]int{Sheddable: 0, Default: 1, Critical: 2, 9: 1} {
		if got := p.Index(); got != want {
			t.Errorf("Priority(%d).Index() = %d, want %d", p, got, want)
		}
	}
	if Critical.String() != "critical" || Sheddable.String() != "sheddable" || Default.String() != "default" || Priority(4).String() != "default" {
		t.Error("String")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, DefaultConfig(), {Factor: 1, MinRate: 0.1}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range []Config{{Rate: -1}, {Rate: math.NaN()}, {Rate: math.Inf(1)}, {MinRate: -1}, {Factor: 1.1}, {Factor: -0.1}, {Capacity: -1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New accepted an invalid config")
		}
	}()
	New(Config{Capacity: -1}, nil)
}
