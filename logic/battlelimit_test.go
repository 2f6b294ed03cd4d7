package logic

import (
	"testing"
	"time"
)

// A refusal's cooling lasts its pushback from the time it is given,
// defaultCooling without one, at most maxCooling; a shorter one never
// cuts short a cooling in force, a longer one prolongs it.
func TestBattleLimiterCooling(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		pushback time.Duration
		want     time.Duration
	}{
		{"pushback", 200 * ms, 200 * ms},
		{"none", 0, defaultCooling},
		{"negative", -ms, defaultCooling},
		{"capped", time.Hour, maxCooling},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l battleLimiter
			if d := l.coolingLeft(epoch); d != 0 {
				t.Fatalf("new limiter cooling for %v", d)
			}
			l.cool(epoch, tc.pushback)
			if d := l.coolingLeft(epoch); d != tc.want {
				t.Fatalf("cooling left at once = %v, want %v", d, tc.want)
			}
			if d := l.coolingLeft(epoch.Add(tc.want - ms)); d != ms {
				t.Fatalf("cooling left 1ms before its end = %v", d)
			}
			if d := l.coolingLeft(epoch.Add(tc.want)); d != 0 {
				t.Fatalf("cooling left at its end = %v, want 0", d)
			}
		})
	}

	var l battleLimiter
	l.cool(epoch, time.Second)
	l.cool(epoch.Add(100*ms), 100*ms) // would end at +200 ms: ignored
	if d := l.coolingLeft(epoch.Add(500 * ms)); d != 500*ms {
		t.Fatalf("a shorter cooling cut the first short: %v left at +500ms, want 500ms", d)
	}
	l.cool(epoch.Add(900*ms), time.Second) // ends at +1.9 s
	if d := l.coolingLeft(epoch.Add(time.Second)); d != 900*ms {
		t.Fatalf("a longer cooling did not prolong: %v left at +1s, want 900ms", d)
	}
}

// The limiter is at its limit with as many calls outstanding as the
// adaptive limit allows; a refusal shrinks the limit and starts the
// cooling, a success grows it and cools nothing.
func TestBattleLimiterCallsAndLimit(t *testing.T) {
	var l battleLimiter
	for range aimdInitial - 1 {
		l.begin()
	}
	if l.atLimit() {
		t.Fatalf("at its limit with %d of %d calls out", aimdInitial-1, aimdInitial)
	}
	l.begin()
	if !l.atLimit() {
		t.Fatalf("not at its limit with %d of %d calls out", aimdInitial, aimdInitial)
	}
	l.end()
	if l.atLimit() {
		t.Fatal("still at its limit after a call ended")
	}

	if got := l.refused(epoch, 300*time.Millisecond); got != aimdInitial*aimdDecrease {
		t.Fatalf("limit after a refusal = %v, want %v", got, aimdInitial*aimdDecrease)
	}
	if !l.atLimit() { // 7 calls out, limit 6
		t.Fatal("not at the shrunk limit")
	}
	if d := l.coolingLeft(epoch); d != 300*time.Millisecond {
		t.Fatalf("refusal's cooling = %v, want its pushback", d)
	}

	if got := l.succeeded(epoch, time.Millisecond, 1); got <= aimdInitial*aimdDecrease {
		t.Fatalf("limit after a success = %v, want growth", got)
	}
	if d := l.coolingLeft(epoch.Add(300 * time.Millisecond)); d != 0 {
		t.Fatalf("a success changed the cooling: %v left", d)
	}
}

// The adaptive limit grows by about one per limit's worth of successes and
// shrinks by a quarter on a refusal, within its bounds.
func TestAIMDLimit(t *testing.T) {
	var a aimd
	if got := a.get(); got != aimdInitial {
		t.Fatalf("initial = %d", got)
	}
	for range aimdInitial + 1 { // 8 + 1/8 + 1/8.125 + ... passes 9 at the 9th
		a.success(epoch, time.Millisecond, 1)
	}
	if got := a.get(); got != aimdInitial+1 {
		t.Fatalf("after %d successes = %d, want %d", aimdInitial+1, got, aimdInitial+1)
	}
	a.refused()
	if got := a.get(); got != 6 { // 9.0x x 0.75 = 6.8
		t.Fatalf("after a refusal = %d, want 6", got)
	}
	for range 50 {
		a.refused()
	}
	if got := a.get(); got != aimdMin {
		t.Fatalf("floor = %d", got)
	}
}

