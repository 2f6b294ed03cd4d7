package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/leveehq/levee/loadtest/record"
)

// The status words of a minute (see the package doc).
const (
	StatusNormal   = "normal"
	StatusQueueing = "queueing"
	StatusBacklog  = "backlog"
	StatusFailing  = "failing"
)

// The seed's bounds behind the status words.
const (
	failingErrorShare = 0.01 // failed / sent
	failingP99        = 1.0  // seconds
	backlogQueueDepth = 100
	backlogBattleP99  = 0.2 // seconds
)

// minute is one row of the table: a minute of scenario time.
type minute struct {
	Index              int // minute of scenario time since the start
	Label              string
	Seconds            int   // wall seconds (points) in it
	Arrived, Admitted  int64 // cumulative through its end
	Connected, Waiting float64
	MaxWaiting         float64
	CPU                [3]float64 // max per tier (gate, logic, battle); NaN = no figure
	QueueDepth         float64    // max logic_queue_depth; NaN = no figure
	BattleP99          float64    // max battle_p99, seconds; NaN = no figure
	Sent, OK, Refused  int64
	Failed, Lost       int64
	P99                float64 // of lat, seconds; NaN = no replies
	Status             string
}

// minuteOf is the scenario minute wall second t falls in.
func (r *Run) minuteOf(t int) int {
	return int(math.Floor(float64(t)*r.speed()/60 + 1e-9))
}

// scenarioLabel formats scenario second s: relative to T+0 when the run has
// one ("T-5:00", "T+0:00"), else from the start ("00:00").
func (r *Run) scenarioLabel(s float64) string {
	if r.Meta.T0 > 0 {
		rel := s - r.Meta.T0*r.speed()
		sign := "+"
		if rel < -0.5 {
			sign, rel = "-", -rel
		}
		n := int(math.Round(rel))
		return fmt.Sprintf("T%s%d:%02d", sign, n/60, n%60)
	}
	n := int(math.Round(s))
	return fmt.Sprintf("%02d:%02d", n/60, n%60)
}

func maxNaN(m, v float64) float64 {
	if math.IsNaN(m) || v > m {
		return v
	}
	return m
}

// minutes groups the run's points by scenario minute.
func (r *Run) minutes() []minute {
	var ms []minute
	var arrived, admitted int64
	var connected, waiting float64
	var lat *record.Hist
	finish := func() {
		if len(ms) == 0 {
			return
		}
		m := &ms[len(ms)-1]
		m.Arrived, m.Admitted, m.Connected, m.Waiting = arrived, admitted, connected, waiting
		m.P99 = math.NaN()
		if lat.Count() > 0 {
			m.P99 = lat.Quantile(0.99).Seconds()
		}
		m.Status = m.status()
	}
	for _, p := range r.Points {
		i := r.minuteOf(p.T)
		if len(ms) == 0 || ms[len(ms)-1].Index != i {
			finish()
			nan := math.NaN()
			ms = append(ms, minute{Index: i, Label: r.scenarioLabel(float64(i * 60)),
				CPU: [3]float64{nan, nan, nan}, QueueDepth: nan, BattleP99: nan})
			lat = record.NewHist()
		}
		m := &ms[len(ms)-1]
		m.Seconds++
		c := p.Counters
		arrived += c["arrived"]
		admitted += c["admitted"]
		m.Sent += c["sent"]
		m.OK += c["ok"]
		m.Refused += c["refused"]
		m.Failed += c["failed"]
		m.Lost += c["lost"]
		if v, ok := p.Levels["connected"]; ok {
			connected = v
		}
		if v, ok := p.Levels["waiting"]; ok {
			waiting = v
			m.MaxWaiting = max(m.MaxWaiting, v)
		}
		for j, k := range cpuTiers {
			if v, ok := p.Levels[k]; ok {
				m.CPU[j] = maxNaN(m.CPU[j], v)
			}
		}
		if v, ok := p.Levels["logic_queue_depth"]; ok {
			m.QueueDepth = maxNaN(m.QueueDepth, v)
		}
		if v, ok := p.Levels["battle_p99"]; ok {
			m.BattleP99 = maxNaN(m.BattleP99, v)
		}
		lat.Merge(p.Hists[record.HistLat])
	}
	finish()
	return ms
}

// status is the minute's status word (see the package doc).
func (m *minute) status() string {
	switch {
	case m.Lost > 0 || (m.Sent > 0 && float64(m.Failed)/float64(m.Sent) > failingErrorShare) || m.P99 > failingP99:
		return StatusFailing
	case m.QueueDepth >= backlogQueueDepth || m.BattleP99 >= backlogBattleP99:
		return StatusBacklog
	case m.MaxWaiting > 0:
		return StatusQueueing
	}
	return StatusNormal
}

