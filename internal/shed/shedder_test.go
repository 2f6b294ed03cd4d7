package shed

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/priority"
)

var t0 = time.Unix(1_700_000_000, 0)

// ms returns t0 plus n milliseconds.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// newShedder returns a default Shedder whose buckets start at t0.
func newShedder(t *testing.T) *Shedder {
	t.Helper()
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	s.Stats(t0) // fixes the epoch, so bucket k is [k×100ms, (k+1)×100ms)
	return s
}

// complete records n completions that end at `at` with latency rtt.
func complete(t *testing.T, s *Shedder, at time.Time, rtt time.Duration, n int) {
	t.Helper()
	for range n {
		tk, err := s.Allow(at.Add(-rtt), 0, priority.Default)
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(at)
	}
}

// admit takes on n requests at now with a low CPU and returns their tickets.
func admit(t *testing.T, s *Shedder, now time.Time, n int) []Ticket {
	t.Helper()
	var out []Ticket
	for range n {
		tk, err := s.Allow(now, 0, priority.Default)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tk)
	}
	return out
}

// withLimit8 gives s an estimate of 40 completions per 100 ms at best 20 ms
// (limit 40 × 10 × 0.020 = 8) from bucket 0, and returns the first time at
// which it applies.
func withLimit8(t *testing.T, s *Shedder) time.Time {
	t.Helper()
	complete(t, s, ms(10), 20*time.Millisecond, 1)
	complete(t, s, ms(50), 30*time.Millisecond, 39)
	now := ms(100)
	if st := s.Stats(now); st.MaxPass != 40 || st.MinRTT != 20*time.Millisecond || st.Limit != 8 {
		t.Fatalf("stats = %+v, want maxPass 40, minRTT 20ms, limit 8", st)
	}
	return now
}

func TestLimitFormula(t *testing.T) {
	tests := []struct {
		name      string
		perBucket []int // completions in buckets 0, 1, ...
		rtt       []time.Duration
		maxPass   int64
		minRTT    time.Duration
		limit     float64
	}{
		{"one bucket", []int{40}, []time.Duration{20 * time.Millisecond}, 40, 20 * time.Millisecond, 8},
		{"max and min from different buckets", []int{10, 50, 20},
			[]time.Duration{5 * time.Millisecond, 40 * time.Millisecond, 100 * time.Millisecond},
			50, 5 * time.Millisecond, 50 * 10 * 0.005},
		{"slow work", []int{3}, []time.Duration{2 * time.Second}, 3, 2 * time.Second, 60},
		{"floor of one", []int{2}, []time.Duration{10 * time.Millisecond}, 2, 10 * time.Millisecond, 1},
		{"zero latency", []int{5}, []time.Duration{0}, 5, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newShedder(t)
			for i, n := range tc.perBucket {
				complete(t, s, ms(100*i+50), tc.rtt[i], n)
			}
			st := s.Stats(ms(100 * len(tc.perBucket)))
			if st.MaxPass != tc.maxPass || st.MinRTT != tc.minRTT || st.Limit != tc.limit {
				t.Fatalf("stats = %+v, want maxPass %d minRTT %v limit %v", st, tc.maxPass, tc.minRTT, tc.limit)
			}
			if got := s.Limit(ms(100 * len(tc.perBucket))); got != tc.limit {
				t.Fatalf("Limit = %v, want %v", got, tc.limit)
			}
		})
	}
}

func TestLimitScalesWithBucketSize(t *testing.T) {
	// 1 s in 4 buckets of 250 ms: 4 buckets per second.
	cfg := DefaultConfig()
	cfg.Window, cfg.Buckets = time.Second, 4
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Stats(t0)
	complete(t, s, ms(100), 50*time.Millisecond, 30)
	// 30 per 250 ms = 120/s; × 0.05 s = 6 in flight.
	if got := s.Limit(ms(250)); got != 6 {
		t.Fatalf("Limit = %v, want 6", got)
	}
}

func TestCurrentBucketIsLeftOut(t *testing.T) {
	s := newShedder(t)
	complete(t, s, ms(20), 10*time.Millisecond, 30)
	if st := s.Stats(ms(99)); st.MaxPass != 0 || st.Limit != 0 {
		t.Fatalf("bucket still filling counted: %+v", st)
	}
	// Bucket 1 is filling with more completions and a smaller latency; only
	// bucket 0 counts.
	complete(t, s, ms(150), time.Millisecond, 100)
	if st := s.Stats(ms(199)); st.MaxPass != 30 || st.MinRTT != 10*time.Millisecond {
		t.Fatalf("stats = %+v, want bucket 0 only", st)
	}
	if st := s.Stats(ms(200)); st.MaxPass != 100 || st.MinRTT != time.Millisecond || st.Limit != 1 {
		t.Fatalf("stats = %+v, want bucket 1 included", st)
	}
}