// With a tolerance, the limit listens to delay: an interval whose mean
// round trip is over tolerance × the smallest seen lately shrinks it and
// stops it growing; one back within tolerance lets it grow again.
func TestAIMDDelaySignal(t *testing.T) {
	a := &aimd{tolerance: 2}
	now := epoch
	ms := time.Millisecond
	// run feeds one 100 ms interval of n successes of rtt each, then the
	// one that closes it.
	run := func(n int, rtt time.Duration) {
		for range n {
			a.success(now, rtt, 1000)
			now = now.Add(rttInterval / time.Duration(n))
		}
		a.success(now, rtt, 1000)
	}
	run(10, 4*ms) // the smallest seen: 4 ms
	grown := a.v
	if grown <= aimdInitial {
		t.Fatalf("within tolerance: limit %v, want > %d", grown, aimdInitial)
	}
	run(10, 8*ms) // exactly 2 x: still within
	if a.v <= grown {
		t.Fatalf("at 2 x the smallest: limit %v, want growth past %v", a.v, grown)
	}
	before := a.v
	run(10, 20*ms) // 5 x: congested
	if a.v >= before {
		t.Fatalf("at 5 x the smallest: limit %v, want < %v", a.v, before)
	}
	shrunk := a.v
	a.success(now, 20*ms, 1000) // mid-interval while congested: no growth
	if a.v != shrunk {
		t.Fatalf("congested: limit %v grew from %v", a.v, shrunk)
	}
	for range 50 {
		run(10, 40*ms)
	}
	if a.get() != aimdMin {
		t.Fatalf("floor: limit %d, want %d", a.get(), aimdMin)
	}
	run(10, 5*ms) // back within tolerance: grows again
	if a.v <= aimdMin {
		t.Fatalf("recovered: limit %v, want > %d", a.v, aimdMin)
	}

	// The smallest round trip is forgotten after about rttWindow: a
	// slower instance becomes the new normal instead of a congested one.
	a = &aimd{tolerance: 2}
	now = epoch
	run(10, 2*ms)
	for range int(rttWindow / rttInterval) {
		run(10, 10*ms)
	}
	floorAfterWindow := a.v
	run(10, 10*ms)
	if a.v <= floorAfterWindow {
		t.Fatalf("after the window: limit %v, want growth past %v (10 ms is the new smallest)", a.v, floorAfterWindow)
	}
}

// The delay signal is per unit of work: intervals of small battles and
// intervals of large ones whose round trips are in proportion to their
// size are not congestion, while the same battles run twice as slowly are.
func TestAIMDDelayIsPerWork(t *testing.T) {
	a := &aimd{tolerance: 1.5}
	now := epoch
	interval := func(slow time.Duration, large bool) {
		work, rtt := 400.0, 500*time.Microsecond // 4 units x 100 ticks
		if large {
			work, rtt = 2400, 3*time.Millisecond // 16 units x 150 ticks
		}
		for range 10 {
			a.success(now, rtt*slow, work)
			now = now.Add(rttInterval / 10)
		}
	}
	for i := range 20 {
		interval(1, i%2 == 1)
		if a.congested {
			t.Fatalf("interval %d: congested at one speed", i)
		}
	}
	before := a.v
	interval(2, false)
	interval(2, true)
	if !a.congested || a.v >= before {
		t.Fatalf("twice as slow: congested %v, limit %v (was %v)", a.congested, a.v, before)
	}
	// Calls of unknown work feed no delay sample.
	b := &aimd{tolerance: 1.5}
	for i := range 100 {
		b.success(now.Add(time.Duration(i)*rttInterval), time.Duration(i+1)*time.Second, 0)
	}
	if b.congested {
		t.Fatal("congested on calls of unknown work")
	}
}

// Without a tolerance, delay changes nothing.
func TestAIMDNoDelaySignal(t *testing.T) {
	var a aimd
	now := epoch
	for i := range 100 {
		a.success(now, time.Duration(i+1)*time.Second, 1000)
		now = now.Add(10 * time.Millisecond)
	}
	if a.get() <= aimdInitial {
		t.Fatalf("limit %d, want growth", a.get())
	}
}