func num(v float64, format string) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func ms(seconds float64) string {
	if math.IsNaN(seconds) {
		return "-"
	}
	return fmt.Sprintf("%.0fms", seconds*1000)
}

func msq(seconds float64) string {
	switch {
	case seconds < 0.01:
		return fmt.Sprintf("%.2fms", seconds*1000)
	case seconds < 1:
		return fmt.Sprintf("%.1fms", seconds*1000)
	}
	return fmt.Sprintf("%.2fs", seconds)
}

// WriteTable writes the run's report as text: a header, one row per
// minute of scenario time (players arrived and admitted so far, connected
// and waiting at the minute's end, CPU per tier and logic queue depth and
// battle p99 at their worst, ok and refused replies per second, lost
// replies, the status word), latency percentiles from send and from due,
// outcomes by operation and class, and a ✓/✗ line per criterion.
func WriteTable(w io.Writer, r *Run) error {
	ew := &errWriter{w: w}
	writeTable(ew, r)
	return ew.err
}

func writeTable(w *errWriter, r *Run) {
	m := r.Meta
	title := cmp.Or(m.Scenario, "run")
	if m.Label != "" {
		title += " (" + m.Label + ")"
	}
	w.printf("%s: scale %g, speed %g, %.0f s of wall time", title, cmp.Or(m.Scale, 1), r.speed(), r.Summary.Elapsed)
	if !m.Started.IsZero() {
		w.printf(", started %s", m.Started.UTC().Format("2006-01-02 15:04:05Z"))
	}
	w.printf("\n")
	if s := m.sizing(); s != "" {
		w.printf("%s\n", s)
	}
	if m.Description != "" {
		w.printf("%s\n", m.Description)
	}
	w.printf("\n")

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "time\tarrived\tconnected\twaiting\tadmitted\tcpu gate\tcpu logic\tcpu battle\tqueue\tbattle p99\tok/s\trefused/s\tlost\tstatus\t")
	for _, mi := range r.minutes() {
		secs := float64(max(mi.Seconds, 1))
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%d\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%d\t%s\t\n",
			mi.Label, mi.Arrived, mi.Connected, mi.Waiting, mi.Admitted,
			num(mi.CPU[0], "%.2f"), num(mi.CPU[1], "%.2f"), num(mi.CPU[2], "%.2f"),
			num(mi.QueueDepth, "%.0f"), ms(mi.BattleP99),
			float64(mi.OK)/secs, float64(mi.Refused)/secs, mi.Lost, mi.Status)
	}
	if err := tw.Flush(); err != nil && w.err == nil {
		w.err = err
	}

	s := r.Summary
	w.printf("\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency\tp50\tp90\tp99\tp99.9\tmax\tcount\t")
	for _, l := range []struct {
		name string
		q    Quantiles
	}{{"served, from send", s.Latency}, {"served, from due", s.LatencyDue}, {"refused, from send", s.Refused}, {"wait in line", s.Wait}} {
		if l.q.Count == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", l.name, msq(l.q.P50), msq(l.q.P90), msq(l.q.P99), msq(l.q.P999), msq(l.q.Max), l.q.Count)
	}
	if err := tw.Flush(); err != nil && w.err == nil {
		w.err = err
	}

	writeOutcomes(w, s.Counters)
	writeEvents(w, r)
	writeRedials(w, r)
	writeMemory(w, r)

	if len(r.Criteria) > 0 {
		w.printf("\nthresholds\n")
		for _, c := range r.Criteria {
			mark := "✓"
			if !c.Passed {
				mark = "✗"
			}
			w.printf("  %s %s", mark, c.Threshold)
			if c.Detail != "" {
				w.printf("  (%s)", c.Detail)
			} else {
				w.printf("  (%.4g vs %.4g)", c.Value, c.Limit)
			}
			w.printf("\n")
		}
	}
	writeLoad(w, r)
	for _, warn := range r.Warnings {
		w.printf("warning: %s\n", warn)
	}
}