func TestWindowExpiry(t *testing.T) {
	s := newShedder(t)
	complete(t, s, ms(50), 10*time.Millisecond, 40)   // bucket 0
	complete(t, s, ms(2050), 30*time.Millisecond, 20) // bucket 20
	// Bucket 0 counts while it is one of the last 50 completed buckets:
	// from 100 ms until 5.1 s.
	if st := s.Stats(ms(5099)); st.MaxPass != 40 || st.MinRTT != 10*time.Millisecond {
		t.Fatalf("at 5.099s: %+v, want bucket 0 still in", st)
	}
	if st := s.Stats(ms(5100)); st.MaxPass != 20 || st.MinRTT != 30*time.Millisecond || st.Limit != 20*10*0.03 {
		t.Fatalf("at 5.1s: %+v, want only bucket 20", st)
	}
	if st := s.Stats(ms(7099)); st.MaxPass != 20 {
		t.Fatalf("at 7.099s: %+v, want bucket 20 still in", st)
	}
	if st := s.Stats(ms(7100)); st.MaxPass != 0 || st.Limit != 0 {
		t.Fatalf("at 7.1s: %+v, want empty", st)
	}
}

func TestWindowSlidesBucketByBucket(t *testing.T) {
	s := newShedder(t)
	// Bucket k gets 100-k completions, so the maximum is always the oldest
	// bucket still in the window.
	for k := range 70 {
		// At k×100ms the completed buckets are max(0, k-50) .. k-1.
		if st := s.Stats(ms(100 * k)); k > 0 && st.MaxPass != int64(100-max(0, k-50)) {
			t.Fatalf("at %dms: maxPass = %d, want %d", 100*k, st.MaxPass, 100-max(0, k-50))
		}
		complete(t, s, ms(100*k+1), time.Millisecond, 100-k)
	}
}

func TestPartialWindowAndIdleGap(t *testing.T) {
	s := newShedder(t)
	complete(t, s, ms(350), 40*time.Millisecond, 12) // bucket 3 only
	if st := s.Stats(ms(1000)); st.MaxPass != 12 || st.MinRTT != 40*time.Millisecond {
		t.Fatalf("partial window: %+v", st)
	}
	// A silence longer than the window forgets everything at once, however
	// many times the ring would have wrapped.
	if st := s.Stats(ms(60_000)); st.MaxPass != 0 || st.Limit != 0 {
		t.Fatalf("after idle gap: %+v", st)
	}
	complete(t, s, ms(60_050), 5*time.Millisecond, 7)
	if st := s.Stats(ms(60_100)); st.MaxPass != 7 || st.MinRTT != 5*time.Millisecond {
		t.Fatalf("after restart: %+v", st)
	}
}

func TestEarlierTimesCountInCurrentBucket(t *testing.T) {
	// Callers read the clock before taking the lock, so times arrive a
	// little out of order; they land in the current bucket.
	s := newShedder(t)
	s.Stats(ms(250))
	complete(t, s, ms(180), time.Millisecond, 9) // bucket 1 has closed; goes to bucket 2
	complete(t, s, ms(-50), time.Millisecond, 1) // before the epoch
	if st := s.Stats(ms(299)); st.MaxPass != 0 {
		t.Fatalf("stats = %+v, want nothing completed yet", st)
	}
	if st := s.Stats(ms(300)); st.MaxPass != 10 {
		t.Fatalf("stats = %+v, want 10 in bucket 2", st)
	}
}

func TestColdStartNeverSheds(t *testing.T) {
	s := newShedder(t)
	for i := range 1000 {
		if _, err := s.Allow(ms(i), 1, priority.Sheddable); err != nil {
			t.Fatalf("request %d shed with no estimate: %v", i, err)
		}
	}
	if got := s.InFlight(); got != 1000 {
		t.Fatalf("InFlight = %d, want 1000", got)
	}
	if got := s.Limit(ms(1000)); got != 0 {
		t.Fatalf("Limit = %v, want 0 (no estimate)", got)
	}
}

