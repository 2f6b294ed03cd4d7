package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Criterion is one pass/fail check of the overload scenario.
type Criterion struct {
	Key  string `json:"key"` // short: completed, connections, capacity, goodput, p99, replies, memory
	Name string `json:"name"`
	Got  string `json:"got"`
	Pass bool   `json:"pass"`
}

// writeCriteria writes a report's criteria, one "pass"/"FAIL" line each
// with names padded to width, then its warnings if any.
func writeCriteria(b *strings.Builder, cs []Criterion, warnings []string, width int) {
	b.WriteString("\ncriteria\n")
	for _, c := range cs {
		v := "FAIL"
		if c.Pass {
			v = "pass"
		}
		fmt.Fprintf(b, "  %-4s  %-*s %s\n", v, width, c.Name, c.Got)
	}
	if len(warnings) > 0 {
		b.WriteString("warnings\n")
		for _, s := range warnings {
			fmt.Fprintf(b, "  - %s\n", s)
		}
	}
}

// allPass reports whether every criterion passed.
func allPass(cs []Criterion) bool {
	for _, c := range cs {
		if !c.Pass {
			return false
		}
	}
	return true
}

// writeJSON writes v as indented JSON; every report's WriteJSON uses it.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// scenarioErr is a configuration error of a scenario; the message names
// the flag.
func scenarioErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrScenario, fmt.Sprintf(format, args...))
}

