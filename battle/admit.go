package battle

import (
	"sync/atomic"
	"time"

	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/shed"
)

// refusal says why admission refused a request; admitted when it did not.
// The values index battle_shed_total's reason label.
type refusal uint8

const (
	admitted refusal = iota
	refusedAdaptive
	refusedInFlightCap
	numRefusals
)

// Reasons of battle_shed_total, by refusal.
var refusalReasons = [numRefusals]string{
	refusedAdaptive:    "adaptive",
	refusedInFlightCap: "inflight_cap",
}

// admission is the tier's decision, taken just before a job starts
// (after the throttle), whether it may run now: first the adaptive shedder,
// then the hard in-flight cap as the last line. Both refuse at once, without
// queueing. The decision costs a few atomic operations and, only when the
// CPU is high or something was shed recently, the shedder's lock; it does
// not allocate (BenchmarkAdmit).
type admission struct {
	shedder *shed.Shedder
	// shedOn: the adaptive rule sheds. When off, every request enters the
	// shedder as Critical, which it never sheds but still counts and times,
	// so the limit estimate (battle_adaptive_limit) stays meaningful.
	shedOn bool
	capOn  bool
	max    int64
	// running counts admitted jobs that have not ended; the cap
	// compares against it (and it is counted with the cap off too, for the
	// backpressure hints).
	running atomic.Int64
}

func newAdmission(cfg Config) (*admission, error) {
	sh, err := shed.New(cfg.shedConfig())
	if err != nil {
		return nil, err
	}
	return &admission{
		shedder: sh,
		shedOn:  cfg.adaptiveShedOn(),
		capOn:   cfg.inFlightCapOn(),
		max:     int64(cfg.MaxInFlight),
	}, nil
}

// slot is an admitted request; exactly one of done or cancel must be called
// on it.
type slot struct {
	a *admission
	t shed.Ticket
}

// admit decides at now, with CPU utilisation cpu, whether a request of
// class crit may start.
func (a *admission) admit(now time.Time, cpu float64, crit priority.Class) (slot, refusal) {
	if !a.shedOn {
		crit = priority.Critical
	}
	t, err := a.shedder.Allow(now, cpu, crit)
	if err != nil {
		return slot{}, refusedAdaptive
	}
	if n := a.running.Add(1); n > a.max && a.capOn {
		a.running.Add(-1)
		t.Cancel()
		return slot{}, refusedInFlightCap
	}
	return slot{a: a, t: t}, admitted
}

// done ends a job that completed at now: its latency feeds the
// shedder's estimate.
func (s slot) done(now time.Time) {
	s.a.running.Add(-1)
	s.t.Done(now)
}

// cancel ends a job that failed or was abandoned; it says nothing
// about how fast the tier serves, so the estimate does not see it.
func (s slot) cancel() {
	s.a.running.Add(-1)
	s.t.Cancel()
}

// pressure returns the backpressure hints sent with a refusal for reason at
// now: the jobs in flight (as the queue depth) and how full the tier
// is, in-flight over the limit that refused (the adaptive limit or the cap),
// capped at 1.
func (a *admission) pressure(now time.Time, reason refusal) (depth int, ratio float64) {
	n := a.running.Load()
	limit := float64(a.max)
	if reason == refusedAdaptive {
		limit = a.shedder.Limit(now)
	}
	ratio = 1
	if limit > 0 {
		ratio = min(float64(n)/limit, 1)
	}
	return int(n), ratio
}
