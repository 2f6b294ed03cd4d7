package loadtest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"levee/internal/clock"
)

// Every request that began ends in exactly one bucket, and the phase's
// figures follow from them.
func TestTallyAccounting(t *testing.T) {
	end := t0.Add(2 * time.Second)
	tl := newTally(end, 0)
	in, after := t0.Add(time.Second), end.Add(time.Millisecond)
	type req struct {
		crit bool
		o    Outcome
		lat  time.Duration
		at   time.Time
	}
	reqs := []req{
		{false, Outcome{Class: ClassOK}, 10 * time.Millisecond, in},
		{false, Outcome{Class: ClassOK}, 20 * time.Millisecond, in},
		{false, Outcome{Class: ClassOK}, 30 * time.Millisecond, after}, // served after the window
		{true, Outcome{Class: ClassOK}, 5 * time.Millisecond, in},
		{true, Outcome{Class: ClassBusiness, Reason: "INSUFFICIENT_GOLD"}, 6 * time.Millisecond, in},
		{false, Outcome{Class: ClassOverload, Reason: "BUSY"}, time.Millisecond, in},
		{false, Outcome{Class: ClassOverload, Reason: "BUSY"}, time.Millisecond, in},
		{false, Outcome{Class: ClassOverload, Reason: "RATE_LIMITED"}, time.Millisecond, in},
		{false, Outcome{Class: ClassFailed, Reason: "INTERNAL"}, 2 * time.Millisecond, in},
		{false, Outcome{Class: ClassLost, Reason: LostTimeout}, 3 * time.Second, after},
		{true, Outcome{Class: ClassLost, Reason: LostClosed}, time.Second, in},
	}
	for _, r := range reqs {
		tl.begin(r.crit)
	}
	if sent, answered, out := tl.counts(); sent != 11 || answered != 0 || out != 11 {
		t.Fatalf("counts %d %d %d", sent, answered, out)
	}
	for _, r := range reqs {
		tl.end(r.crit, r.o, stamp{sent: r.at.Add(-r.lat), done: r.at}) // no due time: a closed loop
	}
	p := &PhaseReport{Duration: 2 * time.Second}
	tl.fill(p)

	if p.Sent != 11 || p.Answered != 9 || p.OK != 4 || p.Served != 5 || Sum(p.Lost) != 2 {
		t.Fatalf("sent %d answered %d ok %d served %d lost %v", p.Sent, p.Answered, p.OK, p.Served, p.Lost)
	}
	if p.Sent != p.Answered+Sum(p.Lost) || p.Answered != p.Served+Sum(p.Overload)+Sum(p.Failed) {
		t.Fatalf("buckets do not add up: %+v", p)
	}
	if p.Overload["BUSY"] != 2 || p.Overload["RATE_LIMITED"] != 1 || p.Failed["INTERNAL"] != 1 ||
		p.Business["INSUFFICIENT_GOLD"] != 1 || p.Lost[LostTimeout] != 1 || p.Lost[LostClosed] != 1 {
		t.Fatalf("by code: overload %v failed %v business %v lost %v", p.Overload, p.Failed, p.Business, p.Lost)
	}
	if p.Critical.Sent != 3 || p.Critical.Served != 2 || p.Default.Sent != 8 || p.Default.Served != 3 {
		t.Fatalf("critical %+v default %+v", p.Critical, p.Default)
	}
	// Each class's latencies are its served requests' only.
	if c, d := p.Critical.Latency, p.Default.Latency; c.Count != 2 || c.Max != 6*time.Millisecond ||
		d.Count != 3 || d.Max != 30*time.Millisecond {
		t.Fatalf("latency: critical %+v default %+v", c, d)
	}
	// 4 of 5 served replies came inside the 2 s window; 11 sent in it.
	if p.Goodput != 2 || p.OfferedRate != 5.5 {
		t.Fatalf("goodput %v offered %v", p.Goodput, p.OfferedRate)
	}
	if p.Latency.Count != 5 || p.Latency.Max != 30*time.Millisecond || p.AnsweredLatency.Count != 9 {
		t.Fatalf("latency %+v answered %+v", p.Latency, p.AnsweredLatency)
	}
	// A closed loop has no schedule: no figures from the due time, and
	// none in the JSON.
	if (p.LatencyFromDue != Latency{} || p.AnsweredLatencyFromDue != Latency{} || p.Critical.LatencyFromDue != Latency{}) {
		t.Fatalf("from due %+v %+v %+v", p.LatencyFromDue, p.AnsweredLatencyFromDue, p.Critical.LatencyFromDue)
	}
	if js, err := json.Marshal(p); err != nil || bytes.Contains(js, []byte("from_due")) {
		t.Fatalf("json %v: %s", err, js)
	}
	if p.MaxOutstanding != 11 {
		t.Fatalf("max outstanding %d", p.MaxOutstanding)
	}
}

