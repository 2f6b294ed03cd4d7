// Package threshold parses and evaluates pass/fail criteria of a load
// test, in a k6-like syntax: LHS OP RHS, OP one of < <= > >= == !=.
//
//	p(99) < 500ms                  the 99th percentile of served latency
//	error_rate < 0.01              a scalar figure of the run
//	max(logic_queue_depth) < 500   an aggregate of a per-second series
//	admitted == arrived            two figures
//	goodput >= 0.9 * capacity      a multiple of a figure
//	avg(admitted)[10s:40s] >= 90   a figure over a window of the run
//	p(99)[overload] <= 3 * p(99)[baseline]
//
// LHS is p(N) (N in (0, 100]: the latency quantile of served requests, in
// seconds), a scalar name (Scalars), or AGG(series) with AGG one of max,
// min, avg, median, last over a per-second series (SeriesNames). RHS is a
// number with an optional unit (ms, s, m, h, us: seconds; %: a
// hundredth), or [NUMBER *] followed by a scalar, AGG(series) or p(N).
//
// Any figure may be followed by a window, read over that stretch of the
// run only (Window): [FROM:TO] in wall time from the run's start (Go
// durations; either may be left out: [10s:], [:1m]; FROM is in, TO is
// not), or [PHASE], a phase the run file names (the players engine's
// "run" and "drain", and the phases a scenario names). The Facts must be
// Windowed for it.
//
// The figures (implemented by the run report, loadtest/report):
//
// Scalars: sent, answered, ok, business, refused, failed, lost_replies
// (requests of the run by outcome: answered = ok + business + refused +
// failed; lost_replies: sent but never answered); error_rate = (failed +
// lost) / sent; refused_rate = refused / sent; arrived, connected,
// admitted, left, dial_failures, reconnects (players); goodput = ok
// replies per wall second over the run; capacity = the scenario's
// capacity: figure (requests/s, x scale); duration (seconds); max_wait =
// the longest wait in the admission line (seconds); order_inversions =
// pairs of players at one gate surely admitted against their arrival
// order, order_pairs = the pairs whose order is sure (both from the gate's
// waited_ms); max_status_gap = the longest a waiting player went between
// two queue statuses (seconds); the ledger
// check's (scenario ledger: true: the game's auditor, loadtest/audit; arena's ledger): ledger_players
// (checked), ledger_acked, ledger_lost, ledger_doubled, ledger_phantom,
// ledger_unresolved, ledger_mismatch (players), ledger_unchecked
// (players); the replay check's (scenario replay_check: N):
// replay_checked, replay_fresh, replay_failed, replay_unchecked; attempts_per_request (sends on the wire per original
// request) and max_attempts (most sends of one); reconnect_peak_ratio,
// reconnect_spread (seconds), line_place_kept, line_place_lost: the
// players' first redials after the server closed them (loadtest/report
// RedialFigures); the drills' fault_* figures (loadtest/report
// FaultFigures), duplicate_replies and unhinted_refusals; server_closes
// and server_closes_in_line (connections the server ended, of them of
// players waiting in line); held (the most players connected or waiting
// at once), rss_before_mb, rss_held_mb and rss_per_conn (bytes): the
// memory benchmark's figures of a run with the server's pid (loadtest/report
// MemoryFigures).
//
// Series (one value per wall second; NaN = no sample that second, skipped):
// connected, waiting, admitted, rps, goodput, attempts (mean sends per
// original request, by the second it was due), p99 (seconds),
// logic_queue_depth, battle_p99 (seconds), gate_connections,
// gate_waiting, gate_connections_peak, gate_connection_cap, cpu (the max over tiers of cores used, 1.0 = one core),
// cpu_gate, cpu_logic, cpu_battle, rss_gate_mb, rss_logic_mb,
// rss_battle_mb, line_rate (the release rate the timeline's line steps
// configured, admissions per second; compare avg(admitted) with it),
// mix_served (the requests/s of the players' mix served in full: its
// scarcest kind's served replies / that kind's share of the mix), held
// (connected + waiting), server_rss_mb (the resident memory of the process
// probed by pid, MiB), gate_pushes_per_s and gate_pings_per_s (the line's
// status pushes and the keepalive pings the gates sent, per second,
// summed), cpu_loadtest (the load processes' own CPU, cores), and for
// logic on PostgreSQL logic_shards_held, logic_shards_without_owner,
// logic_lease_losses, logic_shard_moves, logic_fenced_commits and
// logic_fenced_purges (see
// loadtest/probe).
package threshold

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scalars are the names of the run's single figures.
var Scalars = []string{"sent", "answered", "ok", "business", "refused", "failed", "lost_replies", "error_rate",
	"refused_rate", "arrived", "connected", "admitted", "left", "dial_failures", "reconnects", "goodput",
	"capacity", "duration", "max_wait", "order_inversions", "order_pairs", "max_status_gap",
	// The drills' (loadtest/report/drill.go and the driver's counters).
	"fault_goodput_before", "fault_goodput_during", "fault_recovery", "fault_attempts_per_request", "fault_request_attempts", "max_failed_latency",
	"duplicate_replies", "unhinted_refusals",
	"ledger_players", "ledger_acked", "ledger_lost", "ledger_doubled", "ledger_phantom", "ledger_unresolved",
	"ledger_mismatch", "ledger_unchecked", "attempts_per_request", "max_attempts",
	"replay_checked", "replay_fresh", "replay_failed", "replay_unchecked",
	"reconnect_peak_ratio", "reconnect_spread", "line_place_kept", "line_place_lost",
	// The memory benchmark's (loadtest/report/memory.go) and the servers' closes.
	"held", "rss_before_mb", "rss_held_mb", "rss_per_conn", "server_closes", "server_closes_in_line"}

