package loadtest

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Latency summarises the latencies of answered requests.
type Latency struct {
	Count int           `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted:
// the smallest value with at least p % of the values at or below it. It is
// 0 for no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Summarize sorts ds in place and summarises it.
func Summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Latency{
		Count: len(ds),
		Mean:  sum / time.Duration(len(ds)),
		P50:   Percentile(ds, 50),
		P90:   Percentile(ds, 90),
		P99:   Percentile(ds, 99),
		Max:   ds[len(ds)-1],
	}
}

// OpReport is one operation's share of a run.
type OpReport struct {
	Sent     int     `json:"sent"`
	Answered int     `json:"answered"`
	OK       int     `json:"ok"`
	Errors   int     `json:"errors"` // error replies of any class
	Lost     int     `json:"lost"`
	Latency  Latency `json:"latency"`
}

// Report is what a run did. Maps count by error code or reason.
type Report struct {
	Scenario    string        `json:"scenario"`
	RunID       string        `json:"run_id"`
	Seed        uint64        `json:"seed"`
	Target      string        `json:"target"`
	Started     time.Time     `json:"started"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	Interrupted bool          `json:"interrupted"`

	Bots         int            `json:"bots"`    // in the scenario
	Arrived      int            `json:"arrived"` // bots started before the deadline
	Dialed       int            `json:"dialed"`
	Connected    int            `json:"connected"`
	DialFailures map[string]int `json:"dial_failures"`
	Disconnects  map[string]int `json:"disconnects"` // connections that ended before their bot was done

	Sent              int            `json:"sent"`
	Answered          int            `json:"answered"`
	OK                int            `json:"ok"`
	Business          map[string]int `json:"business"`           // typed game outcomes
	Overload          map[string]int `json:"overload"`           // refused for load
	Failed            map[string]int `json:"failed"`             // other error replies
	Lost              map[string]int `json:"lost"`               // no reply
	Frames            uint64         `json:"frames"`             // request frames the clients wrote
	Replies           uint64         `json:"replies"`            // replies the clients matched to a waiting call
	Retries           uint64         `json:"retries"`            // attempts the SDK made after a busy refusal (same request)
	LateReplies       uint64         `json:"late_replies"`       // replies after their request timed out
	UnexpectedReplies uint64         `json:"unexpected_replies"` // replies matching no request
	BudgetExhausted   bool           `json:"budget_exhausted"`   // bots stopped early: MaxRequests reached

	Latency    Latency              `json:"latency"` // answered requests
	Ops        map[string]*OpReport `json:"ops"`
	Throughput float64              `json:"throughput_per_s"` // answered requests per second
}

// Sum adds a map's counts.
func Sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Problems lists why the run fails: anything but results and typed
// business errors, a request without exactly one reply, a failed dial. An
// empty list is a pass.
func (r *Report) Problems() []string {
	var p []string
	if r.Interrupted {
		p = append(p, "the run was interrupted")
	}
	if r.Sent == 0 {
		p = append(p, "no request was sent")
	}
	if lost := Sum(r.Lost); r.Sent != r.Answered+lost {
		p = append(p, fmt.Sprintf("accounting: sent %d != answered %d + lost %d", r.Sent, r.Answered, lost))
	}
	// Every answered request had its reply matched; a request the SDK
	// retried had one more matched refusal per retry (fewer when a retry
	// was cut before it went out).
	if r.Replies < uint64(r.Answered) || r.Replies > uint64(r.Answered)+r.Retries {
		p = append(p, fmt.Sprintf("accounting: the clients matched %d replies but %d requests were answered after %d retries",
			r.Replies, r.Answered, r.Retries))
	}
	add := func(m map[string]int, what string) {
		if n := Sum(m); n > 0 {
			p = append(p, fmt.Sprintf("%d %s (%s)", n, what, formatCounts(m)))
		}
	}
	add(r.Lost, "requests got no reply")
	add(r.Overload, "requests were refused for overload")
	add(r.Failed, "requests failed")
	add(r.DialFailures, "bots could not connect")
	add(r.Disconnects, "connections ended before their bot was done")
	if r.UnexpectedReplies > 0 {
		p = append(p, fmt.Sprintf("%d replies matched no request (duplicates?)", r.UnexpectedReplies))
	}
	return p
}

