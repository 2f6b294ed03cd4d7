package capacity

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestSearchFactor(t *testing.T) {
	want := []float64{1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4, 5, 6.25}
	for k, w := range want {
		if got := searchFactor(k); got != w {
			t.Errorf("searchFactor(%d) = %v, want %v", k, got, w)
		}
	}
}

// step is a finished step of the search at factor × c0, judged by s.
func step(s Search, factor, served, ratio float64, p99 time.Duration) Step {
	st := Step{Factor: factor, Rate: min(factor*s.C0, s.MaxRate), Served: served, ServedRatio: ratio, P99: p99}
	st.Held = s.Held(st)
	return st
}

func TestCapacitySearch(t *testing.T) {
	s := Search{C0: 200, MaxRate: 1000, MaxSteps: 10, MinServed: 0.95, P99SLO: 250 * time.Millisecond}
	ms := time.Millisecond

	// The closed loop understates C (C0 200/s, the cluster serves 350/s).
	// The search climbs 200, 250, 300, 350, 400 and stops at 400 (350/s
	// served), the first step that does not hold; C is the served rate of
	// the best step that held (350 offered, 346.5 served).
	var steps []Step
	served := func(rate float64) (float64, float64, time.Duration) {
		if rate <= 360 {
			return rate * 0.99, 0.99, 40 * ms
		}
		return 350, 350 / rate, 60 * ms
	}
	var rates []float64
	for range 20 {
		rate, done, c, why := s.NextStep(steps)
		if done {
			if c != 350*0.99 || len(steps) != 5 || !strings.Contains(why, "step 5") {
				t.Fatalf("done: c %v after %d steps (%s)", c, len(steps), why)
			}
			break
		}
		rates = append(rates, rate)
		sv, ratio, p99 := served(rate)
		steps = append(steps, step(s, rate/s.C0, sv, ratio, p99))
	}
	if want := []float64{200, 250, 300, 350, 400}; len(rates) != len(want) {
		t.Fatalf("rates %v, want %v", rates, want)
	} else {
		for i := range want {
			if rates[i] != want[i] {
				t.Fatalf("rates %v, want %v", rates, want)
			}
		}
	}

	cases := []struct {
		name   string
		s      Search
		steps  []Step
		rate   float64
		done   bool
		c      float64
		reason string
	}{
		{"first step is C0", s, nil, 200, false, 0, ""},
		{"held: next factor", s, []Step{step(s, 1, 199, 1, 10*ms), step(s, 1.25, 249, 1, 10*ms)}, 300, false, 0, ""},
		{"p99 over the SLO stops", s, []Step{step(s, 1, 199, 1, 10*ms), step(s, 1.25, 249, 1, 300*ms)},
			0, true, 199, "did not hold"},
		{"served/offered below 0.95 stops", s, []Step{step(s, 1, 199, 1, 10*ms), step(s, 1.25, 230, 0.92, 10*ms)},
			0, true, 199, "did not hold"},
		{"C0 did not hold: step down", s, []Step{step(s, 1, 150, 0.75, 10*ms)}, 170, false, 0, ""},
		{"descending until one holds", s, []Step{step(s, 1, 150, 0.75, 10*ms), step(s, 0.85, 150, 0.88, 10*ms)},
			200 * math.Pow(downFactor, 2), false, 0, ""},
		{"descent ends at the first that holds", s, []Step{step(s, 1, 150, 0.75, 10*ms), step(s, 0.85, 143, 0.99, 10*ms)},
			0, true, 143, "held, after C0 did not"},
		{"descent's time bound: most served", Search{C0: 200, MaxRate: 1000, MaxSteps: 2, MinServed: 0.95, P99SLO: time.Second},
			[]Step{{Factor: 1, Rate: 200, Served: 150}, {Factor: 0.85, Rate: 170, Served: 140}}, 0, true, 150, "no step holding"},
		{"rate capped at max-rate", Search{C0: 600, MaxRate: 1000, MaxSteps: 10, MinServed: 0.95, P99SLO: time.Second},
			[]Step{{Factor: 1, Rate: 600, Served: 600, Held: true}, {Factor: 1.25, Rate: 750, Served: 750, Held: true},
				{Factor: 1.5, Rate: 900, Served: 900, Held: true}}, 1000, false, 0, ""},
		{"max-rate reached holding", Search{C0: 600, MaxRate: 1000, MaxSteps: 10},
			[]Step{{Rate: 600, Served: 600, Held: true}, {Rate: 1000, Served: 990, Held: true}}, 0, true, 990, "lower bound"},
		{"time bound", Search{C0: 100, MaxRate: 1000, MaxSteps: 2},
			[]Step{{Rate: 100, Served: 100, Held: true}, {Rate: 125, Served: 124, Held: true}}, 0, true, 124, "time bound"},
		{"search off", Search{C0: 100, MaxRate: 1000}, nil, 0, true, 100, "search off"},
		{"no C0", Search{MaxRate: 1000, MaxSteps: 5}, nil, 0, true, 0, "no closed-loop"},
	}
	for _, tc := range cases {
		rate, done, c, why := tc.s.NextStep(tc.steps)
		if rate != tc.rate || done != tc.done || c != tc.c || !strings.Contains(why, tc.reason) {
			t.Errorf("%s: got (%v, %v, %v, %q), want (%v, %v, %v, ~%q)", tc.name, rate, done, c, why, tc.rate, tc.done, tc.c, tc.reason)
		}
	}
}

