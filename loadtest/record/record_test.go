package record

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// sums adds up the points' counters.
func sums(ps []Point) map[string]int64 {
	m := map[string]int64{}
	for _, p := range ps {
		for k, v := range p.Counters {
			m[k] += v
		}
	}
	return m
}

func ended(c map[string]int64) int64 {
	return c["ok"] + c["business"] + c["refused"] + c["failed"] + c["lost"]
}

// checkAccounting asserts sent = answered + lost + outstanding over the
// flushed points, and that the seconds are consecutive from 0.
func checkAccounting(t *testing.T, ps []Point) {
	t.Helper()
	for i, p := range ps {
		if p.T != i {
			t.Fatalf("point %d has T %d", i, p.T)
		}
	}
	if len(ps) == 0 {
		return
	}
	c := sums(ps)
	out := int64(ps[len(ps)-1].Levels[LevelOutstanding])
	if c["sent"] != ended(c)+out {
		t.Fatalf("sent %d != answered+lost %d + outstanding %d", c["sent"], ended(c), out)
	}
	if out < 0 {
		t.Fatalf("outstanding %d < 0", out)
	}
}

func TestClassString(t *testing.T) {
	want := []string{"ok", "business", "refused", "failed", "lost"}
	for c, w := range want {
		if got := Class(c).String(); got != w {
			t.Errorf("Class(%d) = %q, want %q", c, got, w)
		}
	}
	if got := Class(9).String(); got != "class(9)" {
		t.Errorf("Class(9) = %q", got)
	}
}

func TestOneSecond(t *testing.T) {
	r := New(t0)
	r.Begin()
	r.Begin()
	r.Begin()
	r.End(Sample{Op: "purchase", Crit: "critical", Class: OK, Sent: at(100 * time.Millisecond), Done: at(130 * time.Millisecond)})
	r.End(Sample{Op: "profile", Class: Refused, Reason: "BUSY", Sent: at(200 * time.Millisecond), Done: at(201 * time.Millisecond)})
	r.End(Sample{Op: "battle", Class: Lost, Reason: "timeout", Sent: at(300 * time.Millisecond), Done: at(900 * time.Millisecond)})
	if n := r.Outstanding(); n != 0 {
		t.Fatalf("Outstanding = %d", n)
	}
	if ps := r.Flush(at(999 * time.Millisecond)); len(ps) != 0 {
		t.Fatalf("Flush before the second's end gave %d points", len(ps))
	}
	ps := r.Flush(at(time.Second))
	if len(ps) != 1 {
		t.Fatalf("got %d points, want 1", len(ps))
	}
	p := ps[0]
	want := map[string]int64{
		"sent": 3, "ok": 1, "refused": 1, "lost": 1,
		"purchase/ok": 1, "profile/refused": 1, "battle/lost": 1,
		"crit/critical/ok": 1, "crit/default/refused": 1, "crit/default/lost": 1,
		"reason/BUSY": 1, "reason/timeout": 1,
	}
	if len(p.Counters) != len(want) {
		t.Errorf("counters %v, want %v", p.Counters, want)
	}
	for k, v := range want {
		if p.Counters[k] != v {
			t.Errorf("counter %s = %d, want %d", k, p.Counters[k], v)
		}
	}
	lat := p.Hists[HistLat]
	if lat.Count() != 1 { // lost and refused are not served
		t.Fatalf("lat count %d, want 1", lat.Count())
	}
	if n := p.Hists[HistLatRefused].Count(); n != 1 {
		t.Errorf("lat_refused count %d, want 1 (the BUSY)", n)
	}
	if q := lat.Quantile(1); q < 29*time.Millisecond || q > 31*time.Millisecond {
		t.Errorf("lat max %v, want ~30ms", q)
	}
	if _, ok := p.Hists[HistLatDue]; ok {
		t.Error("lat_due recorded for closed-loop samples")
	}
	checkAccounting(t, ps)
}

