// Package record accounts for every request of a load run, once: Begin
// when a request is sent, End with its outcome, class and criticality.
// Classify sorts a client call's error into an Outcome (a Class and a
// reason) by the cluster's error table. Outcomes go into per-second
// points — counters, levels and HDR latency histograms — that Flush hands
// to the caller, so the Recorder holds only the seconds not yet flushed
// however long the run.
//
// Accounting. Begin counts "sent" in the current second (the earliest one
// not yet flushed); End counts the outcome in the second of Sample.Done
// (or the current second when Done is earlier or zero). Every point
// carries the level "outstanding": requests sent through its second and
// not yet ended through it, so over the flushed points
//
//	sum(sent) = sum(ok+business+refused+failed) + sum(lost) + last "outstanding"
//
// holds at every flush. Close ends what is still outstanding as lost
// (reason "unfinished"); after Close the Recorder ignores further calls.
//
// Latency. "lat" is the time from Sent to Done of every served request
// (OK or Business: it got a result); "lat_due" the same requests' time
// from Due to Done when Due is set (the request's scheduled time), so a
// load generator that falls behind its schedule cannot hide a slow server;
// "lat_refused" the time to a refusal for load (how fast the cluster says
// no). Failed and lost requests have no latency: they are counted.
package record

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/leveehq/levee/internal/priority"
)

// Class is a request's outcome.
type Class uint8

// The outcomes.
const (
	OK       Class = iota // the server did what was asked
	Business              // a business refusal (the game said no, e.g. REJECTED): served
	Refused               // overload: shed, BUSY, rate limited
	Failed                // an error reply or a transport failure with a reply
	Lost                  // no reply: timeout, connection dropped, unfinished
	numClasses
)

var classNames = [numClasses]string{"ok", "business", "refused", "failed", "lost"}

// String is the class's counter name: ok, business, refused, failed, lost.
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Sample is one request's outcome.
type Sample struct {
	Op     string    // "profile", "purchase", "battle", ...; "" counts as "other"
	Crit   string    // "critical", "default", "sheddable"; "" counts as "default"
	Class  Class     // an unknown class counts as Failed
	Reason string    // e.g. "BUSY", "timeout"; "" for ok
	Due    time.Time // zero: closed loop (no from-due latency)
	Sent   time.Time
	Done   time.Time
}

// Point is one wall second of a run: the second [T, T+1) since its start.
type Point struct {
	T        int                `json:"t"`           // wall second since start
	Counters map[string]int64   `json:"c,omitempty"` // increments this second
	Levels   map[string]float64 `json:"l,omitempty"` // values at the second's end
	Hists    map[string]*Hist   `json:"h,omitempty"` // "lat", "lat_due", and Observe's
}

// Counter names the Recorder writes besides "<class>" and the Add counters.
const (
	CounterSent = "sent"
	// CounterUnmatched counts End calls without a Begin left to match: a
	// caller's bug, kept out of the accounting so it shows.
	CounterUnmatched = "unmatched_end"
	// LevelOutstanding is requests sent and not yet ended, at a second's end.
	LevelOutstanding = "outstanding"
	HistLat          = "lat"
	HistLatDue       = "lat_due"
	HistLatRefused   = "lat_refused"
	// HistLatFailed is the time to an error reply that is neither a
	// refusal for load nor a game outcome (DEADLINE_EXCEEDED, INTERNAL,
	// ...): how long a failure took to come back.
	HistLatFailed = "lat_failed"
)

// Levels: Add changes these by n instead of counting increments.
var playerLevels = map[string]bool{"connected": true, "waiting": true}

const (
	idSent  = 0
	idClass = 1 // ids 1..5 are the classes
	idUnmat = idClass + int(numClasses)

	hidLat     = 0
	hidLatDue  = 1
	hidRefused = 2
	hidFailed  = 3
)

type opKey struct {
	op, crit string
	class    Class
}

type opIDs struct{ op, crit int }

// second is the working state of one unflushed second.
type second struct {
	counts []int64          // by counter id
	hists  []*hdr.Histogram // by hist id; nil = nothing recorded
	set    map[string]float64
	ended  int64 // answered + lost this second
	sent   int64
}