// Passed reports whether Problems is empty.
func (r *Report) Passed() bool { return len(r.Problems()) == 0 }

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// WriteTable writes the report for people.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "levee load test: scenario %s, run %s, seed %d, target %s\n", r.Scenario, r.RunID, r.Seed, r.Target)
	fmt.Fprintf(&b, "elapsed %v, bots %d (arrived %d, connected %d, dial failures %d, disconnects %d)",
		r.Elapsed.Round(time.Millisecond), r.Bots, r.Arrived, r.Connected, Sum(r.DialFailures), Sum(r.Disconnects))
	if r.Interrupted {
		b.WriteString(", INTERRUPTED")
	}
	if r.BudgetExhausted {
		b.WriteString(", request budget exhausted")
	}
	b.WriteString("\n\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tsent\tanswered\tok\terrors\tlost\tp50\tp90\tp99\tmax\t")
	row := func(name string, o OpReport) {
		l := o.Latency
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", name, o.Sent, o.Answered, o.OK, o.Errors, o.Lost,
			ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max))
	}
	for _, name := range slices.Sorted(maps.Keys(r.Ops)) {
		row(name, *r.Ops[name])
	}
	lost := Sum(r.Lost)
	row("all", OpReport{Sent: r.Sent, Answered: r.Answered, OK: r.OK, Errors: r.Answered - r.OK, Lost: lost, Latency: r.Latency})
	tw.Flush()

	b.WriteString("\n")
	line := func(label string, m map[string]int) {
		fmt.Fprintf(&b, "%-18s %d", label, Sum(m))
		if len(m) > 0 {
			fmt.Fprintf(&b, "  (%s)", formatCounts(m))
		}
		b.WriteString("\n")
	}
	line("business errors", r.Business)
	line("overload", r.Overload)
	line("failed", r.Failed)
	line("lost", r.Lost)
	line("dial failures", r.DialFailures)
	line("disconnects", r.Disconnects)
	fmt.Fprintf(&b, "%-18s %d late, %d unexpected\n", "stray replies", r.LateReplies, r.UnexpectedReplies)
	fmt.Fprintf(&b, "%-18s %d\n", "sdk retries", r.Retries)
	fmt.Fprintf(&b, "%-18s %.1f answered/s, mean latency %s\n", "throughput", r.Throughput, ms(r.Latency.Mean))
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// formatCounts renders a count map as "A 3, B 1", largest first.
func formatCounts(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// report builds the Report from what r recorded.
func (r *recorder) report() *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := &Report{
		Dialed: r.dialed, Connected: r.connected,
		DialFailures: maps.Clone(r.dialFailures), Disconnects: maps.Clone(r.disconnects),
		Sent: r.sent, Answered: r.answered, OK: r.ok,
		Frames: r.frames, Replies: r.replies, Retries: r.retries,
		Business: maps.Clone(r.business), Overload: maps.Clone(r.overload),
		Failed: maps.Clone(r.failed), Lost: maps.Clone(r.lost),
		LateReplies: r.late, UnexpectedReplies: r.unexpected, BudgetExhausted: r.used >= r.budget,
		Ops: map[string]*OpReport{},
	}

	all := make([]time.Duration, len(r.samples))
	byOp := make([][]time.Duration, len(r.ops))
	for i, s := range r.samples {
		d := time.Duration(s.us) * time.Microsecond
		all[i] = d
		byOp[s.op] = append(byOp[s.op], d)
	}
	rep.Latency = Summarize(all)
	for i, name := range r.ops {
		c := r.perOp[i]
		rep.Ops[name] = &OpReport{Sent: c.sent, Answered: c.answered, OK: c.ok, Errors: c.errors, Lost: c.lost, Latency: Summarize(byOp[i])}
	}
	return rep
}