func TestShedRule(t *testing.T) {
	tests := []struct {
		name     string
		inFlight int
		cpu      float64
		crit     priority.Class
		shed     bool
	}{
		{"cpu low, in-flight over limit", 20, 0.5, priority.Default, false},
		{"cpu at threshold, in-flight over limit", 20, 0.80, priority.Default, false},
		{"cpu high, in-flight under limit", 5, 0.95, priority.Default, false},
		{"cpu high, in-flight at limit", 8, 0.95, priority.Default, false},
		{"cpu high, in-flight over limit", 9, 0.81, priority.Default, true},
		{"cpu high, critical, far over limit", 100, 1, priority.Critical, false},
		{"cpu high, sheddable at 0.8 of limit", 6, 0.95, priority.Sheddable, false},
		{"cpu high, sheddable over 0.8 of limit", 7, 0.95, priority.Sheddable, true},
		{"cpu high, unknown criticality is default", 9, 0.95, priority.Class(7), true},
		{"cpu high, unknown criticality is default, at limit", 8, 0.95, priority.Class(200), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newShedder(t)
			now := withLimit8(t, s)
			admit(t, s, now, tc.inFlight)
			tk, err := s.Allow(now, tc.cpu, tc.crit)
			if tc.shed {
				if !errors.Is(err, ErrShed) {
					t.Fatalf("err = %v, want ErrShed", err)
				}
				if tk != (Ticket{}) {
					t.Fatalf("shed request got a ticket %+v", tk)
				}
				if got := s.InFlight(); got != int64(tc.inFlight) {
					t.Fatalf("InFlight = %d after a shed, want %d", got, tc.inFlight)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v, want admitted", err)
			}
			if got := s.InFlight(); got != int64(tc.inFlight)+1 {
				t.Fatalf("InFlight = %d, want %d", got, tc.inFlight+1)
			}
		})
	}
}

func TestCriticalNeverShedWhileOthersAre(t *testing.T) {
	s := newShedder(t)
	now := withLimit8(t, s)
	admit(t, s, now, 50)
	for i := range 100 {
		at := now.Add(time.Duration(i) * time.Millisecond)
		if _, err := s.Allow(at, 1, priority.Critical); err != nil {
			t.Fatalf("critical request %d shed: %v", i, err)
		}
		if _, err := s.Allow(at, 1, priority.Default); !errors.Is(err, ErrShed) {
			t.Fatalf("default request %d: err = %v, want ErrShed", i, err)
		}
	}
	if got := s.InFlight(); got != 150 {
		t.Fatalf("InFlight = %d, want 150 (critical requests count)", got)
	}
}

func TestCoolOff(t *testing.T) {
	s := newShedder(t)
	start := withLimit8(t, s) // 100 ms
	tickets := admit(t, s, start, 12)
	at := func(d int) time.Time { return start.Add(time.Duration(d) * time.Millisecond) }

	if _, err := s.Allow(at(0), 0.9, priority.Default); !errors.Is(err, ErrShed) {
		t.Fatalf("hot and over the limit: err = %v, want ErrShed", err)
	}
	if !s.Stats(at(0)).Hot {
		t.Fatal("not hot after a shed")
	}
	// The CPU dips under the threshold: still shedding for the cool-off
	// after the CPU was last seen high.
	for _, d := range []int{1, 100, 500, 999} {
		if _, err := s.Allow(at(d), 0.5, priority.Default); !errors.Is(err, ErrShed) {
			t.Fatalf("dip at +%dms: err = %v, want ErrShed (cool-off)", d, err)
		}
	}
	// A critical request is still admitted during the cool-off.
	tk, err := s.Allow(at(999), 0.5, priority.Critical)
	if err != nil {
		t.Fatalf("critical in cool-off: %v", err)
	}
	tk.Cancel()
	// The cool-off runs out 1 s after the CPU was last high.
	if _, err := s.Allow(at(1000), 0.5, priority.Default); err != nil {
		t.Fatalf("after the cool-off: err = %v, want admitted", err)
	}
	if s.Stats(at(1000)).Hot {
		t.Fatal("still hot after the cool-off")
	}
	// With the flag cleared a dip no longer sheds, over the limit or not.
	if _, err := s.Allow(at(1001), 0.79, priority.Default); err != nil {
		t.Fatalf("low CPU after cool-off: %v", err)
	}

	// The CPU comes back: shed again; a high reading during the cool-off
	// extends it.
	if _, err := s.Allow(at(2000), 0.95, priority.Default); !errors.Is(err, ErrShed) {
		t.Fatalf("hot again: err = %v, want ErrShed", err)
	}
	if _, err := s.Allow(at(2600), 0.95, priority.Sheddable); !errors.Is(err, ErrShed) {
		t.Fatalf("hot again: err = %v, want ErrShed", err)
	}
	if _, err := s.Allow(at(3500), 0.5, priority.Default); !errors.Is(err, ErrShed) {
		t.Fatalf("+900ms after last high CPU: err = %v, want ErrShed", err)
	}
	// During the cool-off, shedding stops as soon as in-flight is back
	// within the limit.
	for _, tk := range tickets {
		tk.Cancel()
	}
	for s.InFlight() < 9 {
		if _, err := s.Allow(at(3550), 0.5, priority.Default); err != nil {
			t.Fatalf("in-flight %d within the limit during cool-off: %v", s.InFlight(), err)
		}
	}
	if _, err := s.Allow(at(3550), 0.5, priority.Default); !errors.Is(err, ErrShed) {
		t.Fatalf("in-flight 9 during cool-off: err = %v, want ErrShed", err)
	}
	if _, err := s.Allow(at(3600), 0.5, priority.Default); err != nil {
		t.Fatalf("1 s after the last high CPU: %v", err)
	}
}

