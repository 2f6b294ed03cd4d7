package backoff

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const ms = time.Millisecond

func constRnd(f float64) func() float64 { return func() float64 { return f } }

func TestCeilingDoublesToCap(t *testing.T) {
	p := DefaultPolicy()
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}
	for n, w := range want {
		if got := p.Ceiling(n); got != w {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, w)
		}
	}
	for _, n := range []int{-5, -1} {
		if got := p.Ceiling(n); got != 100*ms {
			t.Errorf("Ceiling(%d) = %v, want 100ms", n, got)
		}
	}
	for _, n := range []int{30, 61, 62, 63, 64, 1000, math.MaxInt} {
		if got := p.Ceiling(n); got != 5*time.Second {
			t.Errorf("Ceiling(%d) = %v, want the 5s cap", n, got)
		}
	}
	c := Policy{Base: 3 * ms, Cap: 20 * ms}
	for n, w := range []time.Duration{3 * ms, 6 * ms, 12 * ms, 20 * ms, 20 * ms} {
		if got := c.Ceiling(n); got != w {
			t.Errorf("custom Ceiling(%d) = %v, want %v", n, got, w)
		}
	}
}

func TestZeroPolicyIsDefault(t *testing.T) {
	var z Policy
	for n := range 10 {
		if z.Ceiling(n) != DefaultPolicy().Ceiling(n) {
			t.Fatalf("Policy{}.Ceiling(%d) = %v, want the default %v", n, z.Ceiling(n), DefaultPolicy().Ceiling(n))
		}
	}
	if !z.CanRetry(2) || z.CanRetry(3) {
		t.Fatal("Policy{} does not allow exactly 3 attempts")
	}
}

func TestCanRetryCountsTheFirstAttempt(t *testing.T) {
	p := DefaultPolicy()
	for attempts, want := range map[int]bool{1: true, 2: true, 3: false, 4: false} {
		if got := p.CanRetry(attempts); got != want {
			t.Errorf("CanRetry(%d) = %v, want %v", attempts, got, want)
		}
	}
	if (Policy{MaxAttempts: 1}).CanRetry(1) {
		t.Error("MaxAttempts 1 allowed a retry")
	}
}

func TestDelayBoundsAndCap(t *testing.T) {
	p := DefaultPolicy()
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 12 {
		c := p.Ceiling(n)
		for range 2000 {
			d := p.Delay(n, 0, r.Float64)
			if d < 0 || d >= c || d >= p.Cap {
				t.Fatalf("Delay(%d) = %v, want in [0, %v)", n, d, c)
			}
		}
	}
	// The extremes of the random source.
	if d := p.Delay(2, 0, constRnd(0)); d != 0 {
		t.Errorf("rnd 0: %v, want 0", d)
	}
	if d := p.Delay(2, 0, constRnd(0.5)); d != 200*ms {
		t.Errorf("rnd 0.5: %v, want 200ms", d)
	}
	for _, f := range []float64{math.Nextafter(1, 0), 1, 7, math.Inf(1)} {
		if d := p.Delay(2, 0, constRnd(f)); d < 0 || d >= 400*ms {
			t.Errorf("rnd %v: %v, want in [0, 400ms)", f, d)
		}
	}
	for _, f := range []float64{-1, math.NaN(), math.Inf(-1)} {
		if d := p.Delay(2, 0, constRnd(f)); d != 0 {
			t.Errorf("rnd %v: %v, want 0", f, d)
		}
	}
	if d := p.Delay(3, 0, nil); d < 0 || d >= 800*ms {
		t.Errorf("nil rnd: %v, want in [0, 800ms)", d)
	}
}

func TestDelayNeverBeforeRetryAfter(t *testing.T) {
	p := DefaultPolicy()
	r := rand.New(rand.NewPCG(3, 4))
	for _, ra := range []time.Duration{1 * ms, 100 * ms, 2 * time.Second, 30 * time.Second} {
		for n := range 8 {
			lo, hi := ra, ra+p.Ceiling(n)
			for range 1000 {
				if d := p.Delay(n, ra, r.Float64); d < lo || d >= hi {
					t.Fatalf("Delay(%d, %v) = %v, want in [%v, %v)", n, ra, d, lo, hi)
				}
			}
		}
	}
	if d := p.Delay(0, -time.Second, constRnd(0)); d != 0 {
		t.Errorf("negative retryAfter: %v, want 0", d)
	}
}

// Full jitter: the delays spread uniformly over [0, ceiling), so clients
// that failed together do not retry together.
func TestDelayJitterSpread(t *testing.T) {
	p := DefaultPolicy()
	r := rand.New(rand.NewPCG(5, 6))
	const n, attempt, bins = 20000, 3, 10
	c := p.Ceiling(attempt) // 800ms
	var hist [bins]int
	var sum time.Duration
	seen := map[time.Duration]bool{}
	for range n {
		d := p.Delay(attempt, 0, r.Float64)
		hist[int(d*bins/c)]++
		sum += d
		seen[d] = true
	}
	if mean := sum / n; mean < c/2-c/40 || mean > c/2+c/40 {
		t.Errorf("mean %v, want about %v", mean, c/2)
	}
	for i, h := range hist {
		if h < n/bins*85/100 || h > n/bins*115/100 {
			t.Errorf("bin %d has %d of %d, want about %d", i, h, n, n/bins)
		}
	}
	if len(seen) < n*9/10 {
		t.Errorf("only %d distinct delays in %d", len(seen), n)
	}
	// With a retryAfter the spread is kept, shifted.
	ra := 1 * time.Second
	var lo, hi int
	for range n {
		if p.Delay(0, ra, r.Float64) < ra+50*ms {
			lo++
		} else {
			hi++
		}
	}
	if lo < n*45/100 || hi < n*45/100 {
		t.Errorf("retryAfter spread: %d below the midpoint, %d above", lo, hi)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, p := range []Policy{{}, DefaultPolicy(), {Base: ms, Cap: ms}, {MaxAttempts: 1}} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	for _, p := range []Policy{{Base: -1}, {Cap: -1}, {MaxAttempts: -1}, {Base: 2 * time.Second, Cap: time.Second}, {Base: 6 * time.Second}} {
		if err := p.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", p, err)
		}
	}
}

func TestDelaySaturates(t *testing.T) {
	if d := DefaultPolicy().Delay(9, math.MaxInt64-1, constRnd(0.5)); d != math.MaxInt64 {
		t.Fatalf("huge retryAfter: %v, want the largest Duration", d)
	}
}