// SeriesNames are the names of the run's per-second series.
var SeriesNames = []string{"connected", "waiting", "admitted", "rps", "goodput", "attempts", "p99", "logic_queue_depth",
	"battle_p99", "gate_connections", "gate_waiting", "gate_connections_peak", "gate_connection_cap",
	"goroutines_gate", "goroutines_logic", "goroutines_battle", "logic_store_errors", "cpu", "cpu_gate", "cpu_logic", "cpu_battle",
	"rss_gate_mb", "rss_logic_mb", "rss_battle_mb", "line_rate", "mix_served", "held", "server_rss_mb", "gate_pushes_per_s", "gate_pings_per_s", "cpu_loadtest",
	"logic_shards_held", "logic_shards_without_owner", "logic_lease_losses", "logic_shard_moves", "logic_fenced_commits", "logic_fenced_purges"}

// Aggregates are the functions over a series.
var Aggregates = []string{"max", "min", "avg", "median", "last"}

// seconds are the figures measured in seconds (shown as durations).
var seconds = map[string]bool{"duration": true, "max_wait": true, "p99": true, "battle_p99": true,
	"fault_recovery": true, "max_failed_latency": true, "reconnect_spread": true, "max_status_gap": true}

// InSeconds reports whether the figure or series name is measured in
// seconds (shown as a duration).
func InSeconds(name string) bool { return seconds[name] }

// ErrSyntax is wrapped by every Parse error.
var ErrSyntax = errors.New("threshold")

// Facts are a run's figures.
type Facts interface {
	// Value is a scalar (a name of Scalars).
	Value(name string) (float64, bool)
	// Series is a per-second series (a name of SeriesNames); NaN entries
	// are seconds without a sample, skipped.
	Series(name string) ([]float64, bool)
	// Quantile is the served latency quantile in seconds, q in (0, 1].
	Quantile(q float64) (float64, bool)
}

// Window is a stretch of the run a figure is read over: wall time from
// the run's start, [From, To) (HasTo false: to the end), or the run's
// phase named Phase (its From and To in the run's meta). The zero Window
// is the whole run.
type Window struct {
	Phase string
	From  time.Duration
	To    time.Duration
	HasTo bool
}

// IsZero reports whether w is the whole run.
func (w Window) IsZero() bool { return w == Window{} }

func (w Window) String() string {
	if w.IsZero() {
		return ""
	}
	if w.Phase != "" {
		return "[" + w.Phase + "]"
	}
	s := "["
	if w.From > 0 {
		s += w.From.String()
	}
	s += ":"
	if w.HasTo {
		s += w.To.String()
	}
	return s + "]"
}

