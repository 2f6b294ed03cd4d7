package client

import (
	"context"
	"testing"
	"time"

	"github.com/leveehq/levee/client/pacer"
	"github.com/leveehq/levee/internal/clock"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// stepClock is a Clock whose every Now is 300 µs after the previous one, so
// that a benchmark measures the decision, not the host's clock read.
type stepClock struct {
	clock.Real
	now time.Time
}

func (s *stepClock) Now() time.Time {
	s.now = s.now.Add(300 * time.Microsecond)
	return s.now
}

// The client's pacing decision for one request when its slot is open (the
// common case below the rate): criticality to priority, then the pacer's
// decision under its lock. Single goroutine, so stepClock needs no lock.
func BenchmarkPaceDecision(b *testing.B) {
	c := &Client{pacer: pacer.New(pacer.Config{Rate: 10000}, &stepClock{now: time.Unix(1_700_000_000, 0)})}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.pace(ctx, leveev2.Criticality_CRITICALITY_CRITICAL); err != nil {
			b.Fatal(err)
		}
	}
}

// The same on the real clock (adds one time.Now, whose cost depends on the
// host's clock source).
func BenchmarkPaceDecisionRealClock(b *testing.B) {
	c := &Client{pacer: pacer.New(pacer.Config{Rate: 1e9, MinRate: 1e9}, clock.Real{})}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.pace(ctx, leveev2.Criticality_CRITICALITY_CRITICAL); err != nil {
			b.Fatal(err)
		}
	}
}

// What the reader does with each reply's backpressure hints.
func BenchmarkFeedPressure(b *testing.B) {
	c := &Client{pacer: pacer.New(pacer.Config{}, clock.Real{})}
	frames := []*leveev2.ServerFrame{
		{RequestId: 1, Backpressure: &leveev2.Backpressure{Ratio: 0.9}},
		{RequestId: 2, Backpressure: &leveev2.Backpressure{Ratio: 0.1}},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.feedPressure(frames[i&1])
	}
}
