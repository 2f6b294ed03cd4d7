package logic

import (
	"sync/atomic"
	"time"
)

// fullWait is the retry delay passed on when every instance is at its
// adaptive concurrency limit. The gate cools the shard's battles for it,
// so it is kept short: a limit frees a slot within a battle or two, and at
// 50 ms (100 ms worse) the overload run's battle instances sat idle for
// want of calls while the CPU had room (battles only at 10 x C: 0.84 x C
// served at 50 ms, 0.70 at 100, 0.97 at 25).
const fullWait = 25 * time.Millisecond

// battlePicker chooses which battle instance gets the next call, from the
// instances' limiters and their connections' health. Like the limiters it
// has no clock: it is told the time.
type battlePicker struct {
	limits []*battleLimiter // one per instance, in the client's order
	// pushback passes over instances that are cooling or at their
	// adaptive limit (-battle-pushback); off, only the connections'
	// health counts.
	pushback bool
	// failing says whether instance i's connection is in
	// TRANSIENT_FAILURE; nil: none is.
	failing func(i int) bool
	next    atomic.Uint64 // round robin of first attempts
	rnext   atomic.Uint64 // round robin of retries over the other instances
}

// pick chooses an instance at now, round robin: for a first attempt (avoid
// -1) any, for a retry one of the others (avoid is the first attempt's),
// with their own turns so that retries do not shift the first attempts'
// turns. It passes over a cooling instance or one at its limit, and over
// one in TRANSIENT_FAILURE when a later one is not. When every candidate is
// cooling or at its limit it returns the one ready first (an instance at
// its limit counts as ready after fullWait) for a critical call, and for
// any other -1 and how long until that one is ready; full says that at
// least one of them was passed over only for being at its limit, so that a
// slot may free before that.
func (p *battlePicker) pick(now time.Time, avoid int, critical bool) (int, time.Duration, bool) {
	n := len(p.limits)
	var start int
	if avoid < 0 || n == 1 {
		start = int((p.next.Add(1) - 1) % uint64(n))
	} else {
		start = (avoid + 1 + int((p.rnext.Add(1)-1)%uint64(n-1))) % n
	}
	fallback, soonest := -1, -1
	var wait time.Duration // until soonest is ready
	full := false
	for k := range n {
		i := (start + k) % n
		if i == avoid && n > 1 {
			continue
		}
		if p.pushback {
			l := p.limits[i]
			if d := l.coolingLeft(now); d > 0 {
				if soonest < 0 || d < wait {
					soonest, wait = i, d
				}
				continue
			}
			if l.atLimit() {
				full = true
				if soonest < 0 || fullWait < wait {
					soonest, wait = i, fullWait
				}
				continue
			}
		}
		if fallback < 0 {
			fallback = i
		}
		if p.failing == nil || !p.failing(i) {
			return i, 0, false
		}
	}
	if fallback >= 0 {
		return fallback, 0, false
	}
	if critical {
		return soonest, 0, full
	}
	return -1, wait, full
}

// allCooling says whether every instance is cooling at now, and if so how
// long until the first is ready. Always false with pushback off.
func (p *battlePicker) allCooling(now time.Time) (time.Duration, bool) {
	if !p.pushback {
		return 0, false
	}
	var first time.Duration
	for i, l := range p.limits {
		d := l.coolingLeft(now)
		if d == 0 {
			return 0, false
		}
		if i == 0 || d < first {
			first = d
		}
	}
	return first, true
}