// A request begun in second 0 and done in second 2: sent in 0,
// outstanding through 1, answered in 2.
func TestEndInLaterSecond(t *testing.T) {
	r := New(t0)
	r.Begin()
	ps := r.Flush(at(time.Second))
	if len(ps) != 1 || ps[0].Counters["sent"] != 1 || ps[0].Levels[LevelOutstanding] != 1 {
		t.Fatalf("second 0: %+v", ps)
	}
	r.End(Sample{Op: "battle", Class: OK, Sent: at(500 * time.Millisecond), Done: at(2500 * time.Millisecond)})
	if n := r.Outstanding(); n != 0 {
		t.Fatalf("Outstanding = %d after End", n)
	}
	more := r.Flush(at(2 * time.Second)) // second 1 only: the answer is in 2
	if len(more) != 1 || more[0].T != 1 || more[0].Counters["ok"] != 0 || more[0].Levels[LevelOutstanding] != 1 {
		t.Fatalf("second 1: %+v", more)
	}
	ps = append(ps, more...)
	checkAccounting(t, ps)
	more = r.Flush(at(3 * time.Second))
	if len(more) != 1 || more[0].T != 2 || more[0].Counters["ok"] != 1 || more[0].Levels[LevelOutstanding] != 0 {
		t.Fatalf("second 2: %+v", more)
	}
	if got := more[0].Hists[HistLat].Quantile(0.5); got < 1990*time.Millisecond || got > 2010*time.Millisecond {
		t.Errorf("lat %v, want ~2s", got)
	}
	ps = append(ps, more...)
	checkAccounting(t, ps)
}

// An End whose Done is in a second already flushed counts in the current one.
func TestEndInFlushedSecond(t *testing.T) {
	r := New(t0)
	r.Begin()
	ps := r.Flush(at(3 * time.Second))
	r.End(Sample{Class: OK, Sent: at(100 * time.Millisecond), Done: at(time.Second)})
	ps = append(ps, r.Flush(at(4*time.Second))...)
	if len(ps) != 4 || ps[3].Counters["ok"] != 1 || ps[3].Counters["other/ok"] != 1 {
		t.Fatalf("points %+v", ps)
	}
	checkAccounting(t, ps)
}

func TestLatencyFromDue(t *testing.T) {
	r := New(t0)
	r.Begin()
	// Due at 0.1 s, sent late at 0.6 s (the generator fell behind), done at 0.61 s.
	r.End(Sample{Class: OK, Due: at(100 * time.Millisecond), Sent: at(600 * time.Millisecond), Done: at(610 * time.Millisecond)})
	p := r.Flush(at(time.Second))[0]
	if got := p.Hists[HistLat].Quantile(1); got < 9*time.Millisecond || got > 11*time.Millisecond {
		t.Errorf("lat %v, want ~10ms", got)
	}
	if got := p.Hists[HistLatDue].Quantile(1); got < 505*time.Millisecond || got > 515*time.Millisecond {
		t.Errorf("lat_due %v, want ~510ms", got)
	}
}

func TestCloseEndsOutstandingAsLost(t *testing.T) {
	r := New(t0)
	for range 5 {
		r.Begin()
	}
	r.End(Sample{Class: OK, Sent: at(0), Done: at(10 * time.Millisecond)})
	ps := r.Flush(at(time.Second))
	ps = append(ps, r.Close(at(2500*time.Millisecond))...)
	if len(ps) != 3 {
		t.Fatalf("got %d points, want 3 (seconds 0-2)", len(ps))
	}
	last := ps[2]
	if last.Counters["lost"] != 4 || last.Counters["reason/unfinished"] != 4 || last.Levels[LevelOutstanding] != 0 {
		t.Errorf("last point %+v", last)
	}
	checkAccounting(t, ps)
	c := sums(ps)
	if c["sent"] != 5 || ended(c) != 5 {
		t.Errorf("sent %d ended %d", c["sent"], ended(c))
	}
	// After Close nothing counts any more.
	r.Begin()
	r.End(Sample{Class: OK})
	if ps := r.Flush(at(time.Hour)); ps != nil {
		t.Errorf("Flush after Close: %v", ps)
	}
	if ps := r.Close(at(time.Hour)); ps != nil {
		t.Errorf("second Close: %v", ps)
	}
	if r.Outstanding() != 0 {
		t.Error("outstanding after Close")
	}
}

func TestCloseAtSecondBoundary(t *testing.T) {
	r := New(t0)
	r.Begin()
	ps := r.Close(at(2 * time.Second))
	if len(ps) != 2 || ps[1].Counters["lost"] != 1 {
		t.Fatalf("points %+v, want seconds 0-1 with the loss in 1", ps)
	}
	checkAccounting(t, ps)
}

