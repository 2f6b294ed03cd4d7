package report

import (
	"math"

	"github.com/leveehq/levee/loadtest/probe"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/threshold"
)

// Facts are the run's figures by the names of threshold.Scalars and
// threshold.SeriesNames:
//
//   - counts (sent, ok, business, refused, failed, lost_replies, arrived,
//     admitted, left, dial_failures, reconnects) are totals, zero when
//     nothing was counted; answered is ok + business + refused + failed;
//   - the line's (line.go): max_status_gap = the longest gap between two
//     queue statuses a waiting player saw, seconds (HistStatusGap; missing
//     when nobody waited); order_inversions and order_pairs = the pairs of
//     players surely admitted against their arrival order and the surely
//     ordered pairs (Fairness.SureInversions, SurePairs; missing without
//     Fairness, so also inside a window);
//   - error_rate = (failed + lost) / sent, refused_rate = refused / sent
//     (missing when nothing was sent);
//   - goodput = ok replies per wall second over the run; capacity =
//     Meta.Capacity (missing when 0); duration = wall seconds covered;
//   - ledger_* are the ledger check's counters (missing when no
//     "ledger_checks" was counted: the run kept no ledger), replay_* the
//     replay check's (missing without "replay_checks"); attempts_per_request = sends on the wire / original
//     requests over the attempts counters (record.Attempts), max_attempts
//     the most sends of one (both missing when none was counted);
//   - connected = the most players connected at once; max_wait = the
//     longest wait in line in seconds (0 when players were admitted
//     without a recorded wait; missing when nobody was);
//   - series have one entry per point (per wall second), NaN when the
//     second has no sample: connected and waiting (levels), admitted (per
//     second), rps (sent per second), goodput (ok per second), attempts
//     (sends per original request counted that second), p99 (of
//     "lat", seconds), line_rate (LevelLineRate: the configured release
//     rate, admissions per second), the server levels by their names, cpu
//     = the max of cpu_gate, cpu_logic and cpu_battle that second (cores),
//     and mix_served the requests/s of the mix served in full that second
//     (its scarcest kind's served replies / its share: mixServed).
//
// Quantile is of all served requests' latency from send, in seconds.
func (r *Run) Facts() threshold.Facts {
	f := &facts{r: r, sum: r.Summary}
	if f.sum.Counters == nil { // a Run built in memory, not summarized yet
		f.sum = Summarize(r.Points)
	}
	return f
}

type facts struct {
	r       *Run
	sum     Summary
	lat     *record.Hist // merged lazily
	redials *Redials     // likewise
}

var _ threshold.Facts = (*facts)(nil)

// counterFacts maps scalar names to the counter they total.
var counterFacts = map[string]string{
	"sent": "sent", "ok": "ok", "business": "business", "refused": "refused", "failed": "failed",
	"lost_replies": "lost", "arrived": "arrived", "admitted": "admitted", "left": "left",
	"dial_failures": "dial_failures", "reconnects": "reconnects",
	"duplicate_replies": "duplicate_replies", "unhinted_refusals": "unhinted_refusals",
	"ledger_players": "ledger_players", "ledger_acked": "ledger_acked", "ledger_lost": "ledger_lost",
	"ledger_doubled": "ledger_doubled", "ledger_phantom": "ledger_phantom", "ledger_unresolved": "ledger_unresolved",
	"ledger_mismatch": "ledger_mismatch", "ledger_unchecked": "ledger_unchecked",
	"server_closes": CounterServerCloses, "server_closes_in_line": CounterClosesInLine,
	"replay_checked": "replay_checked", "replay_fresh": "replay_fresh", "replay_failed": "replay_failed",
	"replay_unchecked": "replay_unchecked",
}

// replayFacts are missing, not 0, when the run made no replay check: no
// load process counted a "replay_checks".
var replayFacts = map[string]bool{"replay_checked": true, "replay_fresh": true, "replay_failed": true, "replay_unchecked": true}

// ledgerFacts are missing, not 0, when the run kept no ledger: no load
// process counted a "ledger_checks" (one per process whose check ran).
var ledgerFacts = map[string]bool{"ledger_players": true, "ledger_acked": true, "ledger_lost": true,
	"ledger_doubled": true, "ledger_phantom": true, "ledger_unresolved": true, "ledger_mismatch": true,
	"ledger_unchecked": true}

// attempts sums the attempts counters (record.Attempts) of counters:
// original requests, their sends in all, the most sends of one.
func attempts(counters map[string]int64) (requests, sends int64, most int) {
	return attemptsBy(counters, record.AttemptsOf)
}

// attemptsBy is attempts over the counters that parse reads (record's
// AttemptsOf or FaultAttemptsOf).
func attemptsBy(counters map[string]int64, parse func(string) (int, bool)) (requests, sends int64, most int) {
	for k, v := range counters {
		if n, ok := parse(k); ok && v > 0 {
			requests += v
			sends += v * int64(n)
			most = max(most, n)
		}
	}
	return
}

