package shed

import (
	"testing"
	"time"

	"github.com/leveehq/levee/internal/priority"
)

// benchShedder returns a shedder with a limit of 8 and inFlight requests
// already in flight.
func benchShedder(b *testing.B, inFlight int) (*Shedder, time.Time) {
	s, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	s.Stats(t0)
	for range 40 {
		tk, _ := s.Allow(ms(30), 0, priority.Default)
		tk.Done(ms(50))
	}
	now := ms(100)
	for range inFlight {
		if _, err := s.Allow(now, 0, priority.Default); err != nil {
			b.Fatal(err)
		}
	}
	if got := s.Limit(now); got != 8 {
		b.Fatalf("limit = %v, want 8", got)
	}
	return s, now
}

// BenchmarkAllow measures the shed decision. The time moves on by 100 ns a
// call, so the window rolls (and the limit is recomputed) once every
// million calls, as it would at 10 M decisions per second. Admitted
// requests are released with Cancel (one atomic add) so in-flight stays put.
func BenchmarkAllow(b *testing.B) {
	cases := []struct {
		name     string
		inFlight int
		cpu      float64
		crit     priority.Class
		wantShed bool
	}{
		{"cpu-low", 20, 0.5, priority.Default, false},
		{"cpu-high-admit", 4, 0.95, priority.Default, false},
		{"cpu-high-shed", 20, 0.95, priority.Default, true},
		{"cpu-high-critical", 20, 0.95, priority.Critical, false},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			s, now := benchShedder(b, bc.inFlight)
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(100 * time.Nanosecond)
				tk, err := s.Allow(now, bc.cpu, bc.crit)
				if (err != nil) != bc.wantShed {
					b.Fatalf("err = %v", err)
				}
				tk.Cancel()
			}
		})
	}
}

// BenchmarkAllowDone is a whole admitted request: Allow, then Done, which
// records the completion in the window under the lock.
func BenchmarkAllowDone(b *testing.B) {
	s, now := benchShedder(b, 0)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(100 * time.Nanosecond)
		tk, err := s.Allow(now, 0.95, priority.Default)
		if err != nil {
			b.Fatal(err)
		}
		tk.Done(now)
	}
}

// BenchmarkAllowParallel is the shed decision from every P at once, with the
// CPU high so every call takes the lock.
func BenchmarkAllowParallel(b *testing.B) {
	s, now := benchShedder(b, 20)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, _ := s.Allow(now, 0.95, priority.Default)
			tk.Cancel()
		}
	})
}

// BenchmarkThrottle measures the throttle decision above the threshold (a
// random draw) and below it.
func BenchmarkThrottle(b *testing.B) {
	th, err := NewThrottle(DefaultThrottleConfig())
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		cpu  float64
	}{{"cpu-high", 0.95}, {"cpu-low", 0.5}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sum time.Duration
			for b.Loop() {
				sum += th.Delay(bc.cpu)
			}
			if bc.cpu > 0.85 && sum == 0 {
				b.Fatal("no delay above the threshold")
			}
		})
	}
}