// Windowed is Facts that can be read over a window: In returns the
// figures of that stretch only (every scalar, series and quantile of
// it), or an error saying why there is none (an unknown phase).
type Windowed interface {
	In(w Window) (Facts, error)
}

// Result is one threshold's outcome. Value is the left side, Limit the
// right side (both 0 when a figure is missing).
type Result struct {
	Threshold string
	Passed    bool
	Value     float64
	Limit     float64
	Detail    string // e.g. "p(99) = 612ms, want < 500ms" or "no figure for max(cpu)"
}

// Threshold is a parsed criterion. The zero Threshold is not valid.
type Threshold struct {
	lhs operand
	op  string
	rhs operand
}

// operand is [factor *] ref, or a literal number (ref.kind 0).
type operand struct {
	factor  float64
	literal string // the number as written, with its unit ("500ms")
	ref     ref
}

type refKind uint8

const (
	refNone refKind = iota
	refScalar
	refAgg
	refQuantile
)

// ref is a figure: a scalar, AGG(series) or p(N).
type ref struct {
	win  Window // [FROM:TO] or [PHASE] after the figure; zero: the whole run
	kind refKind
	name string  // scalar or series name
	agg  string  // refAgg
	q    float64 // refQuantile: N/100
	n    string  // refQuantile: N as written
}

func (r ref) String() string {
	switch r.kind {
	case refScalar:
		return r.name + r.win.String()
	case refAgg:
		return r.agg + "(" + r.name + ")" + r.win.String()
	case refQuantile:
		return "p(" + r.n + ")" + r.win.String()
	}
	return ""
}

func (o operand) String() string {
	switch {
	case o.ref.kind == refNone:
		return o.literal
	case o.literal != "":
		return o.literal + " * " + o.ref.String()
	}
	return o.ref.String()
}

// inSeconds says whether the operand's figure is a time in seconds.
func (o operand) inSeconds() bool {
	return o.ref.kind == refQuantile || seconds[o.ref.name]
}

// String is the threshold in a canonical spacing, numbers as written.
func (t Threshold) String() string {
	if t.op == "" {
		return ""
	}
	return t.lhs.String() + " " + t.op + " " + t.rhs.String()
}