func (f *facts) Value(name string) (float64, bool) {
	c := f.sum.Counters
	if k, ok := counterFacts[name]; ok {
		if ledgerFacts[name] && c["ledger_checks"] == 0 || replayFacts[name] && c["replay_checks"] == 0 {
			return 0, false
		}
		return float64(c[k]), true
	}
	if v, known, ok := f.lineFigure(name); ok {
		return v, known
	}
	sent := float64(c["sent"])
	elapsed := f.sum.Elapsed
	for _, ff := range FaultFigures {
		if name == ff {
			return f.r.faultFigure(name, f.sum)
		}
	}
	for _, mf := range MemoryFigures {
		if name == mf {
			return f.r.memoryFigure(name)
		}
	}
	for _, rf := range RedialFigures {
		if name == rf {
			if f.redials == nil {
				rd := f.r.redials(f.sum)
				f.redials = &rd
			}
			return f.redials.Figure(name)
		}
	}
	switch name {
	case "answered":
		return float64(c["ok"] + c["business"] + c["refused"] + c["failed"]), true
	case "error_rate":
		if sent == 0 {
			return 0, false
		}
		return float64(c["failed"]+c["lost"]) / sent, true
	case "refused_rate":
		if sent == 0 {
			return 0, false
		}
		return float64(c["refused"]) / sent, true
	case "goodput":
		if elapsed == 0 {
			return 0, false
		}
		return float64(c["ok"]) / elapsed, true
	case "capacity":
		return f.r.Meta.Capacity, f.r.Meta.Capacity > 0
	case "duration":
		return elapsed, len(f.r.Points) > 0
	case "connected":
		v, ok := f.sum.Peak["connected"]
		return v, ok
	case "attempts_per_request", "max_attempts":
		reqs, sends, most := attempts(c)
		if reqs == 0 {
			return 0, false
		}
		if name == "max_attempts" {
			return float64(most), true
		}
		return float64(sends) / float64(reqs), true
	case "max_wait":
		if f.sum.Wait.Count > 0 {
			return f.sum.Wait.Max, true
		}
		return 0, c["admitted"] > 0
	}
	return 0, false
}

// levelSeries are series read straight from the points' levels.
var levelSeries = map[string]bool{
	"connected": true, "waiting": true, "logic_queue_depth": true, "battle_p99": true,
	"gate_connections": true, "gate_waiting": true, "gate_connections_peak": true, "gate_connection_cap": true,
	"goroutines_gate": true, "goroutines_logic": true, "goroutines_battle": true, "logic_store_errors": true, "cpu_gate": true, "cpu_logic": true, "cpu_battle": true,
	"rss_gate_mb": true, "rss_logic_mb": true, "rss_battle_mb": true, LevelLineRate: true, probe.ServerRSS: true,
	probe.GatePushes: true, probe.GatePings: true, "cpu_loadtest": true,
	probe.LogicShardsHeld: true, probe.LogicShardsWithoutOwner: true, probe.LogicLeaseLosses: true,
	probe.LogicShardMoves: true, probe.LogicFencedCommits: true, probe.LogicFencedPurges: true,
}

var cpuTiers = []string{"cpu_gate", "cpu_logic", "cpu_battle"}

func (f *facts) Series(name string) ([]float64, bool) {
	if name == "mix_served" {
		return mixServed(f.r.Points, f.r.Meta.Mix)
	}
	return series(f.r.Points, name)
}

// series is the per-second series name over points (see Facts).
func series(points []record.Point, name string) ([]float64, bool) {
	out := make([]float64, len(points))
	var one func(p record.Point) float64
	switch {
	case levelSeries[name]:
		one = func(p record.Point) float64 {
			if v, ok := p.Levels[name]; ok {
				return v
			}
			return math.NaN()
		}
	case name == "cpu":
		one = func(p record.Point) float64 {
			m := math.NaN()
			for _, k := range cpuTiers {
				if v, ok := p.Levels[k]; ok && !(v <= m) {
					m = v
				}
			}
			return m
		}
	case name == "rps":
		one = func(p record.Point) float64 { return float64(p.Counters["sent"]) }
	case name == "goodput":
		one = func(p record.Point) float64 { return float64(p.Counters["ok"]) }
	case name == "held":
		one = heldAt
	case name == "admitted":
		one = func(p record.Point) float64 { return float64(p.Counters["admitted"]) }
	case name == "attempts":
		one = func(p record.Point) float64 {
			reqs, sends, _ := attempts(p.Counters)
			if reqs == 0 {
				return math.NaN()
			}
			return float64(sends) / float64(reqs)
		}
	case name == "p99":
		one = func(p record.Point) float64 {
			h := p.Hists[record.HistLat]
			if h.Count() == 0 {
				return math.NaN()
			}
			return h.Quantile(0.99).Seconds()
		}
	default:
		return nil, false
	}
	for i, p := range points {
		out[i] = one(p)
	}
	return out, true
}

func (f *facts) Quantile(q float64) (float64, bool) {
	if f.lat == nil {
		f.lat = record.NewHist()
		for _, p := range f.r.Points {
			f.lat.Merge(p.Hists[record.HistLat])
		}
	}
	if f.lat.Count() == 0 || !(q > 0 && q <= 1) {
		return 0, false
	}
	return f.lat.Quantile(q).Seconds(), true
}

// Evaluate judges the run on ts; passed when every one passes.
func Evaluate(r *Run, ts []threshold.Threshold) ([]Criterion, bool) {
	rs, passed := threshold.EvalAll(ts, r.Facts())
	cs := make([]Criterion, len(rs))
	for i, x := range rs {
		cs[i] = Criterion{Threshold: x.Threshold, Passed: x.Passed, Value: x.Value, Limit: x.Limit, Detail: x.Detail}
	}
	return cs, passed
}