// writeEvents writes the timeline: every event in the order it happened
// at its scenario time, with its kind (line, fault) and, for one that
// lasted, when it was over. A fault that was skipped says so.
func writeEvents(w *errWriter, r *Run) {
	if len(r.Events) == 0 {
		return
	}
	w.printf("\ntimeline\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	skipped := 0
	for _, e := range r.Events {
		at := r.scenarioLabel(e.T * r.speed())
		if e.End > e.T {
			at += "-" + r.scenarioLabel(e.End*r.speed())
		}
		kind := cmp.Or(e.Kind, "-")
		if e.Kind == EventFault && strings.Contains(e.What, ": skipped, ") {
			skipped++
		}
		fmt.Fprintf(tw, "  at %s\t%s\t%s\n", at, kind, e.What)
	}
	if err := tw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	if skipped > 0 {
		w.printf("%d fault step(s) skipped: no fault was injected for them\n", skipped)
	}
}

// writeRedials writes, when the server closed players' connections, the
// histogram of their first redials (count per second after the close)
// and what became of the places of those who were waiting in line.
func writeRedials(w *errWriter, r *Run) {
	rd := r.redials(r.Summary)
	if rd.Closes == 0 {
		return
	}
	w.printf("\nserver closes: %d (%d waiting in line); first redial within %s of the close", rd.Closes, rd.InLine, msq(rd.Spread.Seconds()))
	if rd.NoRedial > 0 {
		w.printf(", %d never redialed", rd.NoRedial)
	}
	w.printf("\n")
	if rd.First() > 0 {
		peak := slices.Max(rd.After)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  s after close\tfirst redials\t")
		for s, c := range rd.After {
			fmt.Fprintf(tw, "  %d-%d\t%d\t%s\n", s, s+1, c, strings.Repeat("#", int((40*c+peak-1)/peak)))
		}
		if err := tw.Flush(); err != nil && w.err == nil {
			w.err = err
		}
	}
	if rd.InLine > 0 {
		w.printf("places in line: %d kept, %d lost, %d not told again\n", rd.Kept, rd.Lost, rd.Unknown)
	}
}

// writeLoad writes the load processes and the fairness of the gates'
// admission lines, when the run has them.
func writeLoad(w *errWriter, r *Run) {
	if len(r.Workers) > 1 {
		w.printf("\nload processes: %d", len(r.Workers))
		for _, wk := range r.Workers {
			w.printf("; #%d %d players (peak %d", wk.Index, wk.Players, wk.Peak)
			if wk.Source != "" {
				w.printf(", from %s", wk.Source)
			}
			if wk.Capped > 0 {
				w.printf(", %d not started: cap", wk.Capped)
			}
			w.printf(")")
		}
		w.printf("\n")
	}
	f := r.Fairness
	if f == nil || f.Admitted < 2 {
		return
	}
	w.printf("\nadmission order (%d gate(s), %d of %d players admitted): %d pairs admitted out of arrival order by more than %d ms (%.3g%% of pairs), %d of them within one gate\n",
		f.Gates, f.Admitted, f.Players, f.Inversions, f.SlackMs, 100*f.InversionShare, f.InversionsWithinGates)
	w.printf("surely out of order (by the gates' waited_ms, within one gate): %d of %d surely ordered pairs\n", f.SureInversions, f.SurePairs)
	if f.SpreadP50Ms >= 0 {
		w.printf("waits of players who arrived in the same second differ by %s (median over the seconds; at most %s); within one gate by %s\n",
			msq(float64(f.SpreadP50Ms)/1000), msq(float64(f.SpreadMaxMs)/1000), msq(float64(f.SpreadWithinGateP50Ms)/1000))
	}
}

var classOrder = []string{"ok", "business", "refused", "failed", "lost"}

// writeOutcomes writes the "<op>/<class>" and "crit/<crit>/<class>"
// counters as tables, and the reasons.
func writeOutcomes(w *errWriter, c map[string]int64) {
	rows := map[string]map[string]int64{}
	var reasons []string
	for k, v := range c {
		if r, ok := strings.CutPrefix(k, "reason/"); ok {
			reasons = append(reasons, r)
			continue
		}
		i := strings.LastIndexByte(k, '/')
		if i <= 0 || !slices.Contains(classOrder, k[i+1:]) {
			continue
		}
		row := k[:i]
		if rows[row] == nil {
			rows[row] = map[string]int64{}
		}
		rows[row][k[i+1:]] += v
	}
	if len(rows) == 0 {
		return
	}
	names := make([]string, 0, len(rows))
	for k := range rows {
		names = append(names, k)
	}
	// Operations first, then criticalities.
	isCrit := func(s string) int {
		if strings.HasPrefix(s, "crit/") {
			return 1
		}
		return 0
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(isCrit(a), isCrit(b)), strings.Compare(a, b))
	})
	w.printf("\noutcomes\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\t"+strings.Join(classOrder, "\t")+"\t")
	for _, n := range names {
		fmt.Fprint(tw, n+"\t")
		for _, cl := range classOrder {
			fmt.Fprintf(tw, "%d\t", rows[n][cl])
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	if len(reasons) > 0 {
		slices.Sort(reasons)
		w.printf("reasons:")
		for _, r := range reasons {
			w.printf(" %s %d", r, c["reason/"+r])
		}
		w.printf("\n")
	}
}

// WriteCompare writes a side-by-side summary of the runs (one column per
// run: arrived, admitted, sent, ok, refused, failed, lost, latency from
// send and from due, the worst logic queue depth, battle p99 and CPU per
// tier, thresholds passed), then each run's table.
func WriteCompare(w io.Writer, runs ...*Run) error {
	if len(runs) == 0 {
		return fmt.Errorf("report: compare needs at least one run")
	}
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(r *Run) string) {
		fmt.Fprint(tw, name+"\t")
		for _, r := range runs {
			fmt.Fprint(tw, f(r)+"\t")
		}
		fmt.Fprintln(tw)
	}
	row("", func(r *Run) string { return r.label(slices.Index(runs, r)) })
	if slices.ContainsFunc(runs, func(r *Run) bool { return r.Meta.Capacity > 0 }) {
		known := func(v float64, format string) string {
			if !(v > 0) {
				return "-"
			}
			return fmt.Sprintf(format, v)
		}
		row("capacity (requests/s)", func(r *Run) string { return known(r.Meta.Capacity, "%.0f") })
		if slices.ContainsFunc(runs, func(r *Run) bool { return r.Meta.Offered > 0 }) {
			row("peak offered (x capacity)", func(r *Run) string { return known(r.Meta.Offered, "%g") })
		}
	}
	for _, k := range []string{"arrived", "admitted", "sent", "ok", "refused", "failed", "lost"} {
		row(k, func(r *Run) string { return fmt.Sprint(r.Summary.Counters[k]) })
	}
	q := func(name string, f func(s Summary) Quantiles, p func(q Quantiles) float64) {
		row(name, func(r *Run) string {
			x := f(r.Summary)
			if x.Count == 0 {
				return "-"
			}
			return msq(p(x))
		})
	}
	send := func(s Summary) Quantiles { return s.Latency }
	due := func(s Summary) Quantiles { return s.LatencyDue }
	q("p50 (send)", send, func(q Quantiles) float64 { return q.P50 })
	q("p99 (send)", send, func(q Quantiles) float64 { return q.P99 })
	q("p50 (due)", due, func(q Quantiles) float64 { return q.P50 })
	q("p99 (due)", due, func(q Quantiles) float64 { return q.P99 })
	peak := func(name, level, format string, scale float64) {
		row(name, func(r *Run) string {
			v, ok := r.Summary.Peak[level]
			if !ok {
				return "-"
			}
			return fmt.Sprintf(format, v*scale)
		})
	}
	peak("peak logic queue depth", "logic_queue_depth", "%.0f", 1)
	peak("peak battle p99", "battle_p99", "%.0fms", 1000)
	peak("peak cpu gate", "cpu_gate", "%.2f", 1)
	peak("peak cpu logic", "cpu_logic", "%.2f", 1)
	peak("peak cpu battle", "cpu_battle", "%.2f", 1)
	row("thresholds passed", func(r *Run) string {
		n := 0
		for _, c := range r.Criteria {
			if c.Passed {
				n++
			}
		}
		return fmt.Sprintf("%d/%d", n, len(r.Criteria))
	})
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
	for _, r := range runs {
		ew.printf("\n")
		writeTable(ew, r)
	}
	return ew.err
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}

// sizing says how the run's load compares with the cluster's capacity,
// "" when neither is known: "capacity 950.0 requests/s; peak offered load
// 2850.0 requests/s = 3.00 x capacity (offered: 3)".
func (m Meta) sizing() string {
	switch {
	case m.Capacity > 0 && m.OfferedRate > 0:
		s := fmt.Sprintf("capacity %.1f requests/s; peak offered load %.1f requests/s = %.2f x capacity", m.Capacity, m.OfferedRate, m.OfferedRate/m.Capacity)
		if m.Offered > 0 {
			s += fmt.Sprintf(" (offered: %g)", m.Offered)
		}
		return s
	case m.Capacity > 0:
		return fmt.Sprintf("capacity %.1f requests/s", m.Capacity)
	case m.OfferedRate > 0:
		return fmt.Sprintf("peak offered load %.1f requests/s (capacity unknown)", m.OfferedRate)
	}
	return ""
}