// Recorder collects a run's outcomes into per-second points. It is safe
// for concurrent use; its memory is bounded by the seconds not yet flushed.
type Recorder struct {
	mu    sync.Mutex
	start time.Time

	first int       // earliest second not yet flushed
	open  []*second // open[i] is second first+i; nil = untouched
	free  []*second
	dense []*hdr.Histogram // reset histograms for reuse

	counterIDs map[string]int
	counters   []string
	histIDs    map[string]int
	hists      []string
	opIDs      map[opKey]opIDs
	reasonIDs  map[string]int

	levels      map[string]float64 // player levels, running
	outstanding int64
	cumSent     int64 // through the flushed seconds
	cumEnded    int64
	closed      bool
}

// New returns a Recorder for a run that started at start.
func New(start time.Time) *Recorder {
	r := &Recorder{
		start:      start,
		counterIDs: map[string]int{},
		histIDs:    map[string]int{},
		opIDs:      map[opKey]opIDs{},
		reasonIDs:  map[string]int{},
		levels:     map[string]float64{},
	}
	r.counterID(CounterSent)
	for c := range numClasses {
		r.counterID(c.String())
	}
	r.counterID(CounterUnmatched)
	r.histID(HistLat)
	r.histID(HistLatDue)
	r.histID(HistLatRefused)
	r.histID(HistLatFailed)
	return r
}

func (r *Recorder) counterID(name string) int {
	if id, ok := r.counterIDs[name]; ok {
		return id
	}
	id := len(r.counters)
	r.counterIDs[name] = id
	r.counters = append(r.counters, name)
	return id
}

func (r *Recorder) histID(name string) int {
	if id, ok := r.histIDs[name]; ok {
		return id
	}
	id := len(r.hists)
	r.histIDs[name] = id
	r.hists = append(r.hists, name)
	return id
}

// sec returns the working state of second t (>= r.first).
func (r *Recorder) sec(t int) *second {
	i := t - r.first
	for len(r.open) <= i {
		r.open = append(r.open, nil)
	}
	s := r.open[i]
	if s == nil {
		if n := len(r.free); n > 0 {
			s = r.free[n-1]
			r.free = r.free[:n-1]
		} else {
			s = &second{}
		}
		r.open[i] = s
	}
	return s
}

// secondOf is the second t falls in, no earlier than the current one.
func (r *Recorder) secondOf(t time.Time) int {
	if t.IsZero() {
		return r.first
	}
	d := t.Sub(r.start)
	if d < 0 {
		return r.first
	}
	return max(r.first, int(d/time.Second))
}

func (s *second) add(id int, n int64) {
	if id >= len(s.counts) {
		s.counts = append(s.counts, make([]int64, id+1-len(s.counts))...)
	}
	s.counts[id] += n
}

func (r *Recorder) record(s *second, hid int, d time.Duration) {
	for len(s.hists) <= hid {
		s.hists = append(s.hists, nil)
	}
	h := s.hists[hid]
	if h == nil {
		if n := len(r.dense); n > 0 {
			h = r.dense[n-1]
			r.dense = r.dense[:n-1]
		} else {
			h = newDense()
		}
		s.hists[hid] = h
	}
	_ = h.RecordValue(micros(d)) // cannot fail: clamped into range
}

// Begin counts a request being sent: sent and outstanding go up by one, in
// the current second. Every Begin must be followed by exactly one End.
func (r *Recorder) Begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	s := r.sec(r.first)
	s.add(idSent, 1)
	s.sent++
	r.outstanding++
}

