package shed

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestThrottleBelowThresholdIsZero(t *testing.T) {
	th, err := NewThrottle(ThrottleConfig{CPUThreshold: 0.85, MaxDelay: 100 * time.Millisecond,
		Int64N: func(int64) int64 { t.Fatal("random source used below the threshold"); return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	for _, cpu := range []float64{0, 0.5, 0.84, 0.85} {
		if d := th.Delay(cpu); d != 0 {
			t.Fatalf("Delay(%v) = %v, want 0", cpu, d)
		}
	}
}

func TestThrottleUsesRandomSource(t *testing.T) {
	var gotN int64
	th, err := NewThrottle(ThrottleConfig{CPUThreshold: 0.85, MaxDelay: 100 * time.Millisecond,
		Int64N: func(n int64) int64 { gotN = n; return n - 1 }})
	if err != nil {
		t.Fatal(err)
	}
	if d := th.Delay(0.86); d != 100*time.Millisecond-1 {
		t.Fatalf("Delay = %v, want 100ms-1ns", d)
	}
	if gotN != int64(100*time.Millisecond) {
		t.Fatalf("random source asked for [0, %d), want [0, %d)", gotN, int64(100*time.Millisecond))
	}
}

func TestThrottleDistribution(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex // rand.Rand is not safe for concurrent use; the contract asks for it
	cfg := DefaultThrottleConfig()
	cfg.Int64N = func(n int64) int64 { mu.Lock(); defer mu.Unlock(); return r.Int64N(n) }
	th, err := NewThrottle(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	var deciles [10]int
	var sum time.Duration
	for range n {
		d := th.Delay(0.99)
		if d < 0 || d >= 100*time.Millisecond {
			t.Fatalf("Delay = %v, outside [0, 100ms)", d)
		}
		deciles[d/(10*time.Millisecond)]++
		sum += d
	}
	// Uniform: each 10 ms decile holds about n/10 (sd ≈ 95), the mean is
	// about 50 ms (sd ≈ 0.09 ms).
	for i, c := range deciles {
		if c < n/10-600 || c > n/10+600 {
			t.Errorf("decile %d holds %d of %d, want about %d", i, c, n, n/10)
		}
	}
	if mean := sum / n; mean < 49*time.Millisecond || mean > 51*time.Millisecond {
		t.Errorf("mean delay %v, want about 50ms", mean)
	}
}

func TestThrottleDefaultSource(t *testing.T) {
	th, err := NewThrottle(DefaultThrottleConfig())
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[time.Duration]bool{}
	for range 1000 {
		d := th.Delay(1)
		if d < 0 || d >= 100*time.Millisecond {
			t.Fatalf("Delay = %v, outside [0, 100ms)", d)
		}
		distinct[d] = true
	}
	if len(distinct) < 900 {
		t.Fatalf("only %d distinct delays in 1000 draws", len(distinct))
	}
}

func TestThrottleOff(t *testing.T) {
	th, err := NewThrottle(ThrottleConfig{CPUThreshold: 0.85})
	if err != nil {
		t.Fatal(err)
	}
	if d := th.Delay(1); d != 0 {
		t.Fatalf("MaxDelay 0: Delay = %v, want 0", d)
	}
}

func TestThrottleConfigValidate(t *testing.T) {
	for _, c := range []ThrottleConfig{
		{CPUThreshold: 1.2, MaxDelay: time.Millisecond},
		{CPUThreshold: -1, MaxDelay: time.Millisecond},
		{CPUThreshold: 0.85, MaxDelay: -time.Millisecond},
	} {
		if _, err := NewThrottle(c); !errors.Is(err, ErrConfig) {
			t.Errorf("NewThrottle(%+v) = %v, want ErrConfig", c, err)
		}
	}
}
