package logic

import (
	"sync"
	"sync/atomic"
	"time"
)

// battleLimiter is what logic keeps about one battle instance's capacity,
// with -battle-pushback on: the cooling its last refusal asked for, the
// calls outstanding to it, and its adaptive concurrency limit (aimd). The
// picker (battlePicker) passes over an instance that is cooling or has as
// many calls outstanding as its limit allows.
//
// It is bookkeeping only: no gRPC, no metrics, no clock. Whatever depends
// on time is told the time, as golang.org/x/time/rate's AllowN(t, n) is, so
// that its tests state the times they mean. It is safe for concurrent use.
type battleLimiter struct {
	// coolUntil (Unix ns) is when the last refusal's cooling ends; the
	// instance is cooling while now < coolUntil.
	coolUntil atomic.Int64
	// inflight is the calls outstanding to the instance (counted with
	// pushback off too, where nothing reads it).
	inflight atomic.Int64
	adaptive aimd
}

// Bounds of the cooling that a refusal starts: the pushback the instance
// sent, or defaultCooling when it sent none (an unreachable instance), at
// most maxCooling whatever it asks for.
const (
	defaultCooling = 100 * time.Millisecond
	maxCooling     = maxRetryAfter
)

// begin records a call sent to the instance, end one that came back
// (whatever its outcome).
func (l *battleLimiter) begin() { l.inflight.Add(1) }
func (l *battleLimiter) end()   { l.inflight.Add(-1) }

// coolingLeft is how long after now the instance's cooling lasts: 0 when
// it is not cooling.
func (l *battleLimiter) coolingLeft(now time.Time) time.Duration {
	if d := l.coolUntil.Load() - now.UnixNano(); d > 0 {
		return time.Duration(d)
	}
	return 0
}

// atLimit says whether the instance has as many calls outstanding as its
// adaptive limit allows: as good as cooling for a moment, until one of
// them ends.
func (l *battleLimiter) atLimit() bool { return l.inflight.Load() >= l.adaptive.get() }

// cool makes the instance cool for pushback from now (defaultCooling when
// it sent none, at most maxCooling). It never shortens a cooling already
// in force.
func (l *battleLimiter) cool(now time.Time, pushback time.Duration) {
	if pushback <= 0 {
		pushback = defaultCooling
	}
	until := now.Add(min(pushback, maxCooling)).UnixNano()
	for {
		old := l.coolUntil.Load()
		if old >= until || l.coolUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// refused records a call the instance refused (or could not be reached
// for) at now, asking for pushback: it cools, and its limit shrinks. It
// returns the limit.
func (l *battleLimiter) refused(now time.Time, pushback time.Duration) float64 {
	l.cool(now, pushback)
	return l.adaptive.refused()
}

// succeeded records a call that succeeded at now after rtt, having done
// work (see aimd.success), and returns the limit.
func (l *battleLimiter) succeeded(now time.Time, rtt time.Duration, work float64) float64 {
	return l.adaptive.success(now, rtt, work)
}

// aimd is an instance's adaptive concurrency limit, TCP style: each
// success adds 1/limit (about +1 per limit's worth of successes), each
// refusal multiplies it by aimdDecrease. It keeps the calls logic sends an
// instance near what the instance accepts, so that battle refuses rarely
// and nothing queues there.
//
// With a tolerance (> 0; -battle-rtt-tolerance) it also listens to delay,
// the way TCP Vegas or Envoy's adaptive concurrency do, but per unit of
// work, because a job's round trip grows with its size (measured by its
// encoded request and reply, see jobWork): every rttInterval it takes the interval's round trips over
// their work (total time / total work of the calls that succeeded in it)
// and compares that with the smallest such figure of the last intervals
// (over about rttWindow). Above tolerance × that, the instance is running
// its work slower than it can (its CPUs are contended, by its own
// jobs or by neighbours it cannot see), so the limit shrinks by
// rttDecrease and does not grow until an interval is back within
// tolerance. Calls the limit holds back wait briefly at logic
// (-battle-wait) or are refused fast, instead of running slowly in a
// crowd: the jobs that are served stay fast.
//
// The zero value is a limit of aimdInitial without a delay signal.
type aimd struct {
	mu sync.Mutex
	v  float64
	// whole is int64(v), for get without the lock (the picker reads it for
	// every instance it considers); 0 until v is first set: aimdInitial.
	whole atomic.Int64

	tolerance float64 // 0: no delay signal
	// The smallest interval figure (ns per unit of work) of the current
	// and the previous half-window; curStart is when the current began.
	minCur, minPrev float64
	curStart        time.Time
	// The current interval's successes.
	rtt       time.Duration
	work      float64
	n         int
	ivStart   time.Time
	congested bool // the last complete interval was above tolerance
}

const (
	aimdInitial  = 8
	aimdMin      = 1
	aimdMax      = 256
	aimdDecrease = 0.75
	rttDecrease  = 0.9
	rttInterval  = 100 * time.Millisecond
	rttWindow    = 60 * time.Second
	rttMinCalls  = 3 // an interval with fewer successes says nothing
)

// get is the limit's whole part: the calls an instance may have
// outstanding.
func (a *aimd) get() int64 {
	if n := a.whole.Load(); n > 0 {
		return n
	}
	return aimdInitial
}

// set sets the limit to v; a.mu is held. whole is stored only when it
// changes, which a success's +1/v seldom does.
func (a *aimd) set(v float64) {
	a.v = v
	if n := int64(v); n != a.whole.Load() {
		a.whole.Store(n)
	}
}

// success records a call that succeeded at now after rtt, having done work
// (any measure proportional to its cost; 0 when unknown, which feeds no
// delay sample), and returns the limit.
func (a *aimd) success(now time.Time, rtt time.Duration, work float64) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.v == 0 {
		a.v = aimdInitial
	}
	if a.tolerance > 0 && work > 0 {
		a.observe(now, rtt, work)
	}
	if !a.congested {
		a.set(min(a.v+1/a.v, aimdMax))
	}
	return a.v
}

// observe feeds the delay signal; a.mu is held.
func (a *aimd) observe(now time.Time, rtt time.Duration, work float64) {
	if a.ivStart.IsZero() {
		a.ivStart = now
	}
	a.rtt += rtt
	a.work += work
	a.n++
	if now.Sub(a.ivStart) < rttInterval {
		return
	}
	if a.n >= rttMinCalls {
		per := float64(a.rtt) / a.work
		if a.curStart.IsZero() || now.Sub(a.curStart) >= rttWindow/2 {
			a.minPrev, a.minCur, a.curStart = a.minCur, per, now
		} else {
			a.minCur = min(a.minCur, per)
		}
		base := a.minCur
		if a.minPrev > 0 {
			base = min(base, a.minPrev)
		}
		a.congested = base > 0 && per > a.tolerance*base
		if a.congested {
			a.set(max(a.v*rttDecrease, aimdMin))
		}
	}
	a.rtt, a.work, a.n, a.ivStart = 0, 0, 0, now
}

// refused records a refusal, and returns the limit.
func (a *aimd) refused() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.v == 0 {
		a.v = aimdInitial
	}
	a.set(max(a.v*aimdDecrease, aimdMin))
	return a.v
}
