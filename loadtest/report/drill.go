package report

import (
	"math"

	"github.com/leveehq/levee/loadtest/record"
)

// The figures of a drill's faults (scalars; see FaultFigures), computed
// from the run's fault events and its per-second goodput.
//
// The fault window runs from the first fault event to the last moment any
// fault event names: its T, or its End when the fault lasted (a pause, a
// squeeze, a cut) or the target came back (a kill, a restart).
//
//	fault_goodput_before  mean ok replies per second over the 10 s before the window
//	fault_goodput_during  mean ok replies per second inside the window
//	fault_recovery        seconds from the window's end until the goodput of 3
//	                      seconds in a row averages >= 95 % of before (0 when it
//	                      never fell below; +Inf when it did not come back before
//	                      the run ended)
//	fault_attempts_per_request
//	                      the sends on the wire of the calls started while a
//	                      lasting fault (pause, cpu, cut, fill) was on, as
//	                      planned, per original request started then: the
//	                      load the players put on the cluster during the fault
//	fault_request_attempts
//	                      the requests due during that time: all their sends
//	                      per request, wherever they happened (resends after
//	                      the fault, to learn an unknown outcome, included)
//	max_failed_latency    the slowest error reply (refusals for load and
//	                      failures such as DEADLINE_EXCEEDED), seconds, 0 when
//	                      none came: a request to a frozen node must fail by
//	                      its deadline, not later
var FaultFigures = []string{"fault_goodput_before", "fault_goodput_during", "fault_recovery", "fault_attempts_per_request",
	"fault_request_attempts", "max_failed_latency"}

// Bounds of the drill figures.
const (
	faultBefore     = 10   // seconds of goodput before the window
	recoveryShare   = 0.95 // of the goodput before
	recoverySeconds = 3    // in a row, averaged
)

// faultWindow is the run's fault window in wall seconds; ok false when it
// has no fault event.
func (r *Run) faultWindow() (start, end float64, ok bool) {
	for _, e := range r.Events {
		if e.Kind != EventFault {
			continue
		}
		if !ok || e.T < start {
			start = e.T
		}
		end = max(end, e.T, e.End)
		ok = true
	}
	return start, end, ok
}

// goodputIn is the mean of goodput over the points with T in [from, to),
// and how many there were.
func goodputIn(points []pointGoodput, from, to float64) (float64, int) {
	sum, n := 0.0, 0
	for _, p := range points {
		if p.t >= from && p.t < to {
			sum += p.ok
			n++
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return sum / float64(n), n
}

type pointGoodput struct{ t, ok float64 }

func (r *Run) goodputSeries() []pointGoodput {
	out := make([]pointGoodput, len(r.Points))
	for i, p := range r.Points {
		out[i] = pointGoodput{float64(p.T), float64(p.Counters["ok"])}
	}
	return out
}

// faultFigure is one of FaultFigures; ok false when the run has no fault
// (the attempts figures: when the driver counted none; max_failed_latency:
// when nothing was sent, 0 when no error reply came).
func (r *Run) faultFigure(name string, sum Summary) (float64, bool) {
	switch name {
	case "max_failed_latency":
		m := 0.0
		if sum.Refused.Count > 0 {
			m = sum.Refused.Max
		}
		if sum.Failed.Count > 0 {
			m = max(m, sum.Failed.Max)
		}
		return m, sum.Counters["sent"] > 0
	case "fault_attempts_per_request":
		// The sends of the calls started during the fault per original
		// request started then (the driver's fault_sends, fault_requests).
		reqs := sum.Counters[record.CounterFaultRequests]
		if reqs == 0 {
			return 0, false
		}
		return float64(sum.Counters[record.CounterFaultSends]) / float64(reqs), true
	case "fault_request_attempts":
		// The requests due during the fault, all their sends wherever they
		// happened (resends after it included: record.FaultAttempts).
		reqs, sends, _ := attemptsBy(sum.Counters, record.FaultAttemptsOf)
		if reqs == 0 {
			return 0, false
		}
		return float64(sends) / float64(reqs), true
	}
	start, end, ok := r.faultWindow()
	if !ok {
		return 0, false
	}
	pts := r.goodputSeries()
	before, n := goodputIn(pts, start-faultBefore, start)
	if n == 0 {
		return 0, false
	}
	switch name {
	case "fault_goodput_before":
		return before, true
	case "fault_goodput_during":
		during, n := goodputIn(pts, start, math.Max(end, start+1))
		return during, n > 0
	case "fault_recovery":
		// The first second s >= end whose next recoverySeconds average
		// reaches the share of before.
		last := float64(r.Points[len(r.Points)-1].T)
		for s := math.Floor(end); s+recoverySeconds-1 <= last; s++ {
			if g, k := goodputIn(pts, s, s+recoverySeconds); k == recoverySeconds && g >= recoveryShare*before {
				return math.Max(0, s-end), true
			}
		}
		return math.Inf(1), true
	}
	return 0, false
}

// mixServed is the mix_served series: per point, the requests/s of the
// run's mix (Meta.Mix) that were served in full that second, which its
// scarcest part bounds: the least, over the mix's kinds of request, of
// that kind's served replies (ok and business: it got a result) divided
// by its share of the mix. Offered at overload, its median over the
// steady seconds is the capacity of the mix (scripts/drills.sh measures
// the drills' so). ok false when the run file has no mix.
func mixServed(points []record.Point, mix map[string]float64) ([]float64, bool) {
	if len(mix) == 0 {
		return nil, false
	}
	out := make([]float64, len(points))
	for i, p := range points {
		m := math.Inf(1)
		for do, share := range mix {
			if share > 0 {
				served := p.Counters[do+"/"+record.OK.String()] + p.Counters[do+"/"+record.Business.String()]
				m = min(m, float64(served)/share)
			}
		}
		if math.IsInf(m, 1) {
			m = math.NaN()
		}
		out[i] = m
	}
	return out, true
}
