package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// ReadOverloadReport reads a report written with OverloadReport.WriteJSON.
func ReadOverloadReport(path string) (*OverloadReport, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r OverloadReport
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Scenario != "overload" {
		return nil, fmt.Errorf("%s: not an overload report (scenario %q)", path, r.Scenario)
	}
	return &r, nil
}

// WriteComparison writes overload reports side by side, one column each
// under its label: the figures the criteria and BENCHMARKS.md use.
func WriteComparison(w io.Writer, labels []string, reps []*OverloadReport) error {
	if len(labels) != len(reps) {
		return fmt.Errorf("loadtest: %d labels for %d reports", len(labels), len(reps))
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(name string, f func(r *OverloadReport) string) {
		fmt.Fprint(tw, name)
		for _, r := range reps {
			fmt.Fprint(tw, "\t", f(r))
		}
		fmt.Fprintln(tw, "\t")
	}
	phase := func(name string, f func(p *PhaseReport) string) {
		row(name, func(r *OverloadReport) string {
			for _, p := range r.Phases() {
				if strings.HasPrefix(name, p.Name) {
					return f(p)
				}
			}
			return "-"
		})
	}
	// p99s is a phase's served p99 from the send beside the one from the
	// due time (coordinated omission corrected).
	p99s := func(p *PhaseReport) string {
		due := "-"
		if p.LatencyFromDue.Count > 0 {
			due = ms(p.LatencyFromDue.P99)
		}
		return ms(p.Latency.P99) + " / " + due
	}
	fmt.Fprint(tw, "figure")
	for _, l := range labels {
		fmt.Fprint(tw, "\t", l)
	}
	fmt.Fprintln(tw, "\t")
	row("capacity C (served/s)", func(r *OverloadReport) string { return fmt.Sprintf("%.1f", r.Capacity) })
	row("capacity C0, closed loop (served/s)", func(r *OverloadReport) string { return fmt.Sprintf("%.1f", r.CapacityClosed) })
	row("capacity search steps (held)", func(r *OverloadReport) string {
		held := 0
		for _, st := range r.CapacitySteps {
			if st.Held {
				held++
			}
		}
		return fmt.Sprintf("%d (%d)", len(r.CapacitySteps), held)
	})
	phase("capacity p99 served", func(p *PhaseReport) string { return ms(p.Latency.P99) })
	phase("baseline goodput/s", func(p *PhaseReport) string { return fmt.Sprintf("%.1f", p.Goodput) })
	phase("baseline p50 / p99 served", func(p *PhaseReport) string {
		return ms(p.Latency.P50) + " / " + ms(p.Latency.P99)
	})
	phase("baseline p99 served, from send / from due", p99s)
	phase("overload offered/s (target)", func(p *PhaseReport) string {
		return fmt.Sprintf("%.1f (%.1f)", p.OfferedRate, p.TargetRate)
	})
	phase("overload goodput/s", func(p *PhaseReport) string { return fmt.Sprintf("%.1f", p.Goodput) })
	row("overload goodput / C", func(r *OverloadReport) string { return fmt.Sprintf("%.2f", r.GoodputRatio) })
	phase("overload p50 / p99 served", func(p *PhaseReport) string {
		return ms(p.Latency.P50) + " / " + ms(p.Latency.P99)
	})
	phase("overload p99 served, from send / from due", p99s)
	row("overload p99 / baseline p99", func(r *OverloadReport) string { return fmt.Sprintf("%.2f", r.P99Ratio) })
	phase("overload p99 answered", func(p *PhaseReport) string { return ms(p.AnsweredLatency.P99) })
	phase("overload served (crit/default)", func(p *PhaseReport) string {
		return fmt.Sprintf("%d (%d/%d)", p.Served, p.Critical.Served, p.Default.Served)
	})
	phase("overload refused", func(p *PhaseReport) string { return fmt.Sprintf("%d%s", Sum(p.Overload), paren(p.Overload)) })
	phase("overload failed", func(p *PhaseReport) string { return fmt.Sprintf("%d%s", Sum(p.Failed), paren(p.Failed)) })
	phase("overload lost", func(p *PhaseReport) string { return fmt.Sprintf("%d%s", Sum(p.Lost), paren(p.Lost)) })
	phase("overload late dispatch / unsent", func(p *PhaseReport) string {
		return fmt.Sprintf("%d / %d", p.Dispatch.Late, p.Dispatch.Unsent)
	})
	phase("overload max in flight", func(p *PhaseReport) string { return fmt.Sprint(p.MaxOutstanding) })
	row("late replies (all phases)", func(r *OverloadReport) string { return fmt.Sprint(r.LateReplies) })
	var procs []string
	for _, r := range reps {
		for _, m := range r.Processes {
			if !slices.Contains(procs, m.Name) {
				procs = append(procs, m.Name)
			}
		}
	}
	usage := func(r *OverloadReport, name string) *ProcessUsage {
		for i := range r.Processes {
			if r.Processes[i].Name == name {
				return &r.Processes[i]
			}
		}
		return nil
	}
	for _, name := range procs {
		if name != HostName {
			row(name+" RSS start / max", func(r *OverloadReport) string {
				if m := usage(r, name); m != nil {
					return mib(m.RSSStart) + " / " + mib(m.RSSMax)
				}
				return "-"
			})
			row(name+" goroutines max", func(r *OverloadReport) string {
				if m := usage(r, name); m != nil {
					return fmt.Sprintf("%.0f", m.GoroutinesMax)
				}
				return "-"
			})
		}
		row(name+" CPU cores in overload", func(r *OverloadReport) string {
			if m := usage(r, name); m != nil {
				return cores(m.CPUCoresByPhase, PhaseOverload)
			}
			return "-"
		})
	}
	row("other processes' CPU (worst phase)", func(r *OverloadReport) string {
		if v, phase := r.otherCPU(); phase != "" {
			return fmt.Sprintf("%.2f cores (%s)", v, phase)
		}
		return "-"
	})
	row("elapsed", func(r *OverloadReport) string { return r.Elapsed.Round(time.Second).String() })
	row("verdict", func(r *OverloadReport) string {
		if r.Passed {
			return "PASS"
		}
		var failed []string
		for _, c := range r.Criteria {
			if !c.Pass {
				failed = append(failed, c.Key)
			}
		}
		return "FAIL (" + strings.Join(failed, ", ") + ")"
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}
