package loadtestcmd

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/threshold"
)

// reliabilityCmd is `loadtest reliability -out RELIABILITY.md RUN...`: the
// drills' table (scripts/drills.sh runs it after the drills).
func reliabilityCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest reliability", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "write the table to this file (default: stdout)")
	command := fs.String("command", "make drills", "the command that ran the drills, for the header")
	capacity := fs.Float64("capacity", 0, "the measured capacity the drills' loads are shares of (requests/s)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(pos) == 0 {
		fmt.Fprintln(stderr, "usage: loadtest reliability [-out RELIABILITY.md] [-capacity N] [-command CMD] run.ndjson...")
		return exitUsage
	}
	var runs []*report.Run
	for _, p := range pos {
		r, err := readRun(p)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", p, err)
			return exitUsage
		}
		runs = append(runs, r)
	}
	h := report.Reliability{Command: *command, Machine: machine(), Capacity: *capacity,
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	w := stdout
	var f *os.File
	if *out != "" {
		if f, err = os.Create(*out); err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		w = f
	}
	err = report.WriteReliability(w, h, runs)
	if f != nil {
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	return exitOK
}

// machine describes this machine: cores, memory, CPU model, OS.
func machine() string {
	s := fmt.Sprintf("%d cores", runtime.NumCPU())
	if kb := procValue("/proc/meminfo", "MemTotal:"); kb != "" {
		var n float64
		if _, err := fmt.Sscan(strings.TrimSuffix(kb, " kB"), &n); err == nil {
			s += fmt.Sprintf(", %.0f GiB", n/(1<<20))
		}
	}
	if m := procValue("/proc/cpuinfo", "model name"); m != "" {
		s += ", " + strings.TrimPrefix(m, ": ")
	}
	return s + ", " + runtime.GOOS + "/" + runtime.GOARCH
}

// procValue is the rest of the first line of path that starts with key.
func procValue(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, key) {
			return strings.TrimSpace(strings.TrimPrefix(l, key))
		}
	}
	return ""
}

// figureCmd is `loadtest figure [-from S] [-to S] [-over BASE] [-max X]
// RUN FIGURE`: one figure of a run file on stdout. FIGURE is a figure as
// thresholds name it (package threshold: a scalar, AGG(series), p(N),
// each with an optional window: "median(mix_served)[10s:25s]"), or the
// older AGG:SERIES with AGG one of median, avg, max, min over the seconds
// in [from, to); SERIES is a series name or @COUNTER, a counter per second
// ("@battle/ok"). With -over it is divided by the same figure of the run
// file BASE, and with -max it exits 1 when the value printed is above X
// (the memory benchmark's ratio, scripts/hold-memory.sh).
func figureCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest figure", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.Float64("from", 0, "AGG:SERIES: the first second (wall seconds from the start)")
	to := fs.Float64("to", math.Inf(1), "AGG:SERIES: the end (exclusive)")
	over := fs.String("over", "", "print the figure divided by the same figure of this run file (gate over bare: the memory ratio)")
	maxV := fs.Float64("max", math.Inf(1), "exit 1, saying so, when the printed value is above this")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(pos) != 2 {
		fmt.Fprintln(stderr, "usage: loadtest figure [-over base.ndjson] [-max X] run.ndjson FIGURE (as in thresholds: goodput, median(mix_served)[10s:25s], p(99)[run])")
		fmt.Fprintln(stderr, "       loadtest figure [-from S] [-to S] [-over base.ndjson] [-max X] run.ndjson AGG:SERIES|AGG:@COUNTER (AGG: median, avg, max, min)")
		return exitUsage
	}
	r, err := readRun(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	value := func(r *report.Run) (float64, error) { return figure(r, pos[1], *from, *to) }
	if agg, _, ok := strings.Cut(pos[1], ":"); !ok || !slices.Contains(figureAggs, agg) {
		explicit := false
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "from" || f.Name == "to" })
		if explicit {
			fmt.Fprintln(stderr, "-from and -to are for AGG:SERIES; give a figure its window: NAME[FROM:TO]")
			return exitUsage
		}
		fig, perr := threshold.ParseFigure(pos[1])
		if perr != nil {
			fmt.Fprintln(stderr, perr)
			return exitUsage
		}
		value = func(r *report.Run) (float64, error) { return fig.Value(r.Facts()) }
	}
	v, err := value(r)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	if *over != "" {
		base, err := readRun(*over)
		if err != nil {
			fmt.Fprintln(stderr, "-over:", err)
			return exitUsage
		}
		b, err := value(base)
		if err != nil {
			fmt.Fprintln(stderr, "-over:", err)
			return exitError
		}
		if b == 0 {
			fmt.Fprintf(stderr, "-over: %s of %s is 0\n", pos[1], *over)
			return exitError
		}
		v /= b
	}
	fmt.Fprintf(stdout, "%.6g\n", v)
	if v > *maxV {
		fmt.Fprintf(stderr, "loadtest figure: %s is %.6g, above -max %g\n", pos[1], v, *maxV)
		return exitError
	}
	return exitOK
}

// figureAggs are the aggregates of figure's AGG:SERIES form.
var figureAggs = []string{"median", "avg", "max", "min"}

func figure(r *report.Run, name string, from, to float64) (float64, error) {
	f := r.Facts()
	agg, ser, ok := strings.Cut(name, ":")
	if !ok {
		if v, ok := f.Value(name); ok {
			return v, nil
		}
		return 0, fmt.Errorf("the run has no figure %q", name)
	}
	var all []float64
	if c, isCounter := strings.CutPrefix(ser, "@"); isCounter {
		// @COUNTER: a counter of the points per second ("@battle/ok").
		for _, p := range r.Points {
			all = append(all, float64(p.Counters[c]))
		}
	} else if all, ok = f.Series(ser); !ok {
		return 0, fmt.Errorf("the run has no series %q", ser)
	}
	var vs []float64
	for i, p := range r.Points {
		if t := float64(p.T); i < len(all) && t >= from && t < to && !math.IsNaN(all[i]) {
			vs = append(vs, all[i])
		}
	}
	if len(vs) == 0 {
		return 0, fmt.Errorf("series %q has no sample in [%g, %g)", ser, from, to)
	}
	sort.Float64s(vs)
	switch agg {
	case "median":
		n := len(vs)
		if n%2 == 1 {
			return vs[n/2], nil
		}
		return (vs[n/2-1] + vs[n/2]) / 2, nil
	case "max":
		return vs[len(vs)-1], nil
	case "min":
		return vs[0], nil
	case "avg":
		s := 0.0
		for _, v := range vs {
			s += v
		}
		return s / float64(len(vs)), nil
	}
	return 0, fmt.Errorf("unknown aggregate %q (median, avg, max, min)", agg)
}