func TestUnmatchedEnd(t *testing.T) {
	r := New(t0)
	r.End(Sample{Class: OK, Sent: at(0), Done: at(time.Millisecond)})
	p := r.Flush(at(time.Second))[0]
	if p.Counters[CounterUnmatched] != 1 || p.Counters["ok"] != 0 {
		t.Errorf("counters %v", p.Counters)
	}
	checkAccounting(t, []Point{p})
}

func TestUnknownClassCountsFailed(t *testing.T) {
	r := New(t0)
	r.Begin()
	r.End(Sample{Op: "x", Class: Class(42), Sent: at(0), Done: at(time.Millisecond)})
	p := r.Flush(at(time.Second))[0]
	if p.Counters["failed"] != 1 || p.Counters["x/failed"] != 1 {
		t.Errorf("counters %v", p.Counters)
	}
}

func TestAddObserveSet(t *testing.T) {
	r := New(t0)
	r.Add("arrived", 3)
	r.Add("connected", 1)
	r.Add("connected", 1)
	r.Add("waiting", 1)
	r.Observe("wait", 2*time.Second)
	r.Set("logic_queue_depth", 40)
	ps := r.Flush(at(time.Second))
	r.Add("connected", -1)
	r.Add("waiting", -1)
	r.Add("admitted", 1)
	ps = append(ps, r.Flush(at(3*time.Second))...)
	if len(ps) != 3 {
		t.Fatalf("%d points", len(ps))
	}
	p0, p1, p2 := ps[0], ps[1], ps[2]
	if p0.Counters["arrived"] != 3 || p0.Levels["connected"] != 2 || p0.Levels["waiting"] != 1 || p0.Levels["logic_queue_depth"] != 40 {
		t.Errorf("second 0: %+v", p0)
	}
	if p0.Hists["wait"].Count() != 1 {
		t.Errorf("wait hist %v", p0.Hists)
	}
	if p1.Counters["admitted"] != 1 || p1.Levels["connected"] != 1 || p1.Levels["waiting"] != 0 {
		t.Errorf("second 1: %+v", p1)
	}
	if _, ok := p1.Levels["logic_queue_depth"]; ok {
		t.Error("Set level carried into the next second")
	}
	if p2.Levels["connected"] != 1 || len(p2.Counters) != 0 {
		t.Errorf("second 2 (empty): %+v", p2)
	}
}

