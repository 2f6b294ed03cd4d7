package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

func BenchmarkPolicyDelay(b *testing.B) {
	p := DefaultPolicy()
	r := rand.New(rand.NewPCG(1, 1))
	var sink time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink += p.Delay(i&7, 50*time.Millisecond, r.Float64)
	}
	_ = sink
}

func BenchmarkBudgetTryRetry(b *testing.B) {
	bu := NewBudget(DefaultBudgetConfig())
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		bu.OnRequest(now)
		bu.TryRetry(now)
	}
}
