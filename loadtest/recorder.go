package loadtest

import (
	"sync"
	"time"

	"levee/client"
	"levee/loadtest/record"
)

// sample is one answered request's latency, in microseconds, and its
// operation's index.
type sample struct {
	us uint32
	op uint8
}

// maxOps bounds distinct operation names (sample.op is a byte).
const maxOps = 255

type opCounts struct {
	sent, answered, ok, errors, lost int
}

// recorder collects a run's outcomes. One mutex: a few thousand requests
// per second are nothing to it.
type recorder struct {
	mu      sync.Mutex
	budget  int
	used    int
	samples []sample // preallocated to budget, never grows
	ops     []string
	opIndex map[string]int
	perOp   []opCounts

	sent, answered, ok                int
	business, overload, failed, lost  map[string]int
	dialed, connected                 int
	dialFailures, disconnects         map[string]int
	frames, replies, late, unexpected uint64
	retries                           uint64

	rr *record.Recorder // the run file's, nil for none
}

func newRecorder(budget int) *recorder {
	return &recorder{
		budget:       budget,
		samples:      make([]sample, 0, budget),
		opIndex:      map[string]int{},
		business:     map[string]int{},
		overload:     map[string]int{},
		failed:       map[string]int{},
		lost:         map[string]int{},
		dialFailures: map[string]int{},
		disconnects:  map[string]int{},
	}
}

// take reserves one request from the budget.
func (r *recorder) take() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.used >= r.budget {
		return false
	}
	r.used++
	return true
}

func (r *recorder) exhausted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.used >= r.budget
}

// request records one request taken with take.
func (r *recorder) request(op string, o Outcome, lat time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.opIndex[op]
	if !ok && len(r.ops) >= maxOps-1 {
		op = "other"
		i, ok = r.opIndex[op]
	}
	if !ok {
		i = len(r.ops)
		r.ops = append(r.ops, op)
		r.perOp = append(r.perOp, opCounts{})
		r.opIndex[op] = i
	}
	c := &r.perOp[i]
	r.sent++
	c.sent++
	switch o.Class {
	case ClassOK:
		r.ok++
		c.ok++
	case ClassBusiness:
		r.business[o.Reason]++
		c.errors++
	case ClassOverload:
		r.overload[o.Reason]++
		c.errors++
	case ClassFailed:
		r.failed[o.Reason]++
		c.errors++
	case ClassLost:
		r.lost[o.Reason]++
		c.lost++
		return
	}
	r.answered++
	c.answered++
	us := lat.Microseconds()
	if us > int64(^uint32(0)) {
		us = int64(^uint32(0))
	}
	if len(r.samples) < cap(r.samples) {
		r.samples = append(r.samples, sample{us: uint32(us), op: uint8(i)})
	}
}

func (r *recorder) dial(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dialed++
	if err != nil {
		r.dialFailures[dialReason(err)]++
		r.add("dial_failures", 1)
		return
	}
	r.connected++
	r.add("connected", 1)
}

// add counts a player event in the run file's recorder, if any (see
// record.Recorder.Add).
func (r *recorder) add(name string, n int64) {
	if r.rr != nil {
		r.rr.Add(name, n)
	}
}

func (r *recorder) disconnect(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.disconnects[disconnectReason(err)]++
}

func (r *recorder) clientStats(s client.Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames += s.Sent
	r.replies += s.Replies
	r.retries += s.Retries
	r.late += s.Late
	r.unexpected += s.Unexpected
}
