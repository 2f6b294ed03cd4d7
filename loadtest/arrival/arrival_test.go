package arrival

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func launch(t *testing.T) Curve {
	t.Helper()
	c, err := Phases(Players, 200, []Step{{2 * time.Minute, 5000}, {3 * time.Minute, 30000}, {5 * time.Minute, 80000}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestPhasesAt(t *testing.T) {
	c := launch(t)
	for _, tc := range []struct {
		t    time.Duration
		want float64
	}{
		{-time.Second, 200}, {0, 200}, {time.Minute, 2600}, {2 * time.Minute, 5000},
		{3*time.Minute + 30*time.Second, 17500}, {10 * time.Minute, 80000}, {time.Hour, 80000},
	} {
		if got := c.At(tc.t); !near(got, tc.want) {
			t.Errorf("At(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
	if c.End() != 10*time.Minute || c.Peak() != 80000 || c.Kind() != Players {
		t.Fatalf("End %v Peak %v Kind %v", c.End(), c.Peak(), c.Kind())
	}
	pts := c.Points()
	pts[0].V = -1
	if c.At(0) != 200 {
		t.Fatal("Points shares the curve's storage")
	}
}

func TestPhasesErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		kind  Kind
		start float64
		steps []Step
		want  string
	}{
		"kind":      {0, 0, nil, "unknown kind"},
		"zero dur":  {Players, 0, []Step{{0, 5}}, "phase 0: duration must be > 0"},
		"negative":  {Players, 0, []Step{{time.Second, 5}, {time.Second, -1}}, "point 2: value must be finite and >= 0"},
		"nan start": {Rate, math.NaN(), nil, "point 0"},
		"inf":       {Rate, 0, []Step{{time.Second, math.Inf(1)}}, "point 1"},
		"too long":  {Rate, 0, []Step{{math.MaxInt64 / 2, 1}, {math.MaxInt64 / 2, 1}, {math.MaxInt64 / 2, 1}}, "too long"},
	} {
		_, err := Phases(tc.kind, tc.start, tc.steps)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrCurve) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
}

func TestZeroCurve(t *testing.T) {
	var c Curve
	if c.At(time.Second) != 0 || c.Arrivals(time.Second) != 0 || c.End() != 0 || c.Peak() != 0 || len(c.Points()) != 0 {
		t.Fatal("zero curve is not 0")
	}
	if _, ok := c.ArrivalTime(1); ok {
		t.Fatal("zero curve reaches 1")
	}
	if s := c.Scale(2, 2); s.End() != 0 {
		t.Fatal("scaled zero curve")
	}
}

func TestPlayersArrivals(t *testing.T) {
	// Up to 100, down to 20, up to 150: arrivals are the running maximum.
	c, err := Phases(Players, 10, []Step{{10 * time.Second, 100}, {10 * time.Second, 20}, {20 * time.Second, 150}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		t    time.Duration
		want float64
	}{
		{0, 10}, {5 * time.Second, 55}, {10 * time.Second, 100}, {15 * time.Second, 100}, {20 * time.Second, 100},
		{30 * time.Second, 100}, {36 * time.Second, 124}, {40 * time.Second, 150}, {time.Hour, 150},
	} {
		if got := c.Arrivals(tc.t); !near(got, tc.want) {
			t.Errorf("Arrivals(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
	for _, tc := range []struct {
		k    float64
		want time.Duration
	}{
		{0, 0}, {10, 0}, {55, 5 * time.Second}, {100, 10 * time.Second}, {124, 36 * time.Second}, {150, 40 * time.Second},
	} {
		got, ok := c.ArrivalTime(tc.k)
		if !ok || absDur(got-tc.want) > time.Nanosecond {
			t.Errorf("ArrivalTime(%v) = %v %v, want %v", tc.k, got, ok, tc.want)
		}
	}
	if _, ok := c.ArrivalTime(150.5); ok {
		t.Error("reaches more than its peak")
	}
	if _, ok := c.ArrivalTime(math.NaN()); ok {
		t.Error("reaches NaN")
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func TestRateArrivalsExact(t *testing.T) {
	// 0 -> 10/s over 10 s (50), flat 10/s for 5 s (50), 10 -> 0 over 10 s (50), then 0.
	c, err := Phases(Rate, 0, []Step{{10 * time.Second, 10}, {5 * time.Second, 10}, {10 * time.Second, 0}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		t    time.Duration
		want float64
	}{
		{0, 0}, {4 * time.Second, 8}, {10 * time.Second, 50}, {12 * time.Second, 70}, {15 * time.Second, 100},
		{20 * time.Second, 137.5}, {25 * time.Second, 150}, {time.Hour, 150},
	} {
		if got := c.Arrivals(tc.t); !near(got, tc.want) {
			t.Errorf("Arrivals(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
	for _, tc := range []struct {
		k    float64
		want time.Duration
	}{{8, 4 * time.Second}, {50, 10 * time.Second}, {70, 12 * time.Second}, {137.5, 20 * time.Second}, {150, 25 * time.Second}} {
		got, ok := c.ArrivalTime(tc.k)
		if !ok || absDur(got-tc.want) > 2*time.Nanosecond {
			t.Errorf("ArrivalTime(%v) = %v %v, want %v", tc.k, got, ok, tc.want)
		}
	}
	if _, ok := c.ArrivalTime(150.001); ok {
		t.Error("a rate curve ending at 0 reaches past its integral")
	}
	// Constant after the end: a curve ending at 2/s keeps adding.
	d, _ := Phases(Rate, 2, nil)
	if got := d.Arrivals(time.Minute); got != 120 {
		t.Fatalf("constant 2/s over 1m = %v", got)
	}
	if got, ok := d.ArrivalTime(121); !ok || got != 60500*time.Millisecond {
		t.Fatalf("ArrivalTime(121) = %v %v", got, ok)
	}
}

// TestMonotoneInverse checks on several curves that Arrivals never falls
// and that ArrivalTime is its inverse: Arrivals(ArrivalTime(k)) >= k and
// Arrivals just before is below k.
func TestMonotoneInverse(t *testing.T) {
	csvCurve, err := ReadCSV(mustOpen(t, "../scenarios/examples/last-launch.csv"))
	if err != nil {
		t.Fatal(err)
	}
	curves := map[string]Curve{"launch": launch(t), "csv": csvCurve, "csv scaled": csvCurve.Scale(0.01, 10)}
	r, err := Phases(Rate, 5, []Step{{time.Minute, 100}, {30 * time.Second, 0}, {time.Minute, 0}, {time.Minute, 40}})
	if err != nil {
		t.Fatal(err)
	}
	curves["rate"] = r
	curves["rate scaled"] = r.Scale(0.5, 3)
	for name, c := range curves {
		prev := -1.0
		end := c.End() + time.Minute
		for tt := time.Duration(0); tt <= end; tt += end / 997 {
			a := c.Arrivals(tt)
			if a < prev {
				t.Fatalf("%s: Arrivals(%v) = %v fell from %v", name, tt, a, prev)
			}
			prev = a
		}
		total := c.Arrivals(c.End())
		for k := 0.5; k < total; k += total / 503 {
			at, ok := c.ArrivalTime(k)
			if !ok {
				t.Fatalf("%s: ArrivalTime(%v) not ok (total %v)", name, k, total)
			}
			if a := c.Arrivals(at); a < k*(1-1e-12) {
				t.Fatalf("%s: Arrivals(ArrivalTime(%v) = %v) = %v", name, k, at, a)
			}
			if at > 0 {
				if a := c.Arrivals(at - time.Microsecond); a >= k {
					t.Fatalf("%s: ArrivalTime(%v) = %v is not the earliest: Arrivals(1µs before) = %v", name, k, at, a)
				}
			}
		}
	}
}

func TestScale(t *testing.T) {
	c := launch(t)
	s := c.Scale(0.1, 2)
	if s.End() != 5*time.Minute || !near(s.Peak(), 8000) || !near(s.At(time.Minute), 500) {
		t.Fatalf("scaled players: End %v Peak %v At(1m) %v", s.End(), s.Peak(), s.At(time.Minute))
	}
	if !near(s.Arrivals(s.End()), c.Arrivals(c.End())*0.1) {
		t.Fatal("scaling players changes the arrivals by other than scale")
	}
	r, _ := Phases(Rate, 0, []Step{{10 * time.Second, 10}})
	rs := r.Scale(0.5, 4)
	// Rate x scale x speed; the same arrivals x scale over a quarter of the time.
	if rs.End() != 2500*time.Millisecond || !near(rs.Peak(), 20) || !near(rs.Arrivals(rs.End()), 25) {
		t.Fatalf("scaled rate: End %v Peak %v Arrivals %v", rs.End(), rs.Peak(), rs.Arrivals(rs.End()))
	}
	if b := c.Scale(0, 1); b.Peak() != c.Peak() {
		t.Fatal("scale 0 changed the curve")
	}
	// Points closer than a nanosecond after speed merge, keeping the later.
	f, _ := Phases(Players, 0, []Step{{time.Nanosecond, 5}, {time.Nanosecond, 7}, {time.Second, 9}})
	fs := f.Scale(1, 100)
	if fs.At(fs.End()) != 9 || len(fs.Points()) > 3 {
		t.Fatalf("fast curve: %v", fs.Points())
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
