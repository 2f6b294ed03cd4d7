package gate

import (
	"testing"
	"time"
)

func TestBucketStartsFullAndRefusesWithTheWait(t *testing.T) {
	b := newTokenBucket(20, 40, t0) // one token per 50 ms
	if b.per != 50*time.Millisecond || b.max != 2*time.Second {
		t.Fatalf("per %s max %s", b.per, b.max)
	}
	if got := b.tokens(t0); got != 40 {
		t.Fatalf("tokens at start = %v, want 40", got)
	}
	for i := range 40 {
		if wait, ok := b.allow(t0); !ok || wait != 0 {
			t.Fatalf("take %d: ok=%v wait=%s", i, ok, wait)
		}
	}
	if wait, ok := b.allow(t0); ok || wait != 50*time.Millisecond {
		t.Fatalf("empty bucket: ok=%v wait=%s, want a refusal with 50ms", ok, wait)
	}
	// A refusal takes nothing: the wait only shrinks as time passes.
	at := t0.Add(20 * time.Millisecond)
	if wait, ok := b.allow(at); ok || wait != 30*time.Millisecond {
		t.Fatalf("after 20ms: ok=%v wait=%s, want 30ms", ok, wait)
	}
	if got := b.tokens(at); got != 0.4 {
		t.Fatalf("tokens after 20ms = %v, want 0.4", got)
	}
	at = t0.Add(50 * time.Millisecond)
	if wait, ok := b.allow(at); !ok || wait != 0 {
		t.Fatalf("after 50ms: ok=%v wait=%s, want a token", ok, wait)
	}
	if wait, ok := b.allow(at); ok || wait != 50*time.Millisecond {
		t.Fatalf("right after: ok=%v wait=%s", ok, wait)
	}
}

func TestBucketRefillIsCappedAtBurst(t *testing.T) {
	b := newTokenBucket(10, 3, t0) // 100 ms per token
	for range 3 {
		b.allow(t0)
	}
	if got := b.tokens(t0.Add(250 * time.Millisecond)); got != 2.5 {
		t.Fatalf("tokens after 250ms = %v, want 2.5", got)
	}
	later := t0.Add(time.Hour)
	if got := b.tokens(later); got != 3 {
		t.Fatalf("tokens after an hour = %v, want the burst 3", got)
	}
	for i := range 3 {
		if _, ok := b.allow(later); !ok {
			t.Fatalf("take %d after refill refused", i)
		}
	}
	if _, ok := b.allow(later); ok {
		t.Fatal("a fourth token out of a bucket of 3")
	}
	// Time far in the future must not overflow the credit.
	if got := b.tokens(later.Add(200 * 365 * 24 * time.Hour)); got != 3 {
		t.Fatalf("tokens after 200 years = %v", got)
	}
}

func TestBucketIgnoresTimeGoingBackwards(t *testing.T) {
	b := newTokenBucket(10, 1, t0)
	b.allow(t0.Add(time.Second)) // refills to full (it was), takes the one token
	if _, ok := b.allow(t0); ok {
		t.Fatal("an earlier time gave a token")
	}
	// The interval from t0 to t0+1s was already paid once; only time after
	// t0+1s earns credit.
	if wait, ok := b.allow(t0.Add(time.Second + 40*time.Millisecond)); ok || wait != 60*time.Millisecond {
		t.Fatalf("ok=%v wait=%s, want a refusal with 60ms", ok, wait)
	}
}

func TestBucketOddRates(t *testing.T) {
	b := newTokenBucket(3, 1, t0)
	if b.per != 333333333*time.Nanosecond {
		t.Fatalf("per = %s", b.per)
	}
	b.allow(t0)
	if wait, _ := b.allow(t0); wait != b.per {
		t.Fatalf("wait %s", wait)
	}
	if ceilMillis(b.per) != 334*time.Millisecond || ceilMillis(time.Nanosecond) != time.Millisecond || ceilMillis(time.Second) != time.Second {
		t.Fatal("ceilMillis")
	}
	slow := newTokenBucket(1e-9, 2, t0) // once in ~31 years: clamped to once an hour
	if slow.per != maxTokenPeriod || slow.max != 2*maxTokenPeriod {
		t.Fatalf("slow bucket per %s max %s", slow.per, slow.max)
	}
	fast := newTokenBucket(1e9, 1, t0)
	if fast.per != time.Nanosecond {
		t.Fatalf("fast bucket per %s", fast.per)
	}
}

func TestBucketAllowDoesNotAllocate(t *testing.T) {
	b := newTokenBucket(20, 40, t0)
	now := t0
	if n := testing.AllocsPerRun(1000, func() {
		now = now.Add(10 * time.Millisecond)
		b.allow(now)
	}); n != 0 {
		t.Fatalf("allow allocates %v times", n)
	}
}

// BenchmarkBucketAllow is the per-frame rate limit check.
func BenchmarkBucketAllow(b *testing.B) {
	tb := newTokenBucket(20, 40, t0)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		tb.allow(now)
	}
}