func TestNoCoolOffWithoutAShed(t *testing.T) {
	// High CPU with in-flight within the limit sheds nothing, so a dip
	// afterwards is not hot even if in-flight then exceeds the limit.
	s := newShedder(t)
	now := withLimit8(t, s)
	if _, err := s.Allow(now, 0.95, priority.Default); err != nil {
		t.Fatal(err)
	}
	admit(t, s, now, 20)
	if _, err := s.Allow(now.Add(time.Millisecond), 0.5, priority.Default); err != nil {
		t.Fatalf("dip without a prior shed: %v", err)
	}
}

func TestZeroCoolOff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CoolOff = 0
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Stats(t0)
	now := withLimit8(t, s)
	admit(t, s, now, 9)
	if _, err := s.Allow(now, 0.9, priority.Default); !errors.Is(err, ErrShed) {
		t.Fatalf("err = %v, want ErrShed", err)
	}
	if _, err := s.Allow(now, 0.5, priority.Default); err != nil {
		t.Fatalf("no cool-off: %v", err)
	}
}

func TestTicketDoneAndCancel(t *testing.T) {
	s := newShedder(t)
	a := admit(t, s, ms(10), 3)
	if got := s.InFlight(); got != 3 {
		t.Fatalf("InFlight = %d, want 3", got)
	}
	a[0].Done(ms(30))
	a[1].Cancel()
	if got := s.InFlight(); got != 1 {
		t.Fatalf("InFlight = %d, want 1", got)
	}
	// Only the Done counts as a completion, with latency 20 ms.
	if st := s.Stats(ms(100)); st.MaxPass != 1 || st.MinRTT != 20*time.Millisecond {
		t.Fatalf("stats = %+v, want one completion of 20ms", st)
	}
	// A Done at a time before the start counts as zero latency.
	a[2].Done(ms(5))
	if st := s.Stats(ms(200)); st.MinRTT != 0 || st.InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
	var zero Ticket
	zero.Done(ms(300))
	zero.Cancel()
	if got := s.InFlight(); got != 0 {
		t.Fatalf("InFlight = %d after zero-ticket calls, want 0", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := newShedder(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				now := ms(i)
				cpu := 0.5
				if (i/300)%2 == 1 {
					cpu = 0.95
				}
				tk, err := s.Allow(now, cpu, priority.Class(g%3-1))
				if err != nil {
					continue
				}
				if i%5 == 0 {
					tk.Cancel()
				} else {
					tk.Done(now.Add(time.Millisecond))
				}
				_ = s.Limit(now)
				_ = s.InFlight()
			}
		}()
	}
	wg.Wait()
	if got := s.InFlight(); got != 0 {
		t.Fatalf("InFlight = %d after all done, want 0", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"zero window", func(c *Config) { c.Window = 0 }},
		{"zero buckets", func(c *Config) { c.Buckets = 0 }},
		{"window shorter than buckets", func(c *Config) { c.Window, c.Buckets = 10, 20 }},
		{"threshold above 1", func(c *Config) { c.CPUThreshold = 1.5 }},
		{"negative threshold", func(c *Config) { c.CPUThreshold = -0.1 }},
		{"negative cool-off", func(c *Config) { c.CoolOff = -time.Second }},
		{"zero sheddable factor", func(c *Config) { c.SheddableFactor = 0 }},
		{"sheddable factor above 1", func(c *Config) { c.SheddableFactor = 1.1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			if err := c.Validate(); !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate = %v, want ErrConfig", err)
			}
			if _, err := New(c); !errors.Is(err, ErrConfig) {
				t.Fatalf("New = %v, want ErrConfig", err)
			}
		})
	}
}