// dueRun dispatches 50 requests at 1000/s on a fake clock, each served
// 5 ms after its send, recording them in a tally as overloadRun.request
// does; jump, if not 0, is how far the clock leaps after request 0 (the
// load tool stalled: the requests due meanwhile go out late, together).
func dueRun(t *testing.T, jump time.Duration) (*PhaseReport, DispatchStats) {
	t.Helper()
	const rate, service = 1000.0, 5 * time.Millisecond
	d := 50 * time.Millisecond
	tl := newTally(t0.Add(d+time.Second), Planned(rate, d))
	clk := clock.NewFake(t0)
	h := startDispatchOn(t, clk, rate, d, func(i int) bool {
		// The dispatcher's goroutine: the clock stands at the send.
		s := stamp{due: Due(t0, i, rate), sent: clk.Now()}
		s.done = s.sent.Add(service)
		tl.begin(i%10 == 0)
		tl.end(i%10 == 0, Outcome{Class: ClassOK}, s)
		return true
	})
	for first := true; ; first = false {
		st, ended := h.settle()
		if ended {
			p := &PhaseReport{Duration: d}
			tl.fill(p)
			return p, st
		}
		if first && jump > 0 {
			h.clk.Advance(jump)
		} else {
			h.clk.Advance(time.Millisecond)
		}
	}
}

// Sent on time, every request's latency from its due time is its latency
// from its send.
func TestLatencyFromDueEqualsFromSendOnTime(t *testing.T) {
	p, st := dueRun(t, 0)
	if st.Issued != 50 || st.Late != 0 || st.MaxLag != 0 {
		t.Fatalf("dispatch %+v", st)
	}
	want := Latency{Count: 50, Mean: 5 * time.Millisecond, P50: 5 * time.Millisecond, P90: 5 * time.Millisecond,
		P99: 5 * time.Millisecond, Max: 5 * time.Millisecond}
	if p.Latency != want || p.LatencyFromDue != want || p.AnsweredLatencyFromDue != want ||
		p.Critical.LatencyFromDue != p.Critical.Latency || p.Default.LatencyFromDue != p.Default.Latency {
		t.Fatalf("from send %+v, from due %+v (answered %+v)", p.Latency, p.LatencyFromDue, p.AnsweredLatencyFromDue)
	}
}

// A dispatcher that falls behind sends late; the server's 5 ms is the same,
// but from the due time each request took 5 ms plus its lateness: that is
// what its player waited. The figure from the send alone hides it.
func TestLatencyFromDueAddsTheLateness(t *testing.T) {
	p, st := dueRun(t, 30*time.Millisecond)
	// Requests 1..30 are sent at +30 ms, 29..0 ms late; the rest on time.
	if st.Issued != 50 || st.MaxLag != 29*time.Millisecond || st.Late != 19 {
		t.Fatalf("dispatch %+v", st)
	}
	send, due := p.Latency, p.LatencyFromDue
	if send.Count != 50 || send.Max != 5*time.Millisecond || send.P50 != 5*time.Millisecond || send.Mean != 5*time.Millisecond {
		t.Fatalf("from send %+v", send)
	}
	// The lateness adds up: 1 + 2 + ... + 29 ms = 435 ms over 50 requests.
	if due.Count != 50 || due.Mean-send.Mean != 435*time.Millisecond/50 {
		t.Fatalf("from due %+v: mean %v more than from send, want %v", due, due.Mean-send.Mean, 435*time.Millisecond/50)
	}
	// The worst: 5 ms served, sent 29 ms late. 21 were on time (5 ms), so
	// the 25th of 50 is the one 4 ms late, the 45th 24 ms, the 50th 29 ms.
	if due.Max != send.Max+st.MaxLag || due.P50 != 9*time.Millisecond || due.P90 != 29*time.Millisecond ||
		due.P99 != 34*time.Millisecond {
		t.Fatalf("from due %+v", due)
	}
	if p.AnsweredLatencyFromDue != due || p.Critical.LatencyFromDue.Count+p.Default.LatencyFromDue.Count != 50 {
		t.Fatalf("answered %+v, critical %+v, default %+v", p.AnsweredLatencyFromDue, p.Critical.LatencyFromDue, p.Default.LatencyFromDue)
	}
}
