package pacer

import (
	"context"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

// The pacing decision on its own: the pure schedule, no lock.
func BenchmarkDecision(b *testing.B) {
	p := New(Config{Rate: 1000}, nil)
	s := &p.sched
	now := t0
	var waited time.Duration
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(300 * time.Microsecond)
		waited += s.reserve(now)
	}
	_ = waited
}

// The decision as the Pacer takes it, under its mutex (uncontended).
func BenchmarkReserve(b *testing.B) {
	p := New(Config{Rate: 1000}, nil)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(300 * time.Microsecond)
		p.reserve(now)
	}
}

func BenchmarkNext(b *testing.B) {
	p := New(Config{Rate: 1000}, nil)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(300 * time.Microsecond)
		p.Next(now)
	}
}

func BenchmarkSetPressure(b *testing.B) {
	p := New(Config{Rate: 1000}, nil)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p.SetPressure(float64(i&7) / 8)
	}
}

// Wait when the slot is open and the queue empty (the common case below
// the rate), on the real clock.
func BenchmarkWaitOpenSlot(b *testing.B) {
	p := New(Config{Rate: 1e9, MinRate: 1e9}, clock.Real{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Wait(ctx, Default); err != nil {
			b.Fatal(err)
		}
	}
}