// Names are the figures it reads: scalar and series names, and "p(N)" for
// a latency quantile.
func (t Threshold) Names() []string {
	var out []string
	for _, o := range []operand{t.lhs, t.rhs} {
		var n string
		switch o.ref.kind {
		case refScalar, refAgg:
			n = o.ref.name
		case refQuantile:
			n = o.ref.String()
		default:
			continue
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

var ops = []string{"<=", ">=", "==", "!=", "<", ">"}

// Parse reads a threshold; errors name what is wrong and, for an unknown
// figure, list the known ones.
func Parse(s string) (Threshold, error) {
	p := &parser{src: s}
	t, err := p.threshold()
	if err != nil {
		return Threshold{}, fmt.Errorf("%w: %q: %v", ErrSyntax, strings.TrimSpace(s), err)
	}
	return t, nil
}

type parser struct {
	src string
	pos int
}

func (p *parser) skip() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

func (p *parser) rest() string { return p.src[p.pos:] }

func (p *parser) threshold() (Threshold, error) {
	p.skip()
	if p.pos == len(p.src) {
		return Threshold{}, errors.New("empty; want e.g. \"p(99) < 500ms\"")
	}
	lhs, err := p.ref()
	if err != nil {
		return Threshold{}, err
	}
	p.skip()
	var op string
	for _, o := range ops {
		if strings.HasPrefix(p.rest(), o) {
			op = o
			break
		}
	}
	if op == "" {
		if p.pos == len(p.src) {
			return Threshold{}, fmt.Errorf("no comparison after %s; want one of < <= > >= == !=", lhs)
		}
		return Threshold{}, fmt.Errorf("want a comparison (< <= > >= == !=) after %s, got %q", lhs, p.rest())
	}
	p.pos += len(op)
	p.skip()
	rhs, err := p.rhs()
	if err != nil {
		return Threshold{}, err
	}
	p.skip()
	if p.pos != len(p.src) {
		return Threshold{}, fmt.Errorf("unexpected %q at the end", p.rest())
	}
	return Threshold{lhs: operand{factor: 1, ref: lhs}, op: op, rhs: rhs}, nil
}

// rhs is NUMBER[unit], or [NUMBER *] ref.
func (p *parser) rhs() (operand, error) {
	if p.pos == len(p.src) {
		return operand{}, errors.New("nothing after the comparison; want a number or a figure")
	}
	if c := p.src[p.pos]; (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' {
		lit, v, unit, err := p.number()
		if err != nil {
			return operand{}, err
		}
		p.skip()
		if !strings.HasPrefix(p.rest(), "*") {
			return operand{factor: v, literal: lit}, nil
		}
		if unit != "" {
			return operand{}, fmt.Errorf("a factor has no unit, got %q", lit)
		}
		p.pos++
		p.skip()
		r, err := p.ref()
		if err != nil {
			return operand{}, err
		}
		return operand{factor: v, literal: lit, ref: r}, nil
	}
	r, err := p.ref()
	if err != nil {
		return operand{}, err
	}
	return operand{factor: 1, ref: r}, nil
}

var units = map[string]float64{"": 1, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "m": 60, "h": 3600, "%": 0.01}

// number is a decimal number with an optional unit.
func (p *parser) number() (lit string, v float64, unit string, err error) {
	start := p.pos
	i := p.pos
	if i < len(p.src) && (p.src[i] == '-' || p.src[i] == '+') {
		i++
	}
	digits := 0
	for i < len(p.src) && (p.src[i] >= '0' && p.src[i] <= '9' || p.src[i] == '.') {
		i++
		digits++
	}
	if i < len(p.src) && (p.src[i] == 'e' || p.src[i] == 'E') && i+1 < len(p.src) {
		j := i + 1
		if p.src[j] == '-' || p.src[j] == '+' {
			j++
		}
		if j < len(p.src) && p.src[j] >= '0' && p.src[j] <= '9' {
			for i = j; i < len(p.src) && p.src[i] >= '0' && p.src[i] <= '9'; i++ {
			}
		}
	}
	num := p.src[start:i]
	u := i
	for u < len(p.src) && (isLetter(p.src[u]) || p.src[u] == '%' || p.src[u] >= 0x80) {
		u++
	}
	lit, unit = p.src[start:u], p.src[i:u]
	p.pos = u
	f, perr := strconv.ParseFloat(num, 64)
	if digits == 0 || perr != nil || math.IsInf(f, 0) {
		return "", 0, "", fmt.Errorf("%q is not a number", lit)
	}
	m, ok := units[unit]
	if !ok {
		return "", 0, "", fmt.Errorf("unknown unit %q in %q; want ms, s, m, h, us or %%", unit, lit)
	}
	switch {
	case m < 1:
		v = f / (1 / m) // 500ms = 500/1000 exactly, not 500 x 0.001
	default:
		v = f * m
	}
	return lit, v, unit, nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

func isNameChar(c byte) bool { return isLetter(c) || c >= '0' && c <= '9' }

// ref is p(N), AGG(series) or a scalar name.
func (p *parser) ref() (ref, error) {
	start := p.pos
	for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
		p.pos++
	}
	name := p.src[start:p.pos]
	if name == "" {
		return ref{}, fmt.Errorf("want a figure (e.g. p(99), error_rate, max(cpu)), got %q", p.rest())
	}
	p.skip()
	if !strings.HasPrefix(p.rest(), "(") {
		switch {
		case slices.Contains(Scalars, name):
			return p.window(ref{kind: refScalar, name: name})
		case slices.Contains(SeriesNames, name):
			return ref{}, fmt.Errorf("%s is a per-second series: use max(%s), min(%s), avg(%s) or last(%s)", name, name, name, name, name)
		}
		return ref{}, fmt.Errorf("unknown figure %q; the figures are p(N), %s and AGG(series) with AGG one of %s over %s",
			name, strings.Join(Scalars, ", "), strings.Join(Aggregates, ", "), strings.Join(SeriesNames, ", "))
	}
	p.pos++
	p.skip()
	var r ref
	switch {
	case name == "p":
		lit, v, unit, err := p.number()
		if err != nil {
			return ref{}, fmt.Errorf("p(N): %v", err)
		}
		if unit != "" || !(v > 0 && v <= 100) {
			return ref{}, fmt.Errorf("p(N): N must be a number in (0, 100], got %q", lit)
		}
		r = ref{kind: refQuantile, q: v / 100, n: lit}
	case slices.Contains(Aggregates, name):
		s := p.pos
		for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
			p.pos++
		}
		series := p.src[s:p.pos]
		if !slices.Contains(SeriesNames, series) {
			return ref{}, fmt.Errorf("unknown series %q in %s(); the series are %s", series, name, strings.Join(SeriesNames, ", "))
		}
		r = ref{kind: refAgg, agg: name, name: series}
	default:
		return ref{}, fmt.Errorf("unknown function %q; want p(N) or one of %s", name, strings.Join(Aggregates, ", "))
	}
	p.skip()
	if !strings.HasPrefix(p.rest(), ")") {
		return ref{}, fmt.Errorf("want ) after %s(", name)
	}
	p.pos++
	return p.window(r)
}

// window reads an optional [FROM:TO] or [PHASE] after a figure.
func (p *parser) window(r ref) (ref, error) {
	save := p.pos
	p.skip()
	if !strings.HasPrefix(p.rest(), "[") {
		p.pos = save
		return r, nil
	}
	end := strings.IndexByte(p.rest(), ']')
	if end < 0 {
		return ref{}, fmt.Errorf("%s[: want ] after the window", r)
	}
	body := strings.TrimSpace(p.rest()[1:end])
	p.pos += end + 1
	w, err := parseWindow(body)
	if err != nil {
		return ref{}, fmt.Errorf("%s[%s]: %v", r, body, err)
	}
	r.win = w
	return r, nil
}

// parseWindow reads FROM:TO (Go durations of wall time from the start,
// either may be empty) or a phase name.
func parseWindow(body string) (Window, error) {
	if body == "" {
		return Window{}, errors.New("empty window; want [FROM:TO] (e.g. [10s:40s], [10s:], [:1m]) or [PHASE]")
	}
	from, to, ok := strings.Cut(body, ":")
	if !ok {
		for i := 0; i < len(body); i++ {
			if c := body[i]; !isNameChar(c) && c != '-' {
				return Window{}, fmt.Errorf("%q is not a phase name (letters, digits, _ and -) nor FROM:TO", body)
			}
		}
		return Window{Phase: body}, nil
	}
	var w Window
	dur := func(s, what string) (time.Duration, error) {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return 0, fmt.Errorf("%s %q is not a duration (e.g. 10s, 1m30s)", what, strings.TrimSpace(s))
		}
		if d < 0 {
			return 0, fmt.Errorf("%s must be >= 0, got %s", what, strings.TrimSpace(s))
		}
		return d, nil
	}
	var err error
	if strings.TrimSpace(from) != "" {
		if w.From, err = dur(from, "FROM"); err != nil {
			return Window{}, err
		}
	}
	if strings.TrimSpace(to) != "" {
		if w.To, err = dur(to, "TO"); err != nil {
			return Window{}, err
		}
		w.HasTo = true
		if w.To <= w.From {
			return Window{}, fmt.Errorf("TO (%s) must be after FROM (%s)", w.To, w.From)
		}
	}
	if w.IsZero() {
		return Window{}, errors.New("[:] is the whole run: leave the window out")
	}
	return w, nil
}

// value reads a figure; ok false when it is missing (or not finite),
// with why when that is not plain absence (a window the facts cannot
// give).
func (r ref) value(f Facts) (float64, bool, string) {
	if !r.win.IsZero() {
		wf, ok := f.(Windowed)
		if !ok {
			return 0, false, "these figures cannot be read over a window"
		}
		sub, err := wf.In(r.win)
		if err != nil {
			return 0, false, err.Error()
		}
		f = sub
	}
	var v float64
	var ok bool
	switch r.kind {
	case refScalar:
		v, ok = f.Value(r.name)
	case refQuantile:
		v, ok = f.Quantile(r.q)
	case refAgg:
		var xs []float64
		xs, ok = f.Series(r.name)
		if ok {
			v, ok = aggregate(r.agg, xs)
		}
	}
	return v, ok && !math.IsNaN(v) && !math.IsInf(v, 0), ""
}

// aggregate applies agg to the samples of xs (NaN entries skipped); ok
// false without any.
func aggregate(agg string, xs []float64) (float64, bool) {
	if agg == "median" {
		return median(xs)
	}
	var n int
	var acc float64
	for _, x := range xs {
		if math.IsNaN(x) {
			continue
		}
		switch {
		case n == 0:
			acc = x
		case agg == "max":
			acc = math.Max(acc, x)
		case agg == "min":
			acc = math.Min(acc, x)
		case agg == "avg":
			acc += x
		case agg == "last":
			acc = x
		}
		n++
	}
	if n == 0 {
		return 0, false
	}
	if agg == "avg" {
		acc /= float64(n)
	}
	return acc, true
}

// median is the middle sample of xs (NaN entries skipped; the mean of
// the two middle ones for an even count); ok false without any.
func median(xs []float64) (float64, bool) {
	ys := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			ys = append(ys, x)
		}
	}
	if len(ys) == 0 {
		return 0, false
	}
	slices.Sort(ys)
	m := len(ys) / 2
	if len(ys)%2 == 1 {
		return ys[m], true
	}
	return (ys[m-1] + ys[m]) / 2, true
}

