package loadtest

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// LineReport is what the line scenario measured and its verdict. Offsets
// (ChangeApplied, Backlogged, PaceSpan.From/To) count from the first
// admission.
type LineReport struct {
	Scenario    string        `json:"scenario"`
	RunID       string        `json:"run_id"`
	Target      string        `json:"target"`
	Started     time.Time     `json:"started"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	Interrupted bool          `json:"interrupted"`

	Bots         int           `json:"bots"`
	DialParallel int           `json:"dial_parallel"`
	Bound        time.Duration `json:"bound_ns"`

	Joined   int            `json:"joined"`   // bots that got a place in line (a QueueStatus)
	Admitted int            `json:"admitted"` // bots the gate admitted (an Admitted push)
	Welcomed int            `json:"welcomed"` // bots in the game (Dial returned)
	NoLine   int            `json:"no_line"`  // welcomed without waiting in line
	Lost     int            `json:"lost"`     // bots not welcomed
	Failures map[string]int `json:"failures"` // why the lost ones were lost

	// Inversions are pairs of bots in which the one that surely arrived
	// later (it began its handshake after the other already had a place)
	// was surely released earlier by the gate (its release window, from
	// the gate's waited_ms, ended more than OrderSlack before the other's
	// began). OrderedPairs is the number of pairs whose arrival order is
	// sure.
	Inversions   int64         `json:"inversions"`
	OrderedPairs int64         `json:"ordered_pairs"`
	OrderSlack   time.Duration `json:"order_slack_ns"`
	// TimestampInversions count the pairs admitted in the other order than
	// their first statuses came, with no allowance for jitter;
	// MaxDisplacement is the largest difference between a bot's rank by
	// first status and by admission. Both are informational.
	TimestampInversions int64 `json:"timestamp_inversions"`
	MaxDisplacement     int   `json:"max_displacement"`

	ConfiguredRate float64       `json:"configured_rate_per_s"` // 0: unknown
	ChangedRate    float64       `json:"changed_rate_per_s"`    // 0: no pace change
	ChangeAt       time.Duration `json:"change_at_ns"`
	ChangeApplied  time.Duration `json:"change_applied_ns"` // midway between the admin call and its answer
	ChangeTook     time.Duration `json:"change_took_ns"`    // how long the admin call took: the change's uncertainty
	ChangeError    string        `json:"change_error,omitempty"`
	PaceTolerance  float64       `json:"pace_tolerance"`
	// Backlogged is when the last bot got its place: from then on the line
	// was never empty until the last admission, so the pace is measured
	// from there (an emptier line releases what arrives).
	Backlogged time.Duration `json:"backlogged_ns"`
	// OpenedAfter is when, from the start of the run, the Start setting
	// was applied with StartWhenJoined (every bot was in line); 0 if not.
	OpenedAfter time.Duration `json:"opened_after_ns"`
	Before      *PaceSpan     `json:"before,omitempty"` // the pace before the change (or over the run, without one)
	After       *PaceSpan     `json:"after,omitempty"`  // after the change and Settle
	Window      time.Duration `json:"window_ns"`
	Windows     []float64     `json:"windows_per_s"` // admissions per second in each full window from the first admission

	Wait        Latency       `json:"wait"` // from the start of the handshake to the admission, admitted bots
	GateWaitMax time.Duration `json:"gate_wait_max_ns"`
	JoinSpread  time.Duration `json:"join_spread_ns"` // first to last bot's first status
	// MaxStall is the longest a 10 ms ticker of the load tool came late
	// during the run: a busy machine, not the gate, when it is large.
	MaxStall            time.Duration `json:"max_stall_ns"`
	Statuses            int           `json:"statuses"`
	MaxStatusGap        time.Duration `json:"max_status_gap_ns"`
	MaxStatusGapAllowed time.Duration `json:"max_status_gap_allowed_ns"`

	Criteria []Criterion `json:"criteria"`
	Warnings []string    `json:"warnings"`
	Passed   bool        `json:"passed"`
}

// PaceSpan is the measured pace over a stretch of the run: Admitted
// admissions from From to To (offsets from the first admission), Rate =
// Admitted / (To - From), against Target; MinWindow and MaxWindow are the
// extremes of the full windows inside it.
type PaceSpan struct {
	From      time.Duration `json:"from_ns"`
	To        time.Duration `json:"to_ns"`
	Admitted  int           `json:"admitted"`
	Rate      float64       `json:"rate_per_s"`
	Target    float64       `json:"target_per_s"`
	MinWindow float64       `json:"min_window_per_s"`
	MaxWindow float64       `json:"max_window_per_s"`
	Windows   int           `json:"windows"` // full windows in the span
}

// lineSample is one bot as the order analysis sees it; zero times are
// missing.
type lineSample struct {
	dialStart, joined, admitted time.Time
	waited                      time.Duration // the gate's waited_ms
	hasWaited                   bool          // an Admitted push came
}

// fill computes the report's figures from what the bots saw.
func (lr *lineRun) fill(rep *LineReport) {
	samples := make([]lineSample, 0, len(lr.bots))
	var waits []time.Duration
	var firstJoin, lastJoin time.Time
	for i := range lr.bots {
		b := &lr.bots[i]
		rep.Statuses += b.statuses
		rep.MaxStatusGap = max(rep.MaxStatusGap, b.maxGap)
		rep.GateWaitMax = max(rep.GateWaitMax, b.gateWaited)
		if !b.firstStatus.IsZero() {
			rep.Joined++
			if firstJoin.IsZero() || b.firstStatus.Before(firstJoin) {
				firstJoin = b.firstStatus
			}
			if b.firstStatus.After(lastJoin) {
				lastJoin = b.firstStatus
			}
		}
		if !b.admitted.IsZero() {
			rep.Admitted++
			waits = append(waits, b.admitted.Sub(b.dialStart))
		}
		switch {
		case b.err == nil && b.c != nil:
			rep.Welcomed++
			if b.statuses == 0 && b.admitted.IsZero() {
				rep.NoLine++
			}
		case b.err != nil:
			rep.Failures[dialReason(b.err)]++
		}
		samples = append(samples, lineSample{dialStart: b.dialStart, joined: b.firstStatus, admitted: b.admitted,
			waited: b.gateWaited, hasWaited: !b.admitted.IsZero()})
	}
	rep.Lost = rep.Bots - rep.Welcomed
	rep.Wait = Summarize(waits)
	if !lastJoin.IsZero() {
		rep.JoinSpread = lastJoin.Sub(firstJoin)
	}
	rep.Inversions, rep.OrderedPairs = definiteInversions(samples, lr.cfg.OrderSlack)
	rep.TimestampInversions, rep.MaxDisplacement = timestampOrder(samples)

	adm := admissionTimes(samples)
	if len(adm) == 0 {
		return
	}
	first := adm[0]
	rep.Backlogged = max(lastJoin.Sub(first), 0)
	rep.Windows = windowRates(adm, first, lr.cfg.Window)
	if lr.changeErr != nil {
		rep.ChangeError = lr.changeErr.Error()
	}
	last := adm[len(adm)-1].Sub(first)
	if lr.cfg.ChangeAt > 0 && lr.changeErr == nil && !lr.changeDone.IsZero() {
		// The change took effect somewhere between the call and its answer:
		// the pace before is judged up to the call, the pace after from
		// the answer (and Settle), so neither span holds admissions of the
		// other pace however long the call took on a busy machine.
		sent, done := lr.changeSent.Sub(first), lr.changeDone.Sub(first)
		rep.ChangeApplied, rep.ChangeTook = sent+(done-sent)/2, done-sent
		rep.Before = paceSpan(adm, first, rep.Backlogged, sent, false, lr.cfg.Window, rep.ConfiguredRate)
		rep.After = paceSpan(adm, first, max(done+lr.cfg.Settle, rep.Backlogged), last, true, lr.cfg.Window, rep.ChangedRate)
		return
	}
	rep.Before = paceSpan(adm, first, rep.Backlogged, last, true, lr.cfg.Window, rep.ConfiguredRate)
}

// admissionTimes is the sorted admission times of the samples.
func admissionTimes(s []lineSample) []time.Time {
	var out []time.Time
	for _, x := range s {
		if !x.admitted.IsZero() {
			out = append(out, x.admitted)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// paceSpan measures the pace over [from, to) after first (to included when
// closed: the last admission ends the span); nil when the span is empty.
func paceSpan(adm []time.Time, first time.Time, from, to time.Duration, closed bool, window time.Duration, target float64) *PaceSpan {
	if to <= from {
		return nil
	}
	p := &PaceSpan{From: from, To: to, Target: target, MinWindow: math.Inf(1)}
	a, b := first.Add(from), first.Add(to)
	for _, t := range adm {
		if !t.Before(a) && (t.Before(b) || (closed && t.Equal(b))) {
			p.Admitted++
		}
	}
	p.Rate = float64(p.Admitted) / (to - from).Seconds()
	for ws := a; !ws.Add(window).After(b); ws = ws.Add(window) {
		n := 0
		for _, t := range adm {
			if !t.Before(ws) && t.Before(ws.Add(window)) {
				n++
			}
		}
		r := float64(n) / window.Seconds()
		p.MinWindow, p.MaxWindow = min(p.MinWindow, r), max(p.MaxWindow, r)
		p.Windows++
	}
	if math.IsInf(p.MinWindow, 1) {
		p.MinWindow = 0
	}
	return p
}

// windowRates counts the admissions in each full window from first.
func windowRates(adm []time.Time, first time.Time, window time.Duration) []float64 {
	last := adm[len(adm)-1]
	n := int(last.Sub(first) / window)
	out := make([]float64, n)
	for _, t := range adm {
		if i := int(t.Sub(first) / window); i < n {
			out[i]++
		}
	}
	for i := range out {
		out[i] /= window.Seconds()
	}
	return out
}

// releaseWindow is when the gate surely released a bot, from what the bot
// saw: the gate joined it to the line at some instant J between the start
// of its handshake and its first status, and released it at J + waited
// (waited_ms of its Admitted push, truncated to the millisecond), which is
// also no later than the bot received the push. Bots without an admission
// have none (ok false).
func (v lineSample) releaseWindow() (lo, hi time.Time, ok bool) {
	if v.admitted.IsZero() || !v.hasWaited {
		return time.Time{}, time.Time{}, false
	}
	lo, hi = v.dialStart.Add(v.waited), v.admitted
	if !v.joined.IsZero() {
		if h := v.joined.Add(v.waited + time.Millisecond); h.Before(hi) {
			hi = h
		}
	}
	return lo, hi, true
}

// definiteInversions counts the pairs (x, y) where x surely arrived first
// (x had its first status before y began its handshake) and the gate surely
// released y first (y's release window ends more than slack before x's
// begins). The release windows come from the gate's own waited_ms, so the
// order in which the Admitted pushes reach the bots (a batch of releases is
// written by one goroutine per player, in any order) does not count.
// ordered counts the pairs whose arrival order is sure. O(n log n).
func definiteInversions(s []lineSample, slack time.Duration) (inv, ordered int64) {
	type rel struct {
		lineSample
		lo, hi time.Time
	}
	var xs []rel // candidates for the earlier arrival, by first status
	var ys []rel // candidates for the later one, by handshake start
	for _, v := range s {
		lo, hi, ok := v.releaseWindow()
		if !ok {
			continue
		}
		r := rel{v, lo, hi}
		if !v.joined.IsZero() {
			xs = append(xs, r)
		}
		ys = append(ys, r)
	}
	slices.SortFunc(xs, func(a, b rel) int { return a.joined.Compare(b.joined) })
	slices.SortFunc(ys, func(a, b rel) int { return a.dialStart.Compare(b.dialStart) })
	keys := make([]time.Time, len(xs)) // the xs' release-window starts, sorted
	for i, x := range xs {
		keys[i] = x.lo
	}
	slices.SortFunc(keys, func(a, b time.Time) int { return a.Compare(b) })
	rank := func(t time.Time) int { // keys at or before t
		n, _ := slices.BinarySearchFunc(keys, t, func(e, t time.Time) int {
			if e.After(t) {
				return 1
			}
			return -1
		})
		return n
	}
	tree := make([]int64, len(keys)+1)
	add := func(i int) {
		for i++; i < len(tree); i += i & -i {
			tree[i]++
		}
	}
	prefix := func(n int) int64 { // inserted among the first n keys
		var s int64
		for ; n > 0; n -= n & -n {
			s += tree[n]
		}
		return s
	}
	inserted := int64(0)
	next := 0
	for _, y := range ys {
		for next < len(xs) && xs[next].joined.Before(y.dialStart) {
			add(rank(xs[next].lo) - 1)
			inserted++
			next++
		}
		ordered += inserted
		inv += inserted - prefix(rank(y.hi.Add(slack)))
	}
	return inv, ordered
}

// timestampOrder compares the order of first statuses with the order of
// admissions, for the bots that have both: the pairs in the other order,
// and the largest rank difference.
func timestampOrder(s []lineSample) (inv int64, maxDisp int) {
	var v []lineSample
	for _, x := range s {
		if !x.joined.IsZero() && !x.admitted.IsZero() {
			v = append(v, x)
		}
	}
	slices.SortStableFunc(v, func(a, b lineSample) int { return a.joined.Compare(b.joined) })
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return v[a].admitted.Compare(v[b].admitted) })
	for admRank, arrRank := range idx {
		maxDisp = max(maxDisp, abs(admRank-arrRank))
	}
	// Inversions of the admission times in arrival order (merge sort).
	ts := make([]time.Time, len(v))
	for i, x := range v {
		ts[i] = x.admitted
	}
	return mergeCount(ts, make([]time.Time, len(ts))), maxDisp
}

func mergeCount(a, buf []time.Time) int64 {
	if len(a) < 2 {
		return 0
	}
	m := len(a) / 2
	n := mergeCount(a[:m], buf[:m]) + mergeCount(a[m:], buf[m:])
	i, j, k := 0, m, 0
	for i < m && j < len(a) {
		if a[j].Before(a[i]) {
			n += int64(m - i)
			buf[k] = a[j]
			j++
		} else {
			buf[k] = a[i]
			i++
		}
		k++
	}
	k += copy(buf[k:], a[i:m])
	copy(buf[k:], a[j:])
	copy(a, buf[:len(a)])
	return n
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Evaluate judges the run: it completed; every bot got a place in line;
// none was lost; no pair was admitted against its arrival order; the pace
// (before and after a change) was within PaceTolerance of the configured
// one, when it is known; no waiting bot went longer than
// MaxStatusGapAllowed without a status.
func (r *LineReport) Evaluate() {
	r.Criteria = nil
	add := func(key, name string, pass bool, got string, args ...any) {
		r.Criteria = append(r.Criteria, Criterion{Key: key, Name: name, Got: fmt.Sprintf(got, args...), Pass: pass})
	}
	add("completed", "the run completed", !r.Interrupted, "%s", map[bool]string{true: "interrupted", false: "yes"}[r.Interrupted])
	add("joined", "every bot got a place in line", r.Joined == r.Bots, "%d of %d", r.Joined, r.Bots)
	add("lost", "none lost: every bot admitted and welcomed", r.Lost == 0 && r.Admitted == r.Bots,
		"admitted %d, welcomed %d, lost %d%s", r.Admitted, r.Welcomed, r.Lost, paren(r.Failures))
	add("order", "admitted in arrival order", r.Inversions == 0 && r.OrderedPairs > 0,
		"%d inversions in %d surely ordered pairs (slack %v)", r.Inversions, r.OrderedPairs, r.OrderSlack)
	pace := func(key, name string, p *PaceSpan) {
		if p == nil || p.Target <= 0 {
			add(key, name, false, "not measured")
			return
		}
		ok := math.Abs(p.Rate-p.Target) <= r.PaceTolerance*p.Target && p.Admitted >= 2
		add(key, name, ok, "%.1f/s vs %.1f/s (%+.1f %%), %d admitted over %v", p.Rate, p.Target,
			(p.Rate/p.Target-1)*100, p.Admitted, (p.To - p.From).Round(time.Millisecond))
	}
	tol := fmt.Sprintf("within ±%.0f %% of", r.PaceTolerance*100)
	if r.ConfiguredRate > 0 {
		label := "the pace " + tol + " the configured pace"
		if r.ChangedRate > 0 {
			label = "the pace before the change " + tol + " the first"
		}
		pace("pace", label, r.Before)
	}
	if r.ChangedRate > 0 {
		if r.ChangeError != "" {
			add("change", "the admin API changed the pace", false, "%s", r.ChangeError)
		}
		pace("pace_after", "the pace after the change "+tol+" the new", r.After)
	}
	add("status_gap", fmt.Sprintf("a status at least every %v while waiting", r.MaxStatusGapAllowed),
		r.MaxStatusGap <= r.MaxStatusGapAllowed, "longest gap %v", r.MaxStatusGap.Round(time.Millisecond))
	r.Passed = allPass(r.Criteria)
}

// WriteJSON writes the report as indented JSON.
func (r *LineReport) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// WriteTable writes the report for people.
func (r *LineReport) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "levee line test: run %s, target %s, elapsed %v", r.RunID, r.Target, r.Elapsed.Round(time.Millisecond))
	if r.Interrupted {
		b.WriteString(", INTERRUPTED")
	}
	fmt.Fprintf(&b, "\n%d bots at once (%d handshakes at a time), bound %v\n\n", r.Bots, r.DialParallel, r.Bound)
	kv := func(k, format string, args ...any) { fmt.Fprintf(&b, "%-22s %s\n", k, fmt.Sprintf(format, args...)) }
	kv("bots", "joined the line %d, admitted %d, welcomed %d (without waiting %d), lost %d%s",
		r.Joined, r.Admitted, r.Welcomed, r.NoLine, r.Lost, paren(r.Failures))
	kv("arrival", "first statuses spread over %v; line backlogged from +%v after the first admission",
		r.JoinSpread.Round(time.Millisecond), r.Backlogged.Round(time.Millisecond))
	if r.OpenedAfter > 0 {
		kv("opened", "the line was opened %v after the start, every bot being in line", r.OpenedAfter.Round(time.Millisecond))
	}
	kv("order", "%d inversions in %d surely ordered pairs (slack %v); by raw timestamps %d, max displacement %d",
		r.Inversions, r.OrderedPairs, r.OrderSlack, r.TimestampInversions, r.MaxDisplacement)
	span := func(name string, p *PaceSpan) {
		if p == nil {
			kv(name, "not measured")
			return
		}
		target := "unknown"
		if p.Target > 0 {
			target = fmt.Sprintf("%.1f/s (%+.1f %%)", p.Target, (p.Rate/p.Target-1)*100)
		}
		windows := "no full " + r.Window.String() + " window"
		if p.Windows > 0 {
			windows = fmt.Sprintf("%d windows of %v: %.0f..%.0f/s", p.Windows, r.Window, p.MinWindow, p.MaxWindow)
		}
		kv(name, "%.1f/s vs configured %s; %d admitted over +%v..+%v; %s",
			p.Rate, target, p.Admitted, p.From.Round(time.Millisecond), p.To.Round(time.Millisecond), windows)
	}
	if r.ChangedRate > 0 || r.ChangeError != "" {
		span("pace before", r.Before)
		kv("pace change", "at +%v (asked +%v, the call took %v), to %.1f/s%s", r.ChangeApplied.Round(time.Millisecond), r.ChangeAt,
			r.ChangeTook.Round(time.Millisecond), r.ChangedRate,
			map[bool]string{true: ": " + r.ChangeError, false: ""}[r.ChangeError != ""])
		span("pace after", r.After)
	} else {
		span("pace", r.Before)
	}
	ws := make([]string, len(r.Windows))
	for i, v := range r.Windows {
		ws[i] = fmt.Sprintf("%.0f", v)
	}
	kv("per window", "%s (admissions/s, %v windows from the first admission)", strings.Join(ws, " "), r.Window)
	kv("wait", "p50 %v, p99 %v, max %v (handshake to admission); gate's longest waited_ms %v",
		r.Wait.P50.Round(time.Millisecond), r.Wait.P99.Round(time.Millisecond), r.Wait.Max.Round(time.Millisecond),
		r.GateWaitMax.Round(time.Millisecond))
	kv("statuses", "%d in all; longest gap %v", r.Statuses, r.MaxStatusGap.Round(time.Millisecond))
	kv("load tool", "longest scheduling stall %v (a 10 ms ticker coming late: the machine was busy)", r.MaxStall.Round(time.Millisecond))

	writeCriteria(&b, r.Criteria, r.Warnings, 52)
	_, err := io.WriteString(w, b.String())
	return err
}

// IsTimingCriterion says whether the line criterion key judges timing (a
// pace, the gap between status pushes) rather than order or losses: a
// test on a starved machine may skip those, never the others.
func IsTimingCriterion(key string) bool {
	return key == "pace" || key == "pace_after" || key == "status_gap"
}