// End counts the outcome of a request Begin counted, in the second of
// s.Done. An End with no request outstanding counts only "unmatched_end".
func (r *Recorder) End(smp Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	s := r.sec(r.secondOf(smp.Done))
	if r.outstanding <= 0 {
		s.add(idUnmat, 1)
		return
	}
	r.outstanding--
	s.ended++
	class := smp.Class
	if class >= numClasses {
		class = Failed
	}
	s.add(idClass+int(class), 1)
	k := opKey{smp.Op, smp.Crit, class}
	ids, ok := r.opIDs[k]
	if !ok {
		op, crit := smp.Op, smp.Crit
		if op == "" {
			op = "other"
		}
		if crit == "" {
			crit = priority.Default.String()
		}
		ids = opIDs{r.counterID(op + "/" + class.String()), r.counterID("crit/" + crit + "/" + class.String())}
		r.opIDs[k] = ids
	}
	s.add(ids.op, 1)
	s.add(ids.crit, 1)
	if smp.Reason != "" {
		id, ok := r.reasonIDs[smp.Reason]
		if !ok {
			id = r.counterID("reason/" + smp.Reason)
			r.reasonIDs[smp.Reason] = id
		}
		s.add(id, 1)
	}
	if smp.Done.IsZero() || smp.Sent.IsZero() && smp.Due.IsZero() {
		return
	}
	if class == Refused && !smp.Sent.IsZero() {
		r.record(s, hidRefused, smp.Done.Sub(smp.Sent))
	}
	if class == Failed && !smp.Sent.IsZero() {
		r.record(s, hidFailed, smp.Done.Sub(smp.Sent))
	}
	if class != OK && class != Business {
		return
	}
	if !smp.Sent.IsZero() {
		r.record(s, hidLat, smp.Done.Sub(smp.Sent))
	}
	if !smp.Due.IsZero() {
		r.record(s, hidLatDue, smp.Done.Sub(smp.Due))
	}
}

// Add counts player events in the current second: "connected" and
// "waiting" are levels (n is +1 or -1, the point carries the value at
// the second's end); any other name ("arrived", "admitted", "left",
// "dial_failures", "reconnects", ...) is a counter incremented by n.
func (r *Recorder) Add(name string, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if playerLevels[name] {
		r.levels[name] += float64(n)
		return
	}
	r.sec(r.first).add(r.counterID(name), n)
}

// AddAt counts n more of counter name in the second of at, or in the
// earliest second not yet flushed when that one is already gone (as End
// does with a sample's Done): for a figure that belongs to when something
// was due rather than to when it was counted.
func (r *Recorder) AddAt(name string, n int64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.sec(r.secondOf(at)).add(r.counterID(name), n)
}

// CounterAttempts prefixes the attempts counters: "attempts/N" counts the
// original requests that went on the wire N times in all (retries and
// resends included), in the second each was due (AddAt). Summed over
// points and processes they give the sends per original request and the
// most sends of one.
const CounterAttempts = "attempts/"

// The sends on the wire of the calls started while a lasting fault of the
// timeline was on (its planned time and length), and the original
// requests among those calls: the load on the cluster during the fault per
// request the players needed.
const (
	CounterFaultSends    = "fault_sends"
	CounterFaultRequests = "fault_requests"
)

// CounterFaultAttempts prefixes the same counters for the original
// requests due while a lasting fault of the timeline was on (its planned
// time and length), counted when they end.
const CounterFaultAttempts = "fault_attempts/"

// FaultAttempts is the counter of original requests due during a fault
// and sent n times.
func FaultAttempts(n int) string { return CounterFaultAttempts + strconv.Itoa(n) }

// Attempts is the counter of original requests sent n times.
func Attempts(n int) string { return CounterAttempts + strconv.Itoa(n) }

// AttemptsOf reads an attempts counter's name: its n, and whether it is one.
func AttemptsOf(name string) (int, bool) { return countOf(name, CounterAttempts) }

// FaultAttemptsOf reads a fault attempts counter's name (FaultAttempts).
func FaultAttemptsOf(name string) (int, bool) { return countOf(name, CounterFaultAttempts) }

func countOf(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n > 0
}

// Set sets a level of the current second, e.g. a server figure such as
// "logic_queue_depth"; the last value set in a second is the point's.
func (r *Recorder) Set(name string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	s := r.sec(r.first)
	if s.set == nil {
		s.set = map[string]float64{}
	}
	s.set[name] = v
}