// A closed loop that overstates C (C0 500/s, the cluster serves 280/s):
// the search descends from C0 until a step holds.
func TestCapacitySearchDescends(t *testing.T) {
	s := Search{C0: 500, MaxRate: 1000, MaxSteps: 10, MinServed: 0.95, P99SLO: 250 * time.Millisecond}
	var steps []Step
	for range 20 {
		rate, done, c, why := s.NextStep(steps)
		if done {
			// 500, 425, 361.25, 307.06 (does not hold: 280 served),
			// 261.0 holds.
			if len(steps) != 5 || c != steps[4].Served || !steps[4].Held || !strings.Contains(why, "held") {
				t.Fatalf("done: c %v after %d steps (%s)", c, len(steps), why)
			}
			return
		}
		served, ratio := rate*0.99, 0.99
		if rate > 280 {
			served, ratio = 280, 280/rate
		}
		steps = append(steps, step(s, rate/s.C0, served, ratio, 30*time.Millisecond))
	}
	t.Fatal("the search did not end")
}

// fakeCluster serves up to cap requests/s with p99 40 ms; past it, it
// serves cap and p99 grows to 400 ms. The closed loop serves closed/s.
type fakeCluster struct {
	cap, closed float64
	names       []string
	err         error
}

func (f *fakeCluster) Closed(_ context.Context, name string, k int, d time.Duration) (Measurement, error) {
	f.names = append(f.names, name)
	return Measurement{Served: f.closed, P99: 30 * time.Millisecond, Sent: int(f.closed * d.Seconds())}, nil
}

func (f *fakeCluster) Open(_ context.Context, name string, rate float64, d time.Duration) (Measurement, error) {
	f.names = append(f.names, name)
	if f.err != nil {
		return Measurement{}, f.err
	}
	if rate <= f.cap {
		return Measurement{Served: rate * 0.99, ServedRatio: 0.99, P99: 40 * time.Millisecond}, nil
	}
	return Measurement{Served: f.cap, ServedRatio: f.cap / rate, P99: 400 * time.Millisecond}, nil
}

func TestFindClimbsFromC0(t *testing.T) {
	f := &fakeCluster{cap: 360, closed: 200}
	var seen []Step
	out, err := Find(context.Background(), DefaultConfig(), f, func(s Step) { seen = append(seen, s) })
	if err != nil {
		t.Fatal(err)
	}
	// 200, 250, 300, 350 hold; 400 does not: C = 350 x 0.99.
	if out.C0 != 200 || len(out.Steps) != 5 || math.Abs(out.C-346.5) > 1e-9 || len(seen) != 5 {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{"closed", "step1", "step2", "step3", "step4", "step5"}
	if strings.Join(f.names, ",") != strings.Join(want, ",") {
		t.Errorf("phases %v, want %v", f.names, want)
	}
}

func TestFindStopsOnError(t *testing.T) {
	boom := errors.New("boom")
	f := &fakeCluster{cap: 360, closed: 200, err: boom}
	if _, err := Find(context.Background(), DefaultConfig(), f, nil); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
}

func TestConfigErrorsNameTheFlag(t *testing.T) {
	c := DefaultConfig()
	c.StepTime = 0
	if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "-step-time") {
		t.Fatalf("err %v", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}