// Many goroutines begin and end requests while another advances the clock
// and flushes; the accounting holds at every flush and in total.
func TestConcurrentAccounting(t *testing.T) {
	const workers, perWorker = 8, 3000
	r := New(t0)
	var clock atomic.Int64 // ns since t0
	now := func() time.Time { return t0.Add(time.Duration(clock.Load())) }

	var wg sync.WaitGroup
	var begun atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var pending []time.Time
			for i := range perWorker {
				sent := now()
				r.Begin()
				begun.Add(1)
				pending = append(pending, sent)
				// End some, in any order, some much later than their Begin.
				for len(pending) > 0 && (rng.IntN(3) > 0 || i == perWorker-1) {
					j := rng.IntN(len(pending))
					s := pending[j]
					pending = append(pending[:j], pending[j+1:]...)
					r.End(Sample{Op: "profile", Class: Class(rng.IntN(int(numClasses))), Reason: "r", Due: s, Sent: s, Done: now()})
				}
			}
			if len(pending) != 0 {
				t.Errorf("worker %d left %d pending", w, len(pending))
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	var ps []Point
	flushes := 0
loop:
	for {
		select {
		case <-done:
			break loop
		default:
		}
		clock.Add(int64(50 * time.Millisecond))
		ps = append(ps, r.Flush(now())...)
		flushes++
		checkAccounting(t, ps)
		if r.Outstanding() < 0 {
			t.Fatal("negative outstanding")
		}
	}
	if r.Outstanding() != 0 {
		t.Fatalf("outstanding %d after all ended", r.Outstanding())
	}
	ps = append(ps, r.Close(now())...)
	checkAccounting(t, ps)
	c := sums(ps)
	if c["sent"] != workers*perWorker || ended(c) != workers*perWorker || c["reason/unfinished"] != 0 {
		t.Fatalf("sent %d ended %d (want %d), unfinished %d", c["sent"], ended(c), workers*perWorker, c["reason/unfinished"])
	}
	var served int64
	for _, p := range ps {
		served += p.Hists[HistLat].Count()
	}
	if want := c["ok"] + c["business"]; served != want {
		t.Errorf("lat counts %d, want %d served", served, want)
	}
	t.Logf("%d flushes, %d points", flushes, len(ps))
}

// However long the run, the Recorder holds only the unflushed seconds.
func TestBoundedMemory(t *testing.T) {
	r := New(t0)
	for sec := range 1000 {
		base := at(time.Duration(sec) * time.Second)
		for i := range 20 {
			r.Begin()
			d := time.Duration(i) * 40 * time.Millisecond
			r.End(Sample{Op: "profile", Class: OK, Due: base, Sent: base, Done: base.Add(d)})
			r.Observe("wait", d)
		}
		r.Flush(base.Add(time.Second))
		r.mu.Lock()
		open, free, dense := len(r.open), len(r.free), len(r.dense)
		r.mu.Unlock()
		if open > 1 || free > 2 || dense > 6 {
			t.Fatalf("second %d: holding %d open, %d free seconds, %d spare histograms", sec, open, free, dense)
		}
	}
}

func TestHistJSONRoundTrip(t *testing.T) {
	h := NewHist()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		h.Record(time.Duration(rng.ExpFloat64() * float64(20*time.Millisecond)))
	}
	h.Record(0)            // clamped to 1 µs
	h.Record(time.Hour)    // clamped to 10 min
	h.Record(-time.Second) // clamped to 1 µs
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != '"' {
		t.Fatalf("not a JSON string: %.40s", b)
	}
	var g Hist
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if !h.Equal(&g) || g.Count() != 10003 || g.Max() != h.Max() {
		t.Fatalf("round trip changed the histogram: count %d max %v vs %d %v", g.Count(), g.Max(), h.Count(), h.Max())
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		if g.Quantile(q) != h.Quantile(q) {
			t.Errorf("q%v: %v vs %v", q, g.Quantile(q), h.Quantile(q))
		}
	}
	if h.Max() < 9*time.Minute {
		t.Errorf("max %v: the hour was not clamped to 10 min", h.Max())
	}
	b2, _ := json.Marshal(&g)
	if string(b2) != string(b) {
		t.Error("re-encoding differs")
	}
}

func TestHistEmptyAndZero(t *testing.T) {
	var z Hist
	if z.Count() != 0 || z.Max() != 0 || z.Quantile(0.99) != 0 {
		t.Error("zero Hist not empty")
	}
	var nilH *Hist
	if nilH.Count() != 0 || nilH.Quantile(0.5) != 0 {
		t.Error("nil Hist not empty")
	}
	z.Record(time.Millisecond)
	if z.Count() != 1 {
		t.Error("zero Hist did not record")
	}
	b, err := json.Marshal(NewHist())
	if err != nil {
		t.Fatal(err)
	}
	var g Hist
	if err := json.Unmarshal(b, &g); err != nil || g.Count() != 0 {
		t.Fatalf("empty round trip: %v count %d", err, g.Count())
	}
}

func TestHistUnmarshalErrors(t *testing.T) {
	for name, in := range map[string]string{
		"number":     `17`,
		"not base64": `"!!!"`,
		"short":      `"AAAA"`,
	} {
		h := NewHist()
		h.Record(time.Second)
		err := json.Unmarshal([]byte(in), h)
		if err == nil || !strings.HasPrefix(err.Error(), "record: ") {
			t.Errorf("%s: err %v", name, err)
		}
		if h.Count() != 1 {
			t.Errorf("%s: a failed decode changed the histogram", name)
		}
	}
	// Another geometry: 1..1000, 2 digits.
	foreign, err := hdr.NewPacked(1, 1000, 2).Encode()
	if err != nil {
		t.Fatal(err)
	}
	err = json.Unmarshal([]byte(`"`+string(foreign)+`"`), NewHist())
	if !errors.Is(err, ErrHistGeometry) {
		t.Errorf("foreign geometry: %v", err)
	}
}

