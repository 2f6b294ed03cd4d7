package engine

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/leveehq/levee/loadtest/record"
)

// plainEvery is how often a progress line is printed when the output is
// not a terminal.
const plainEvery = 5

// progress prints one line a second: one updating line on a terminal, a
// plain line every few seconds otherwise.
type progress struct {
	w      io.Writer
	tty    bool
	p      *plan
	totals map[string]int64
	n      int
	last   string
}

func newProgress(w io.Writer, tty bool, p *plan) *progress {
	return &progress{w: w, tty: tty, p: p, totals: map[string]int64{}}
}

func (pr *progress) point(pt record.Point, _ []record.Point) {
	for k, v := range pt.Counters {
		pr.totals[k] += v
	}
	if pr.w == nil {
		return
	}
	pr.n++
	line := pr.line(pt)
	if pr.tty {
		fmt.Fprintf(pr.w, "\r\033[K%s", line)
		pr.last = line
		return
	}
	if pr.n%plainEvery == 0 {
		fmt.Fprintln(pr.w, line)
	}
}

func (pr *progress) line(pt record.Point) string {
	c, l := pt.Counters, pt.Levels
	var b strings.Builder
	fmt.Fprintf(&b, "%s arrived %d connected %.0f waiting %.0f admitted %d | req/s ok %d refused %d failed %d lost %d",
		pr.p.label(time.Duration(pt.T+1)*time.Second), pr.totals["arrived"], l["connected"], l["waiting"], pr.totals["admitted"],
		c["ok"]+c["business"], c["refused"], c["failed"], c["lost"])
	if h := pt.Hists["lat"]; h != nil && h.Count() > 0 {
		fmt.Fprintf(&b, " p99 %s", h.Quantile(0.99).Round(time.Millisecond))
	}
	if v, ok := l["gate_connections"]; ok {
		fmt.Fprintf(&b, " | gate conns %.0f", v)
	}
	if v, ok := l["logic_queue_depth"]; ok {
		fmt.Fprintf(&b, " logic queue %.0f", v)
	}
	if v, ok := l["logic_commit_p99"]; ok {
		fmt.Fprintf(&b, " commit p99 %s", time.Duration(v*float64(time.Second)).Round(time.Millisecond))
	}
	if v, ok := l["battle_p99"]; ok {
		fmt.Fprintf(&b, " battle p99 %s", time.Duration(v*float64(time.Second)).Round(time.Millisecond))
	}
	for _, t := range []string{"gate", "logic", "battle", "loadtest"} {
		if v, ok := l["cpu_"+t]; ok {
			fmt.Fprintf(&b, " cpu %s %.2f", t, v)
		}
	}
	return b.String()
}

func (pr *progress) done() {
	if pr.w != nil && pr.tty && pr.last != "" {
		fmt.Fprintln(pr.w)
	}
}
