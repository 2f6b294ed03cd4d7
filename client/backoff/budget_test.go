package backoff

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// A long run against a server that fails everything: every request wants
// its two retries, and the budget lets about 10 % through.
func TestBudgetAllowsAboutTenPercentOverALongRun(t *testing.T) {
	b := NewBudget(DefaultBudgetConfig())
	const rate, seconds = 200, 300 // requests per second, simulated seconds
	var requests, retries int
	step := time.Second / rate
	for i := range rate * seconds {
		now := t0.Add(time.Duration(i) * step)
		b.OnRequest(now)
		requests++
		for range 2 {
			if b.TryRetry(now) {
				retries++
			}
		}
	}
	got := float64(retries) / float64(requests)
	// Bound: 10 % of requests plus the 0.2/s reserve (60 retries in 300 s).
	bound := (0.1*float64(requests) + DefaultMinPerSecond*seconds) / float64(requests)
	if got < 0.095 || got > bound+0.001 {
		t.Fatalf("retries/requests = %.4f (%d/%d), want about 0.10 and <= %.4f", got, retries, requests, bound)
	}
	t.Logf("retries/requests = %.4f (%d/%d)", got, retries, requests)
}

// A storm: a thousand requests fail at the same instant and all want to
// retry. Only the budget's worth go out.
func TestBudgetRefusesAStorm(t *testing.T) {
	b := NewBudget(DefaultBudgetConfig())
	for range 1000 {
		b.OnRequest(t0)
	}
	ok := 0
	for range 2000 {
		if b.TryRetry(t0) {
			ok++
		}
	}
	if want := 100 + 2; ok != want { // 10 % of 1000 plus 0.2/s × 10 s
		t.Fatalf("storm: %d retries allowed, want %d", ok, want)
	}
	if b.TryRetry(t0.Add(time.Second)) {
		t.Fatal("retry allowed one second into the storm")
	}
	if a := b.Available(t0); a >= 1 {
		t.Fatalf("Available after the storm = %v", a)
	}
}

// A quiet client whose only request fails can still use its two retries,
// but not a third, and gets them back once the window has passed.
func TestBudgetReserveForAQuietClient(t *testing.T) {
	b := NewBudget(DefaultBudgetConfig())
	b.OnRequest(t0)
	if a := b.Available(t0); math.Abs(a-2.1) > 1e-9 {
		t.Fatalf("Available = %v, want 2.1", a)
	}
	if !b.TryRetry(t0) || !b.TryRetry(t0.Add(100*ms)) {
		t.Fatal("quiet client could not retry twice")
	}
	if b.TryRetry(t0.Add(200 * ms)) {
		t.Fatal("quiet client retried a third time")
	}
	// The withdrawals expire a window later.
	if b.TryRetry(t0.Add(9 * time.Second)) {
		t.Fatal("retry allowed before the window passed")
	}
	later := t0.Add(DefaultWindow + 200*ms)
	if a := b.Available(later); math.Abs(a-2) > 1e-9 {
		t.Fatalf("Available a window later = %v, want the 2-retry reserve", a)
	}
	if !b.TryRetry(later) {
		t.Fatal("reserve did not come back")
	}
}

func TestBudgetDepositsExpire(t *testing.T) {
	b := NewBudget(BudgetConfig{Ratio: 0.5, MinPerSecond: 0.1, Window: time.Second})
	for range 10 {
		b.OnRequest(t0)
	}
	if a := b.Available(t0.Add(500 * ms)); math.Abs(a-5.1) > 1e-9 {
		t.Fatalf("Available = %v, want 5.1", a)
	}
	if a := b.Available(t0.Add(time.Second)); math.Abs(a-0.1) > 1e-9 {
		t.Fatalf("Available after the window = %v, want 0.1", a)
	}
	if b.TryRetry(t0.Add(time.Second)) {
		t.Fatal("retry on a 0.1 balance")
	}
	// A long gap clears everything at once.
	b.OnRequest(t0.Add(time.Hour))
	if a := b.Available(t0.Add(time.Hour)); math.Abs(a-0.6) > 1e-9 {
		t.Fatalf("Available after an hour = %v, want 0.6", a)
	}
	// A time from before the newest slot counts in the newest slot.
	b.OnRequest(t0)
	if a := b.Available(t0.Add(time.Hour)); math.Abs(a-1.1) > 1e-9 {
		t.Fatalf("Available after a stale OnRequest = %v, want 1.1", a)
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b := NewBudget(DefaultBudgetConfig())
	var wg sync.WaitGroup
	var retries atomic.Int64
	const workers, each = 8, 1000
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				now := t0.Add(time.Duration(i) * ms)
				b.OnRequest(now)
				if b.TryRetry(now) {
					retries.Add(1)
				}
				_ = w
			}
		})
	}
	wg.Wait()
	// All within one 1 s span of one window: at most 10 % + the reserve.
	if got, max := retries.Load(), int64(workers*each/10+2); got > max || got < max-10 {
		t.Fatalf("%d retries, want just under %d", got, max)
	}
}

func TestBudgetValidate(t *testing.T) {
	for _, c := range []BudgetConfig{{}, DefaultBudgetConfig(), {Ratio: 1}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range []BudgetConfig{{Ratio: -0.1}, {Ratio: 1.5}, {Ratio: math.NaN()}, {MinPerSecond: -1}, {MinPerSecond: math.Inf(1)}, {Window: -time.Second}} {
		if err := c.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", c, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NewBudget accepted an invalid config")
		}
	}()
	NewBudget(BudgetConfig{Ratio: 2})
}
