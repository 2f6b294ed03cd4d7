package loadtest

import (
	"testing"
	"time"
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
		{true, Outcome{ClassBusiness, "INSUFFICIENT_GOLD"}, 6 * time.Millisecond, in},
		{false, Outcome{ClassOverload, "BUSY"}, time.Millisecond, in},
		{false, Outcome{ClassOverload, "BUSY"}, time.Millisecond, in},
		{false, Outcome{ClassOverload, "RATE_LIMITED"}, time.Millisecond, in},
		{false, Outcome{ClassFailed, "INTERNAL"}, 2 * time.Millisecond, in},
		{false, Outcome{ClassLost, LostTimeout}, 3 * time.Second, after},
		{true, Outcome{ClassLost, LostClosed}, time.Second, in},
	}
	for _, r := range reqs {
		tl.begin(r.crit)
	}
	if sent, answered, out := tl.counts(); sent != 11 || answered != 0 || out != 11 {
		t.Fatalf("counts %d %d %d", sent, answered, out)
	}
	for _, r := range reqs {
		tl.end(r.crit, r.o, r.lat, r.at)
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
	if p.MaxOutstanding != 11 {
		t.Fatalf("max outstanding %d", p.MaxOutstanding)
	}
}