// OverloadReport is what the overload scenario measured and its verdict.
type OverloadReport struct {
	Scenario    string        `json:"scenario"`
	RunID       string        `json:"run_id"`
	Target      string        `json:"target"`
	Started     time.Time     `json:"started"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	Interrupted bool          `json:"interrupted"`

	Conns        int            `json:"conns"`
	Connected    int            `json:"connected"`
	DialFailures map[string]int `json:"dial_failures"`
	Disconnects  map[string]int `json:"disconnects"` // connections found down at the end

	Units            uint32        `json:"units"`
	Ticks            uint32        `json:"ticks"`
	CriticalFraction float64       `json:"critical_fraction"`
	RequestTimeout   time.Duration `json:"request_timeout_ns"`
	ReplyGrace       time.Duration `json:"reply_grace_ns"`
	BaselineFactor   float64       `json:"baseline_factor"`
	OverloadFactor   float64       `json:"overload_factor"`
	NumCPU           int           `json:"num_cpu"` // the load tool shares these with the cluster on one machine
	GOMAXPROCS       int           `json:"gomaxprocs"`

	// Capacity is C: the served rate of the best capacity-search step that
	// held (see capacitySearch); CapacityClosed is C0, the closed loop's
	// served replies per second, where the search starts.
	Capacity          float64        `json:"capacity_per_s"`
	CapacityClosed    float64        `json:"capacity_closed_loop_per_s"`
	CapacitySteps     []CapacityStep `json:"capacity_steps"`
	CapacitySearchEnd string         `json:"capacity_search_end"` // why the search stopped
	RateCapped        bool           `json:"rate_capped"`         // a phase hit -max-rate (an open loop's rate was cut, or the closed loop spent its budget)

	CapacityPhase *PhaseReport `json:"capacity_phase"`
	BaselinePhase *PhaseReport `json:"baseline_phase"`
	OverloadPhase *PhaseReport `json:"overload_phase"`

	GoodputRatio float64 `json:"goodput_ratio"` // overload goodput / C
	P99Ratio     float64 `json:"p99_ratio"`     // overload p99 of served / baseline p99 of served

	Frames            uint64 `json:"frames"`             // request frames the clients wrote
	Replies           uint64 `json:"replies"`            // replies matched to a waiting request
	LateReplies       uint64 `json:"late_replies"`       // replies after the request gave up
	UnexpectedReplies uint64 `json:"unexpected_replies"` // replies matching no request

	Processes []ProcessUsage `json:"processes"`

	Criteria []Criterion `json:"criteria"`
	Warnings []string    `json:"warnings"`
	Passed   bool        `json:"passed"`
}

// Phases returns the phases that ran, in order.
func (r *OverloadReport) Phases() []*PhaseReport {
	var out []*PhaseReport
	for _, p := range []*PhaseReport{r.CapacityPhase, r.BaselinePhase, r.OverloadPhase} {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// AllPhases returns every phase that ran, in order: Phases with the
// capacity search's steps after the closed loop.
func (r *OverloadReport) AllPhases() []*PhaseReport {
	var out []*PhaseReport
	if r.CapacityPhase != nil {
		out = append(out, r.CapacityPhase)
	}
	for _, st := range r.CapacitySteps {
		if st.Phase != nil {
			out = append(out, st.Phase)
		}
	}
	if r.BaselinePhase != nil {
		out = append(out, r.BaselinePhase)
	}
	if r.OverloadPhase != nil {
		out = append(out, r.OverloadPhase)
	}
	return out
}

// Evaluate computes the ratios and judges the run against cfg's criteria:
// the run completed; capacity was measured; overload goodput ≥
// MinGoodputRatio × C; overload p99 of served requests ≤ MaxP99Ratio × the
// baseline's; every request got exactly one reply (no lost request, the
// counts add up); and, when MaxRSSBytes is set, no sampled cluster process
// grew past it.
// Problems that do not fail the run (a load tool that fell behind, error
// replies) are Warnings.
func (r *OverloadReport) Evaluate(cfg OverloadConfig) {
	r.Criteria, r.Warnings = nil, nil
	add := func(key, name string, pass bool, got string, args ...any) {
		r.Criteria = append(r.Criteria, Criterion{Key: key, Name: name, Got: fmt.Sprintf(got, args...), Pass: pass})
	}
	warn := func(format string, args ...any) { r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...)) }

	complete := !r.Interrupted && r.CapacityPhase != nil && r.BaselinePhase != nil && r.OverloadPhase != nil
	var state string
	switch {
	case r.Interrupted:
		state = "interrupted"
	case complete:
		state = "all three phases ran"
	default:
		state = fmt.Sprintf("stopped after %d of 3 phases", len(r.Phases()))
	}
	add("completed", "the run completed", complete, "%s", state)
	add("connections", "every connection came up", r.Connected == r.Conns && r.Conns > 0, "%d of %d", r.Connected, r.Conns)

	r.GoodputRatio, r.P99Ratio = 0, 0
	add("capacity", "capacity C was measured", r.Capacity > 0, "%.1f served/s (closed loop C0 %.1f/s, %d search steps)",
		r.Capacity, r.CapacityClosed, len(r.CapacitySteps))
	if o := r.OverloadPhase; o != nil && r.Capacity > 0 {
		r.GoodputRatio = o.Goodput / r.Capacity
		add("goodput", fmt.Sprintf("overload goodput >= %.2f x C", cfg.MinGoodputRatio), r.GoodputRatio >= cfg.MinGoodputRatio,
			"%.1f/s = %.2f x C", o.Goodput, r.GoodputRatio)
	} else {
		add("goodput", fmt.Sprintf("overload goodput >= %.2f x C", cfg.MinGoodputRatio), false, "not measured")
	}
	b, o := r.BaselinePhase, r.OverloadPhase
	if b != nil && o != nil && b.Latency.Count > 0 && o.Latency.Count > 0 && b.Latency.P99 > 0 {
		r.P99Ratio = float64(o.Latency.P99) / float64(b.Latency.P99)
		add("p99", fmt.Sprintf("overload p99 of served <= %.1f x baseline p99", cfg.MaxP99Ratio), r.P99Ratio <= cfg.MaxP99Ratio,
			"%s = %.2f x %s", ms(o.Latency.P99), r.P99Ratio, ms(b.Latency.P99))
	} else {
		add("p99", fmt.Sprintf("overload p99 of served <= %.1f x baseline p99", cfg.MaxP99Ratio), false, "not measured (nothing served)")
	}

	sent, answered, lost := 0, 0, 0
	var bad []string
	for _, p := range r.AllPhases() {
		l := Sum(p.Lost)
		sent, answered, lost = sent+p.Sent, answered+p.Answered, lost+l
		if p.Sent != p.Answered+l {
			bad = append(bad, fmt.Sprintf("%s: sent %d != answered %d + lost %d", p.Name, p.Sent, p.Answered, l))
		}
		if Sum(p.Failed) > 0 {
			warn("%s: %d error replies (%s)", p.Name, Sum(p.Failed), formatCounts(p.Failed))
		}
		if p.Mode == "open" {
			d := p.Dispatch
			if d.Unsent > 0 || d.Late > d.Planned/100 {
				warn("%s: the load tool fell behind its schedule: %d of %d requests dispatched late (max lag %s), %d never sent; it shares %d CPUs with the cluster; p99 of served from the due time %s (from the send %s)",
					p.Name, d.Late, d.Planned, ms(d.MaxLag), d.Unsent, r.NumCPU, ms(p.LatencyFromDue.P99), ms(p.Latency.P99))
			}
			if p.SemaphoreWaits > 0 {
				warn("%s: %d times the dispatcher waited for a free slot (%d requests in flight)", p.Name, p.SemaphoreWaits, p.MaxOutstanding)
			}
		}
	}
	if uint64(answered) != r.Replies {
		bad = append(bad, fmt.Sprintf("the clients matched %d replies but %d requests were answered", r.Replies, answered))
	}
	if r.UnexpectedReplies > 0 {
		bad = append(bad, fmt.Sprintf("%d replies matched no request", r.UnexpectedReplies))
	}
	got := fmt.Sprintf("sent %d = answered %d + lost %d", sent, answered, lost)
	if len(bad) > 0 {
		got += "; " + strings.Join(bad, "; ")
	}
	add("replies", "every request got exactly one reply (lost == 0)", lost == 0 && len(bad) == 0 && sent > 0, "%s", got)

	if cfg.MaxRSSBytes > 0 {
		worst, who, n := 0.0, "", 0
		for _, m := range r.Processes {
			if m.Name == SelfName || m.Name == HostName {
				continue // the cluster's memory is judged, not the load tool's
			}
			n++
			if m.RSSMax > worst {
				worst, who = m.RSSMax, m.Name
			}
		}
		add("memory", fmt.Sprintf("every process's RSS <= %s", mib(cfg.MaxRSSBytes)), worst <= cfg.MaxRSSBytes && n > 0,
			"max %s (%s)", mib(worst), who)
	}
	if others, phase := r.otherCPU(); others > 0.25 {
		warn("other processes used %.2f cores of the machine during the %s phase: the figures are not clean", others, phase)
	}
	for _, m := range r.Processes {
		if m.Samples == 0 {
			warn("memory: no sample from %s (%s): %s", m.Name, m.URL, m.LastError)
		}
	}
	if r.RateCapped {
		warn("a phase hit -max-rate %v/s: the offered rate was cut to it, or C (capped by it) may be higher than measured", cfg.MaxRate)
	}
	if n := Sum(r.DialFailures); n > 0 {
		warn("%d connections failed (%s)", n, formatCounts(r.DialFailures))
	}
	if n := Sum(r.Disconnects); n > 0 {
		warn("%d connections were down at the end (%s)", n, formatCounts(r.Disconnects))
	}

	r.Passed = allPass(r.Criteria)
}

// WriteJSON writes the report as indented JSON.
func (r *OverloadReport) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// WriteTable writes the report for people.
func (r *OverloadReport) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "levee overload test: run %s, target %s, elapsed %v", r.RunID, r.Target, r.Elapsed.Round(time.Millisecond))
	if r.Interrupted {
		b.WriteString(", INTERRUPTED")
	}
	fmt.Fprintf(&b, "\n%d connections (%d up); requests: start_battle %d units x %d ticks (DEFAULT), %.0f %% purchases (CRITICAL)\n",
		r.Conns, r.Connected, r.Units, r.Ticks, r.CriticalFraction*100)
	fmt.Fprintf(&b, "request timeout %v (+%v grace for the reply); the load tool shares this machine's %d CPUs (GOMAXPROCS %d) with the cluster\n\n",
		r.RequestTimeout, r.ReplyGrace, r.NumCPU, r.GOMAXPROCS)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tload\ttarget/s\toffered/s\tsent\tserved\tgoodput/s\tp50\tp99\trefused\tfailed\tlost\tlate\tunsent\t")
	for _, p := range r.AllPhases() {
		load, target, late, unsent := fmt.Sprintf("closed, %d at once", p.Concurrency), "-", "-", "-"
		if p.Mode == "open" {
			load = "open, " + r.factorLabel(p.Name)
			target = fmt.Sprintf("%.1f", p.TargetRate)
			late, unsent = fmt.Sprint(p.Dispatch.Late), fmt.Sprint(p.Dispatch.Unsent)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%d\t%d\t%.1f\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t\n", p.Name, load, target, p.OfferedRate,
			p.Sent, p.Served, p.Goodput, ms(p.Latency.P50), ms(p.Latency.P99), Sum(p.Overload), Sum(p.Failed), Sum(p.Lost), late, unsent)
	}
	tw.Flush()
	r.writeLatencies(&b)

	b.WriteString("\n")
	kv := func(k, format string, args ...any) { fmt.Fprintf(&b, "%-26s %s\n", k, fmt.Sprintf(format, args...)) }
	kv("capacity C", "%.1f served/s (closed loop C0 %.1f/s)", r.Capacity, r.CapacityClosed)
	if len(r.CapacitySteps) > 0 || r.CapacitySearchEnd != "" {
		kv("capacity search", "%s", r.CapacitySearchEnd)
		for i, st := range r.CapacitySteps {
			held := "held"
			if !st.Held {
				held = "did not hold"
			}
			kv(fmt.Sprintf("  step %d (%.2f x C0)", i+1, st.Factor), "offered %.1f/s, served %.1f/s (%.0f %%), p99 %s (from due %s): %s",
				st.Rate, st.Served, st.ServedRatio*100, ms(st.P99), ms(st.P99FromDue), held)
		}
	}
	if p := r.BaselinePhase; p != nil {
		kv("baseline", "goodput %.1f/s, served p50 %s p99 %s (from due: p50 %s p99 %s)", p.Goodput,
			ms(p.Latency.P50), ms(p.Latency.P99), ms(p.LatencyFromDue.P50), ms(p.LatencyFromDue.P99))
		kv("baseline by criticality", "critical p99 %s, default p99 %s", ms(p.Critical.Latency.P99), ms(p.Default.Latency.P99))
	}
	if p := r.OverloadPhase; p != nil {
		kv("overload offered", "%.1f/s (target %.1f/s)", p.OfferedRate, p.TargetRate)
		kv("overload goodput", "%.1f/s = %.2f x C", p.Goodput, r.GoodputRatio)
		kv("overload p99 served", "%s = %.2f x baseline p99; answered p99 %s", ms(p.Latency.P99), r.P99Ratio, ms(p.AnsweredLatency.P99))
		kv("overload p99 from due", "served %s, answered %s", ms(p.LatencyFromDue.P99), ms(p.AnsweredLatencyFromDue.P99))
		kv("overload outcomes", "ok %d, business %d%s, refused %d%s, failed %d%s, lost %d%s", p.OK,
			Sum(p.Business), paren(p.Business), Sum(p.Overload), paren(p.Overload), Sum(p.Failed), paren(p.Failed),
			Sum(p.Lost), paren(p.Lost))
		kv("overload by criticality", "critical served %d of %d (p99 %s), default served %d of %d (p99 %s)",
			p.Critical.Served, p.Critical.Sent, ms(p.Critical.Latency.P99),
			p.Default.Served, p.Default.Sent, ms(p.Default.Latency.P99))
		kv("overload in flight", "max %d outstanding, drained %v after the window", p.MaxOutstanding, p.Drained.Round(time.Millisecond))
	}
	sent, answered, lost := 0, 0, 0
	for _, p := range r.AllPhases() {
		sent, answered, lost = sent+p.Sent, answered+p.Answered, lost+Sum(p.Lost)
	}
	kv("replies (all phases)", "sent %d = answered %d + lost %d; matched %d, late %d, unexpected %d",
		sent, answered, lost, r.Replies, r.LateReplies, r.UnexpectedReplies)

	if len(r.Processes) > 0 {
		b.WriteString("\nprocesses (RSS; CPU in cores, of the machine's " + fmt.Sprint(r.NumCPU) + ", averaged over each phase)\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "process\tRSS start\tmax\tmax in overload\tend\tgoroutines start/max/end\tCPU capacity/baseline/overload\tsamples\terrors\t")
		for _, m := range r.Processes {
			g := fmt.Sprintf("%.0f/%.0f/%.0f", m.GoroutinesStart, m.GoroutinesMax, m.GoroutinesEnd)
			if m.Name == HostName {
				g = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t\n", m.Name, mib(m.RSSStart), mib(m.RSSMax),
				mib(m.RSSMaxByPhase[PhaseOverload]), mib(m.RSSEnd), g,
				cores(m.CPUCoresByPhase, PhaseCapacity)+"/"+cores(m.CPUCoresByPhase, PhaseBaseline)+"/"+cores(m.CPUCoresByPhase, PhaseOverload),
				m.Samples, m.Errors)
		}
		tw.Flush()
	}

	writeCriteria(&b, r.Criteria, r.Warnings, 48)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLatencies writes each phase's served latencies from the send and,
// for the open loops, from the due time.
func (r *OverloadReport) writeLatencies(b *strings.Builder) {
	b.WriteString("\nlatency of served requests, from the send (reply - when it was written) and from the due time\n" +
		"(reply - when the open-loop schedule said to send it: a load tool that falls behind cannot hide the cluster's slowness;\n" +
		"the closed-loop capacity phase has no schedule)\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tsend p50\tp90\tp99\tmax\tdue p50\tp90\tp99\tmax\t")
	cols := func(l Latency) string {
		if l.Count == 0 {
			return "-\t-\t-\t-"
		}
		return ms(l.P50) + "\t" + ms(l.P90) + "\t" + ms(l.P99) + "\t" + ms(l.Max)
	}
	for _, p := range r.AllPhases() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", p.Name, cols(p.Latency), cols(p.LatencyFromDue))
	}
	tw.Flush()
}

func (r *OverloadReport) factorLabel(phase string) string {
	switch phase {
	case PhaseBaseline:
		return fmt.Sprintf("%g x C", r.BaselineFactor)
	case PhaseOverload:
		return fmt.Sprintf("%g x C", r.OverloadFactor)
	}
	for _, st := range r.CapacitySteps {
		if st.Phase != nil && st.Phase.Name == phase {
			return fmt.Sprintf("%.2f x C0", st.Factor)
		}
	}
	return phase
}

func paren(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	return " (" + formatCounts(m) + ")"
}

func mib(b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fMiB", b/(1<<20))
}

func cores(m map[string]float64, phase string) string {
	v, ok := m[phase]
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// otherCPU is the most CPU (in cores) that processes other than the sampled
// ones (the tiers and the load tool) used in any phase, and that phase: the
// machine's busy time minus theirs. It is 0 without a machine sample.
func (r *OverloadReport) otherCPU() (float64, string) {
	var host *ProcessUsage
	for i := range r.Processes {
		if r.Processes[i].Name == HostName {
			host = &r.Processes[i]
		}
	}
	if host == nil {
		return 0, ""
	}
	worst, where := 0.0, ""
	for _, p := range r.AllPhases() {
		total, ok := host.CPUCoresByPhase[p.Name]
		if !ok {
			continue
		}
		for _, m := range r.Processes {
			if m.Name != HostName {
				total -= m.CPUCoresByPhase[p.Name]
			}
		}
		if total > worst {
			worst, where = total, p.Name
		}
	}
	return worst, where
}
