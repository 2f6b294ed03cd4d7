package gate

import (
	"strings"
	"testing"
	"time"

	"levee/queue"
)

func testPace(rate float64) autoPace {
	cfg := DefaultConfig()
	cfg.AutoMinRate, cfg.AutoMaxRate, cfg.AutoInterval = 10, 1000, 5*time.Second
	a := newAutoPace(cfg)
	a.rate = rate
	return a
}

var (
	healthy   = autoSignals{QueueDepth: 100, QueueKnown: true, BattleP99: 200 * time.Millisecond, P99Known: true, Backpressure: 0.2, BPKnown: true}
	deepQueue = autoSignals{QueueDepth: 812, QueueKnown: true, BattleP99: 200 * time.Millisecond, P99Known: true}
	slowP99   = autoSignals{QueueDepth: 10, QueueKnown: true, BattleP99: 640 * time.Millisecond, P99Known: true}
	pressed   = autoSignals{Backpressure: 0.7, BPKnown: true}
)

func TestAutoPaceRisesWhileHealthyUpToTheMax(t *testing.T) {
	a := testPace(100)
	now := t0
	want := 100.0
	for i := range 30 {
		now = now.Add(5 * time.Second)
		d := a.step(now, healthy)
		want = min(want*1.25, 1000)
		if d.Verdict != verdictHealthy || d.Rate != want {
			t.Fatalf("step %d: %+v, want healthy at %v", i, d, want)
		}
	}
	d := a.step(now.Add(5*time.Second), healthy)
	if d.Rate != 1000 || d.Changed || d.Reason != "at -auto-max-rate" {
		t.Fatalf("at the max: %+v", d)
	}
}

func TestAutoPaceFallsWhenUnhealthyDownToTheMin(t *testing.T) {
	for name, sig := range map[string]autoSignals{"queue depth": deepQueue, "battle p99": slowP99, "backpressure": pressed} {
		a := testPace(1000)
		now := t0
		want := 1000.0
		for i := range 10 {
			now = now.Add(5 * time.Second)
			d := a.step(now, sig)
			want = max(want*0.5, 10)
			if d.Verdict != verdictUnhealthy || d.Rate != want || !strings.Contains(d.Reason, name) {
				t.Fatalf("%s, step %d: %+v, want unhealthy at %v naming it", name, i, d, want)
			}
		}
		if a.rate != 10 {
			t.Fatalf("%s: rate %v, want the 10/s minimum", name, a.rate)
		}
	}
	// Thresholds are inclusive for depth and p99 (the seed's alerts fire at them).
	a := testPace(100)
	if d := a.step(t0, autoSignals{QueueDepth: 500, QueueKnown: true}); d.Verdict != verdictUnhealthy {
		t.Fatalf("depth at the threshold: %+v", d)
	}
}

func TestAutoPaceHoldsAfterAFallAndWithoutSignals(t *testing.T) {
	a := testPace(400)
	now := t0.Add(5 * time.Second)
	if d := a.step(now, deepQueue); d.Rate != 200 {
		t.Fatalf("fall: %+v", d)
	}
	now = now.Add(5 * time.Second)
	if d := a.step(now, healthy); d.Verdict != verdictCooling || d.Changed || d.Rate != 200 {
		t.Fatalf("first healthy step after a fall: %+v, want a hold", d)
	}
	now = now.Add(5 * time.Second)
	if d := a.step(now, healthy); d.Verdict != verdictHealthy || d.Rate != 250 {
		t.Fatalf("second healthy step: %+v", d)
	}
	now = now.Add(5 * time.Second)
	if d := a.step(now, autoSignals{Errors: []string{"down"}}); d.Verdict != verdictUnknown || d.Changed {
		t.Fatalf("no signals: %+v, want a hold", d)
	}
	// Unknown signals are left out: a healthy known one is enough.
	now = now.Add(5 * time.Second)
	if d := a.step(now, autoSignals{Backpressure: 0.1, BPKnown: true}); d.Verdict != verdictHealthy {
		t.Fatalf("backpressure only: %+v", d)
	}
}

func TestAutoPaceIgnoresStepsTooSoon(t *testing.T) {
	a := testPace(100)
	a.step(t0, healthy)
	if d := a.step(t0.Add(4*time.Second), deepQueue); d.Verdict != verdictTooSoon || d.Changed {
		t.Fatalf("4 s after a 5 s step: %+v", d)
	}
	if d := a.step(t0.Add(4500*time.Millisecond), deepQueue); d.Verdict != verdictUnhealthy {
		t.Fatalf("4.5 s after (90 %% of the interval): %+v", d)
	}
}

func TestAutoPaceBounds(t *testing.T) {
	a := testPace(100)
	a.setBounds(200, 300)
	if a.rate != 200 {
		t.Fatalf("rate %v after raising the minimum to 200", a.rate)
	}
	a.setBounds(10, 150)
	if a.rate != 150 {
		t.Fatalf("rate %v after lowering the maximum to 150", a.rate)
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
		if got := rateFor(tc.perSec, tc.interval); got != tc.want || got.Validate() != nil {
			t.Errorf("rateFor(%v, %v) = %v, want %v", tc.perSec, tc.interval, got, tc.want)
		}
	}
}
