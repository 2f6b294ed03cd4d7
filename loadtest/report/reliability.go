package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/leveehq/levee/loadtest/threshold"
)

// Reliability is the header of RELIABILITY.md: how the drills were run.
type Reliability struct {
	Command  string  // the command that ran them ("make drills")
	Machine  string  // what they ran on (cores, memory, CPU model, OS)
	Capacity float64 // the measured capacity the drills' loads are shares of (requests/s)
	Date     string  // when (UTC)
}

// DrillFigures are the figures RELIABILITY.md shows for a drill, in this
// order, when the run has them (a drill's thresholds are shown besides).
var DrillFigures = []string{
	"sent", "lost_replies", "duplicate_replies",
	"fault_goodput_before", "fault_goodput_during", "fault_recovery",
	"max_failed_latency", "unhinted_refusals",
	"fault_attempts_per_request", "fault_request_attempts", "attempts_per_request", "max_attempts",
	"ledger_players", "ledger_acked", "ledger_lost", "ledger_doubled", "ledger_phantom", "ledger_unresolved", "ledger_mismatch",
	"reconnect_peak_ratio", "reconnect_spread", "line_place_kept", "line_place_lost",
}

// DrillSeriesFigures are the per-second series RELIABILITY.md shows for a
// drill, as AGG(series), when the run has them: logic on PostgreSQL's
// leases (loadtest/probe), whose moves a drill on it is about.
var DrillSeriesFigures = [][2]string{
	{"min", "logic_shards_held"}, {"last", "logic_shards_held"}, {"max", "logic_shards_without_owner"},
	{"max", "logic_lease_losses"}, {"max", "logic_fenced_commits"}, {"max", "logic_fenced_purges"},
}

// WriteReliability writes RELIABILITY.md: how the drills were run, then a
// table of drill, its faults, its thresholds with the measured values and
// pass/fail, and its figures, one row per run; then each run's faults and
// the events they recorded.
func WriteReliability(w io.Writer, h Reliability, runs []*Run) error {
	ew := &errWriter{w: w}
	passed, judged := 0, 0
	for _, r := range runs {
		if len(r.Criteria) == 0 {
			continue // a reference run (the naive client's), not judged
		}
		judged++
		if r.passed() {
			passed++
		}
	}
	ew.printf("# Reliability: the failure drills\n\n")
	ew.printf("Written by `%s` (scripts/drills.sh, `loadtest reliability`); do not edit by hand.\n\n", h.Command)
	ew.printf("- **When:** %s\n", h.Date)
	ew.printf("- **Machine:** %s. The load tool and the compose cluster shared its cores in every drill.\n", h.Machine)
	if h.Capacity > 0 {
		ew.printf("- **Capacity:** %.0f requests/s, measured first with the drills' mix at overload (`drills/capacity.yaml`); each drill's peak load is the multiple of it its file's `offered:` names.\n", h.Capacity)
	}
	ew.printf("- **Result:** %d of %d drills passed", passed, judged)
	if ref := len(runs) - judged; ref > 0 {
		ew.printf(" (and %d reference runs, without thresholds, for comparison)", ref)
	}
	ew.printf(".\n\n")
	ew.printf("| drill | fault | thresholds (measured) | figures | result |\n|---|---|---|---|---|\n")
	for _, r := range runs {
		ew.printf("| **%s**<br>%s | %s | %s | %s | %s |\n", cell(r.Meta.Scenario), cell(r.Meta.Description),
			cell(strings.Join(r.faultSteps(), "; ")), r.thresholdCell(), r.figureCell(), r.resultCell())
	}
	ew.printf("\n## What each drill's faults did\n\n")
	for _, r := range runs {
		ew.printf("**%s**\n\n", cell(r.Meta.Scenario))
		n := 0
		for _, e := range r.Events {
			if e.Kind != EventFault {
				continue
			}
			ew.printf("- T+%.1fs %s\n", e.T, e.What)
			n++
		}
		if n == 0 {
			ew.printf("- no fault events recorded\n")
		}
		ew.printf("\n")
	}
	return ew.err
}

// passed: every criterion held and the run was not cut short.
func (r *Run) passed() bool {
	for _, c := range r.Criteria {
		if !c.Passed {
			return false
		}
	}
	return len(r.Points) > 0
}

func (r *Run) resultCell() string {
	switch {
	case len(r.Criteria) == 0 && len(r.Points) > 0:
		return "reference (no thresholds)"
	case r.passed():
		return "**PASS**"
	}
	return "**FAIL**"
}

// faultSteps are the run's faults as their end events say them (the
// timeline's label dropped): "T+20-23s fault kill battle-1 (...): over
// after 2.6 s".
func (r *Run) faultSteps() []string {
	var out []string
	for _, e := range r.Events {
		if e.Kind != EventFault || e.End == 0 {
			continue
		}
		what := e.What
		if _, rest, ok := strings.Cut(what, " fault "); ok {
			what = rest
		}
		out = append(out, fmt.Sprintf("T+%.0f-%.0fs %s", e.T, e.End, what))
	}
	return out
}

func (r *Run) thresholdCell() string {
	var parts []string
	for _, c := range r.Criteria {
		mark := "✓"
		if !c.Passed {
			mark = "✗"
		}
		v := c.Detail
		if v == "" {
			v = fmt.Sprintf("%.4g", c.Value)
		}
		parts = append(parts, fmt.Sprintf("%s `%s` (%s)", mark, c.Threshold, v))
	}
	if len(parts) == 0 {
		return "none"
	}
	return cell(strings.Join(parts, "<br>"))
}

func (r *Run) figureCell() string {
	f := r.Facts()
	var parts []string
	for _, name := range DrillFigures {
		v, ok := f.Value(name)
		if !ok || math.IsNaN(v) {
			continue
		}
		s := fmt.Sprintf("%.4g", v)
		if threshold.InSeconds(name) {
			s += " s"
		}
		parts = append(parts, name+" "+s)
	}
	for _, as := range DrillSeriesFigures {
		xs, ok := f.Series(as[1])
		if !ok {
			continue
		}
		if v, ok := aggregateSeries(as[0], xs); ok {
			parts = append(parts, fmt.Sprintf("%s(%s) %.4g", as[0], as[1], v))
		}
	}
	if q, ok := f.Quantile(99); ok {
		parts = append(parts, fmt.Sprintf("p99 %.0f ms", q*1000))
	}
	return cell(strings.Join(parts, "<br>"))
}

// aggregateSeries is min, max or last over the samples of xs (NaN: a
// second without one, skipped); false without any.
func aggregateSeries(agg string, xs []float64) (float64, bool) {
	v, n := math.NaN(), 0
	for _, x := range xs {
		if math.IsNaN(x) {
			continue
		}
		switch {
		case n == 0, agg == "last", agg == "min" && x < v, agg == "max" && x > v:
			v = x
		}
		n++
	}
	return v, n > 0
}

// cell escapes a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