func (o operand) value(f Facts) (float64, bool, string) {
	if o.ref.kind == refNone {
		return o.factor, true, ""
	}
	v, ok, why := o.ref.value(f)
	return o.factor * v, ok, why
}

// Eval evaluates the threshold on f. A missing figure fails, Detail
// "no figure for X".
func (t Threshold) Eval(f Facts) Result {
	res := Result{Threshold: t.String()}
	if t.op == "" {
		res.Detail = "not a parsed threshold"
		return res
	}
	lv, ok, why := t.lhs.value(f)
	if !ok {
		res.Detail = missing(t.lhs.ref, why)
		return res
	}
	rv, ok, why := t.rhs.value(f)
	if !ok {
		res.Detail = missing(t.rhs.ref, why)
		return res
	}
	res.Value, res.Limit = lv, rv
	switch t.op {
	case "<":
		res.Passed = lv < rv
	case "<=":
		res.Passed = lv <= rv
	case ">":
		res.Passed = lv > rv
	case ">=":
		res.Passed = lv >= rv
	case "==":
		res.Passed = lv == rv
	case "!=":
		res.Passed = lv != rv
	}
	secs := t.lhs.inSeconds()
	limit := format(rv, secs && (t.rhs.ref.kind == refNone || t.rhs.inSeconds()))
	if t.rhs.ref.kind != refNone {
		limit += " (" + t.rhs.String() + ")"
	}
	res.Detail = fmt.Sprintf("%s = %s, want %s %s", t.lhs.ref, format(lv, secs), t.op, limit)
	return res
}

func missing(r ref, why string) string {
	if why != "" {
		return "no figure for " + r.String() + ": " + why
	}
	return "no figure for " + r.String()
}

// format shows a figure: seconds as a duration, others as a number.
func format(v float64, secs bool) string {
	if secs && math.Abs(v) < 1e9 {
		d := time.Duration(math.Round(v * 1e9))
		switch {
		case d >= 10*time.Second:
			d = d.Round(time.Millisecond)
		case d >= time.Millisecond:
			d = d.Round(time.Microsecond)
		}
		return d.String()
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// EvalAll evaluates every threshold; passed is true when all passed.
func EvalAll(ts []Threshold, f Facts) (rs []Result, passed bool) {
	passed = true
	rs = make([]Result, len(ts))
	for i, t := range ts {
		rs[i] = t.Eval(f)
		passed = passed && rs[i].Passed
	}
	return rs, passed
}