func TestPointJSON(t *testing.T) {
	r := New(t0)
	r.Begin()
	r.End(Sample{Op: "purchase", Class: OK, Due: at(0), Sent: at(0), Done: at(5 * time.Millisecond)})
	r.Add("connected", 1)
	p := r.Flush(at(time.Second))[0]
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q Point
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if q.T != p.T || q.Counters["purchase/ok"] != 1 || q.Levels["connected"] != 1 || !q.Hists[HistLat].Equal(p.Hists[HistLat]) {
		t.Errorf("round trip: %s -> %+v", b, q)
	}
}

func TestMerge(t *testing.T) {
	a := Point{T: 7, Counters: map[string]int64{"sent": 2, "ok": 1}, Levels: map[string]float64{"connected": 10}, Hists: map[string]*Hist{"lat": NewHist()}}
	b := Point{T: 7, Counters: map[string]int64{"sent": 3, "lost": 1}, Levels: map[string]float64{"connected": 5, "waiting": 2}, Hists: map[string]*Hist{"lat": NewHist(), "wait": NewHist()}}
	a.Hists["lat"].Record(time.Millisecond)
	b.Hists["lat"].Record(time.Second)
	b.Hists["wait"].Record(time.Minute)
	m := Merge(a, b)
	if m.T != 7 || m.Counters["sent"] != 5 || m.Counters["ok"] != 1 || m.Counters["lost"] != 1 {
		t.Errorf("counters %v", m.Counters)
	}
	if m.Levels["connected"] != 15 || m.Levels["waiting"] != 2 {
		t.Errorf("levels %v", m.Levels)
	}
	if m.Hists["lat"].Count() != 2 || m.Hists["wait"].Count() != 1 || m.Hists["lat"].Max() < 990*time.Millisecond {
		t.Errorf("hists lat %d wait %d", m.Hists["lat"].Count(), m.Hists["wait"].Count())
	}
	if a.Hists["lat"].Count() != 1 || a.Counters["sent"] != 2 {
		t.Error("Merge changed its input")
	}
	if z := Merge(); z.T != 0 || z.Counters != nil {
		t.Errorf("empty Merge %+v", z)
	}
}

// BenchmarkEnd measures a request's accounting in steady state: a Begin
// and its End (two histogram records, four counters), with a flush every
// 100,000 requests as a busy second would have.
func BenchmarkEnd(b *testing.B) {
	r := New(t0)
	base := t0
	reasons := []string{"", "BUSY", "timeout"}
	ops := []string{"profile", "purchase", "battle"}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		r.Begin()
		r.End(Sample{Op: ops[i%3], Crit: "default", Class: Class(i % 4), Reason: reasons[i%3],
			Due: base, Sent: base, Done: base.Add(time.Duration(i%5000) * time.Microsecond)})
		i++
		if i%100000 == 0 {
			base = base.Add(time.Second)
			r.Flush(base)
		}
	}
}

// BenchmarkEndParallel is BenchmarkEnd from every core at once.
func BenchmarkEndParallel(b *testing.B) {
	r := New(t0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Begin()
			r.End(Sample{Op: "profile", Crit: "default", Class: OK, Due: t0, Sent: t0, Done: t0.Add(time.Duration(i%5000) * time.Microsecond)})
			i++
		}
	})
}

// AddAt counts in the second it is given while that second is open, and
// in the earliest open second once it has been flushed.
func TestAddAt(t *testing.T) {
	r := New(t0)
	r.AddAt(Attempts(2), 1, at(2500*time.Millisecond)) // a later second, still open
	r.AddAt(Attempts(1), 3, at(500*time.Millisecond))
	ps := r.Flush(at(1500 * time.Millisecond))
	if len(ps) != 1 || ps[0].Counters["attempts/1"] != 3 || ps[0].Counters["attempts/2"] != 0 {
		t.Fatalf("second 0: %+v", ps)
	}
	r.AddAt(Attempts(4), 1, at(200*time.Millisecond)) // second 0 is gone: second 1
	ps = r.Close(at(3 * time.Second))
	if len(ps) != 2 || ps[0].Counters["attempts/4"] != 1 || ps[1].Counters["attempts/2"] != 1 {
		t.Fatalf("seconds 1-2: %+v", ps)
	}
	for name, want := range map[string]int{"attempts/3": 3, "attempts/12": 12, "attempts/0": -1, "attempts/x": -1, "sent": -1} {
		n, ok := AttemptsOf(name)
		if ok != (want > 0) || ok && n != want {
			t.Errorf("AttemptsOf(%q) = %d, %v", name, n, ok)
		}
	}
}
