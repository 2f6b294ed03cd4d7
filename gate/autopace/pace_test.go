package autopace

import (
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/queue"
)

var t0 = time.Unix(1_700_000_000, 0)

// testPace is a Pace with the gate's default thresholds and factors,
// bounds 10..1000 per second, a 5 s interval, at rate.
func testPace(rate float64) Pace {
	return New(Config{
		MinRate: 10, MaxRate: 1000, Up: 1.25, Down: 0.5, Interval: 5 * time.Second,
		MaxQueueDepth: 500, MaxBattleP99: 500 * time.Millisecond, MaxBackpressure: 0.5,
	}, rate)
}

var (
	healthy   = Signals{QueueDepth: 100, QueueKnown: true, BattleP99: 200 * time.Millisecond, P99Known: true, Backpressure: 0.2, BPKnown: true}
	deepQueue = Signals{QueueDepth: 812, QueueKnown: true, BattleP99: 200 * time.Millisecond, P99Known: true}
	slowP99   = Signals{QueueDepth: 10, QueueKnown: true, BattleP99: 640 * time.Millisecond, P99Known: true}
	pressed   = Signals{Backpressure: 0.7, BPKnown: true}
)

func TestAutoPaceRisesWhileHealthyUpToTheMax(t *testing.T) {
	a := testPace(100)
	now := t0
	want := 100.0
	for i := range 30 {
		now = now.Add(5 * time.Second)
		d := a.Step(now, healthy)
		want = min(want*1.25, 1000)
		if d.Verdict != VerdictHealthy || d.Rate != want {
			t.Fatalf("step %d: %+v, want healthy at %v", i, d, want)
		}
	}
	d := a.Step(now.Add(5*time.Second), healthy)
	if d.Rate != 1000 || d.Changed || d.Reason != "at -auto-max-rate" {
		t.Fatalf("at the max: %+v", d)
	}
}

func TestAutoPaceFallsWhenUnhealthyDownToTheMin(t *testing.T) {
	for name, sig := range map[string]Signals{"queue depth": deepQueue, "battle p99": slowP99, "backpressure": pressed} {
		a := testPace(1000)
		now := t0
		want := 1000.0
		for i := range 10 {
			now = now.Add(5 * time.Second)
			d := a.Step(now, sig)
			want = max(want*0.5, 10)
			if d.Verdict != VerdictUnhealthy || d.Rate != want || !strings.Contains(d.Reason, name) {
				t.Fatalf("%s, step %d: %+v, want unhealthy at %v naming it", name, i, d, want)
			}
		}
		if a.Rate() != 10 {
			t.Fatalf("%s: rate %v, want the 10/s minimum", name, a.Rate())
		}
	}
	// Thresholds are inclusive for depth and p99 (the seed's alerts fire at them).
	a := testPace(100)
	if d := a.Step(t0, Signals{QueueDepth: 500, QueueKnown: true}); d.Verdict != VerdictUnhealthy {
		t.Fatalf("depth at the threshold: %+v", d)
	}
}

func TestAutoPaceHoldsAfterAFallAndWithoutSignals(t *testing.T) {
	a := testPace(400)
	now := t0.Add(5 * time.Second)
	if d := a.Step(now, deepQueue); d.Rate != 200 {
		t.Fatalf("fall: %+v", d)
	}
	now = now.Add(5 * time.Second)
	if d := a.Step(now, healthy); d.Verdict != VerdictCooling || d.Changed || d.Rate != 200 {
		t.Fatalf("first healthy step after a fall: %+v, want a hold", d)
	}
	now = now.Add(5 * time.Second)
	if d := a.Step(now, healthy); d.Verdict != VerdictHealthy || d.Rate != 250 {
		t.Fatalf("second healthy step: %+v", d)
	}
	now = now.Add(5 * time.Second)
	if d := a.Step(now, Signals{Errors: []string{"down"}}); d.Verdict != VerdictUnknown || d.Changed {
		t.Fatalf("no signals: %+v, want a hold", d)
	}
	// Unknown signals are left out: a healthy known one is enough.
	now = now.Add(5 * time.Second)
	if d := a.Step(now, Signals{Backpressure: 0.1, BPKnown: true}); d.Verdict != VerdictHealthy {
		t.Fatalf("backpressure only: %+v", d)
	}
}

func TestAutoPaceIgnoresStepsTooSoon(t *testing.T) {
	a := testPace(100)
	a.Step(t0, healthy)
	if d := a.Step(t0.Add(4*time.Second), deepQueue); d.Verdict != VerdictTooSoon || d.Changed {
		t.Fatalf("4 s after a 5 s step: %+v", d)
	}
	if d := a.Step(t0.Add(4500*time.Millisecond), deepQueue); d.Verdict != VerdictUnhealthy {
		t.Fatalf("4.5 s after (90 %% of the interval): %+v", d)
	}
}

func TestAutoPaceBounds(t *testing.T) {
	a := testPace(100)
	a.SetBounds(200, 300)
	if a.Rate() != 200 {
		t.Fatalf("rate %v after raising the minimum to 200", a.Rate())
	}
	a.SetBounds(10, 150)
	if a.Rate() != 150 {
		t.Fatalf("rate %v after lowering the maximum to 150", a.Rate())
	}
}

func TestRateFor(t *testing.T) {
	for _, tc := range []struct {
		perSec   float64
		interval time.Duration
		want     queue.Rate
	}{
		{100, 10 * time.Second, queue.Rate{N: 1000, Interval: 10 * time.Second}},
		{125, 10 * time.Second, queue.Rate{N: 1250, Interval: 10 * time.Second}},
		{0.05, 10 * time.Second, queue.Rate{N: 1, Interval: 20 * time.Second}},
		{1_000_000, time.Second, queue.Rate{N: 1_000_000, Interval: time.Second}},
	} {
		if got := RateFor(tc.perSec, tc.interval); got != tc.want || got.Validate() != nil {
			t.Errorf("RateFor(%v, %v) = %v, want %v", tc.perSec, tc.interval, got, tc.want)
		}
	}
}