// Observe records d in the current second's histogram name, e.g. "wait"
// (time in line) or "dial".
func (r *Recorder) Observe(name string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	id, ok := r.histIDs[name]
	if !ok {
		id = r.histID(name)
	}
	r.record(r.sec(r.first), id, d)
}

// Outstanding is the number of requests begun and not yet ended.
func (r *Recorder) Outstanding() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outstanding
}

// Flush returns a point for every whole second before now not yet
// flushed, in order (seconds with nothing in them included).
func (r *Recorder) Flush(now time.Time) []Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	d := now.Sub(r.start)
	if d < 0 {
		return nil
	}
	return r.flushTo(int(d / time.Second))
}

// flushTo flushes the seconds before end.
func (r *Recorder) flushTo(end int) []Point {
	if end <= r.first {
		return nil
	}
	ps := make([]Point, 0, end-r.first)
	k := min(len(r.open), end-r.first)
	for t := r.first; t < end; t++ {
		var s *second
		if i := t - r.first; i < k {
			s = r.open[i]
		}
		ps = append(ps, r.point(t, s))
		if s != nil {
			r.recycle(s)
		}
	}
	n := copy(r.open, r.open[k:])
	clear(r.open[n:])
	r.open = r.open[:n]
	r.first = end
	return ps
}

func (r *Recorder) point(t int, s *second) Point {
	p := Point{T: t, Counters: map[string]int64{}, Levels: map[string]float64{}}
	if s != nil {
		for id, n := range s.counts {
			if n != 0 {
				p.Counters[r.counters[id]] = n
			}
		}
		for id, h := range s.hists {
			if h != nil && h.TotalCount() > 0 {
				if p.Hists == nil {
					p.Hists = map[string]*Hist{}
				}
				p.Hists[r.hists[id]] = fromDense(h)
			}
		}
		for k, v := range s.set {
			p.Levels[k] = v
		}
		r.cumSent += s.sent
		r.cumEnded += s.ended
	}
	for k, v := range r.levels {
		p.Levels[k] = v
	}
	p.Levels[LevelOutstanding] = float64(r.cumSent - r.cumEnded)
	return p
}

func (r *Recorder) recycle(s *second) {
	clear(s.counts)
	for i, h := range s.hists {
		if h != nil {
			h.Reset()
			r.dense = append(r.dense, h)
			s.hists[i] = nil
		}
	}
	s.set = nil
	s.sent, s.ended = 0, 0
	r.free = append(r.free, s)
}

// Close ends every outstanding request as Lost (reason "unfinished") in
// the last second before now, then flushes every second still held
// (including any after now). Later calls on r are ignored.
func (r *Recorder) Close(now time.Time) []Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	last := r.first
	if d := now.Sub(r.start) - 1; d >= 0 {
		last = max(last, int(d/time.Second))
	}
	if n := r.outstanding; n > 0 {
		s := r.sec(last)
		s.add(idClass+int(Lost), n)
		s.add(r.counterID("reason/unfinished"), n)
		s.ended += n
		r.outstanding = 0
	}
	ps := r.flushTo(max(last+1, r.first+len(r.open)))
	r.closed = true
	r.free, r.dense = nil, nil
	return ps
}

// Merge combines points of the same second (from several load processes):
// counters and levels are summed, histograms merged into new ones. The
// result has the first point's T; the inputs are not changed.
func Merge(ps ...Point) Point {
	var out Point
	if len(ps) > 0 {
		out.T = ps[0].T
	}
	for _, p := range ps {
		for k, v := range p.Counters {
			if out.Counters == nil {
				out.Counters = map[string]int64{}
			}
			out.Counters[k] += v
		}
		for k, v := range p.Levels {
			if out.Levels == nil {
				out.Levels = map[string]float64{}
			}
			out.Levels[k] += v
		}
		for k, h := range p.Hists {
			if out.Hists == nil {
				out.Hists = map[string]*Hist{}
			}
			m := out.Hists[k]
			if m == nil {
				m = NewHist()
				out.Hists[k] = m
			}
			m.Merge(h)
		}
	}
	return out
}
