package loadtest

import (
	"maps"
	"sync"
	"time"
)

// CritCounts is one criticality's share of a phase: in the overload
// scenario critical requests are purchases and default ones battles, so
// their latencies tell the cheap work from the expensive.
type CritCounts struct {
	Sent           int     `json:"sent"`
	Served         int     `json:"served"`
	Latency        Latency `json:"latency_served"`
	LatencyFromDue Latency `json:"latency_served_from_due,omitzero"` // open loop only
}

// PhaseReport is what one phase of the overload scenario did. Served means
// the cluster did the work and answered with its result: a result (OK) or a
// typed game outcome (Business, e.g. INSUFFICIENT_GOLD); refusals for load
// are in Overload, other error replies in Failed, no reply in Lost.
type PhaseReport struct {
	Name        string        `json:"name"`
	Mode        string        `json:"mode"`                  // "closed" or "open"
	Concurrency int           `json:"concurrency,omitempty"` // closed loop: requests outstanding at once
	TargetRate  float64       `json:"target_rate_per_s"`     // open loop: the rate asked for
	Duration    time.Duration `json:"duration_ns"`           // the window the rates are measured over
	Started     time.Time     `json:"started"`
	Drained     time.Duration `json:"drained_ns"` // after the window, until the last outstanding request ended

	Dispatch       DispatchStats `json:"dispatch"`        // open loop only
	SemaphoreWaits int           `json:"semaphore_waits"` // the dispatcher found max-outstanding requests in flight
	MaxOutstanding int           `json:"max_outstanding"`
	OfferedRate    float64       `json:"offered_rate_per_s"` // requests sent per second of the window

	Sent     int            `json:"sent"`
	Answered int            `json:"answered"`
	OK       int            `json:"ok"`
	Served   int            `json:"served"`
	Business map[string]int `json:"business"`
	Overload map[string]int `json:"overload"`
	Failed   map[string]int `json:"failed"`
	Lost     map[string]int `json:"lost"`
	Critical CritCounts     `json:"critical"`
	Default  CritCounts     `json:"default"`

	// Goodput is served replies received inside the window per second of
	// the window.
	Goodput float64 `json:"goodput_per_s"`
	// Latency is of served requests; Answered of every answered one,
	// refusals included (how fast a "no" is). Both are from the send: the
	// reply's time minus the time the request was written.
	Latency         Latency `json:"latency_served"`
	AnsweredLatency Latency `json:"latency_answered"`
	// The FromDue figures are of the same requests, from their due time in
	// the open-loop schedule (the reply's time minus Due(start, i, rate)):
	// a load tool that falls behind, sending late, adds its lateness here
	// rather than hiding it (coordinated omission). Closed loops have no
	// schedule and leave them out.
	LatencyFromDue         Latency `json:"latency_served_from_due,omitzero"`
	AnsweredLatencyFromDue Latency `json:"latency_answered_from_due,omitzero"`
}

// stamp is when one request fell due (zero in a closed loop: no schedule),
// was sent, and ended.
type stamp struct{ due, sent, done time.Time }

// latencies are a group of requests' latencies from the send and, for those
// with a due time, from it.
type latencies struct{ send, due []time.Duration }

func newLatencies(n int) latencies {
	return latencies{send: make([]time.Duration, 0, n), due: make([]time.Duration, 0, n)}
}

func (l *latencies) add(s stamp) {
	l.send = append(l.send, s.done.Sub(s.sent))
	if !s.due.IsZero() {
		l.due = append(l.due, s.done.Sub(s.due))
	}
}

// summarize sorts the latencies in place and summarises them.
func (l *latencies) summarize() (fromSend, fromDue Latency) {
	return Summarize(l.send), Summarize(l.due)
}

// tally records one phase's requests. Call begin before sending and end
// exactly once after.
type tally struct {
	mu          sync.Mutex
	windowEnd   time.Time
	sent        int
	answered    int
	ok          int
	served      int
	inWindow    int // served replies received before windowEnd
	outstanding int
	maxOut      int
	business    map[string]int
	overload    map[string]int
	failed      map[string]int
	lost        map[string]int
	crit, def   CritCounts
	servedLat   latencies
	answeredLat latencies
	critLat     latencies // served critical requests'
	defLat      latencies // served default requests'
}

func newTally(windowEnd time.Time, expect int) *tally {
	expect = min(max(expect, 16), 1<<20)
	return &tally{
		windowEnd:   windowEnd,
		business:    map[string]int{},
		overload:    map[string]int{},
		failed:      map[string]int{},
		lost:        map[string]int{},
		servedLat:   newLatencies(expect),
		answeredLat: newLatencies(expect),
	}
}

func (t *tally) begin(critical bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent++
	t.outstanding++
	t.maxOut = max(t.maxOut, t.outstanding)
	if critical {
		t.crit.Sent++
	} else {
		t.def.Sent++
	}
}

// end records the outcome of a request that began and its times (a lost
// request's are not used: it has no latency).
func (t *tally) end(critical bool, o Outcome, s stamp) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outstanding--
	if o.Class == ClassLost {
		t.lost[o.Reason]++
		return
	}
	t.answered++
	t.answeredLat.add(s)
	switch o.Class {
	case ClassOK:
		t.ok++
	case ClassBusiness:
		t.business[o.Reason]++
	case ClassOverload:
		t.overload[o.Reason]++
		return
	default:
		t.failed[o.Reason]++
		return
	}
	t.served++
	if s.done.Before(t.windowEnd) {
		t.inWindow++
	}
	if critical {
		t.crit.Served++
		t.critLat.add(s)
	} else {
		t.def.Served++
		t.defLat.add(s)
	}
	t.servedLat.add(s)
}

func (t *tally) counts() (sent, answered, outstanding int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent, t.answered, t.outstanding
}

// fill copies the counts into p and computes its rates over p.Duration.
// Call it once every request has ended.
func (t *tally) fill(p *PhaseReport) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.Sent, p.Answered, p.OK, p.Served = t.sent, t.answered, t.ok, t.served
	p.Business, p.Overload = maps.Clone(t.business), maps.Clone(t.overload)
	p.Failed, p.Lost = maps.Clone(t.failed), maps.Clone(t.lost)
	p.Critical, p.Default = t.crit, t.def
	p.MaxOutstanding = t.maxOut
	if s := p.Duration.Seconds(); s > 0 {
		p.OfferedRate = float64(t.sent) / s
		p.Goodput = float64(t.inWindow) / s
	}
	p.Latency, p.LatencyFromDue = t.servedLat.summarize()
	p.Critical.Latency, p.Critical.LatencyFromDue = t.critLat.summarize()
	p.Default.Latency, p.Default.LatencyFromDue = t.defLat.summarize()
	p.AnsweredLatency, p.AnsweredLatencyFromDue = t.answeredLat.summarize()
}
