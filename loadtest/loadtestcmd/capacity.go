package loadtestcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/leveehq/levee/internal/cli"
	"github.com/leveehq/levee/loadtest/arrival"
	"github.com/leveehq/levee/loadtest/capacity"
	"github.com/leveehq/levee/loadtest/engine"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/scenario"
)

// capacityCmd is `loadtest capacity [flags] FILE|PRESET`: the capacity
// search (package capacity) over a fixed pool of connections offering the
// scenario's players.actions mix, one engine run a step. It prints each
// step and then "capacity: N requests/s". Exit 0 when measured, 1 when not
// (or the run failed), 2 on bad input.
func capacityCmd(gm engine.Game, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest capacity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sets stringList
	fs.Var(&sets, "set", "override a scenario field: PATH=VALUE with a YAML path (client.request_timeout=2s); repeatable")
	var gates, metrics []string
	fs.Var((*cli.List)(&gates), "gate-urls", "comma-separated gate WebSocket URLs, ws:// or wss:// (loopback); connection n goes to the n-th mod count (default ws://127.0.0.1:8080/ws)")
	fs.Var((*cli.List)(&metrics), "metrics", "comma-separated tier=URL of the servers' /metrics (gate=, logic=, battle=) probed each second")
	secret := fs.String("token-secret", "levee-dev-secret", "the gates' token signing secret")
	keysFile := fs.String("token-keys", "", "the gates' key ring file (-token-keys): sign v2 tokens with its current key, as read at start; replaces -token-secret")
	label := fs.String("label", "", "the run's label in the run file")
	out := fs.String("out", "", "write every step (NDJSON, one point per second, one phase a step) to this run file")
	valueOut := fs.String("value-out", "", "write just the capacity (requests/s) to this file")
	progressMode := fs.String("progress", "off", "progress output of each step: auto, line, off")
	allowNonlocal := fs.Bool("allow-nonlocal", false, "allow targets that are not loopback")
	tlsF := addTLSFlags(fs)
	logLevel := fs.String("log-level", "warn", "log level: debug, info, warn, error")
	conns := fs.Int("conns", scenario.DefaultPoolConns, "connections of the pool (a pool file's pool.conns when not given)")
	cfg := capacity.DefaultConfig()
	fs.IntVar(&cfg.ClosedConcurrency, "closed-concurrency", cfg.ClosedConcurrency, "requests outstanding in the closed loop whose served/s is the first estimate C0")
	fs.DurationVar(&cfg.ClosedTime, "closed-time", cfg.ClosedTime, "length of the closed loop (whole seconds)")
	fs.DurationVar(&cfg.StepTime, "step-time", cfg.StepTime, "length of each open-loop step (whole seconds): C0 x 1, then up while steps hold (1.25, 1.5, 1.75, 2, 2.5, 3, 4, ...) or down while they do not (0.85, 0.72, ...)")
	fs.DurationVar(&cfg.SearchTime, "search-time", cfg.SearchTime, "bound on the steps in all; 0 skips the search (C = C0)")
	fs.DurationVar(&cfg.P99SLO, "p99-slo", cfg.P99SLO, "a step holds when p99 of served <= this and served/offered >= -min-served; C = served/s of the best step that held")
	fs.Float64Var(&cfg.MinServed, "min-served", cfg.MinServed, "a step holds when served/offered >= this")
	fs.Float64Var(&cfg.MaxRate, "max-rate", cfg.MaxRate, "no step offers more requests/s")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadtest capacity [flags] FILE.yaml|PRESET   (the scenario's players.actions, client.request_timeout and players.json)")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	sc, err := scenario.Load(pos[0], sets)
	if err == nil {
		err = sc.Bind(gm.Game.Def())
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	pool := scenario.Pool{Conns: *conns, ReplyGrace: scenario.Duration(scenario.DefaultReplyGrace), MaxRate: scenario.MaxPoolRate}
	if sc.Pool != nil {
		pool = *sc.Pool
		pool.Phases, pool.MaxRate = nil, scenario.MaxPoolRate // -max-rate bounds the steps
		if flagGiven(fs, "conns") {
			pool.Conns = *conns
		}
	}
	if pool.Conns < 1 || pool.Conns > scenario.MaxPoolConns {
		fmt.Fprintf(stderr, "-conns: must be in 1..%d, got %d\n", scenario.MaxPoolConns, pool.Conns)
		return exitUsage
	}
	targets, logger, prog, tty, err := outputs(metrics, *logLevel, *progressMode, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if len(gates) == 0 {
		gates = []string{"ws://127.0.0.1:8080/ws"}
	}
	kid, key, err := signingKey(*secret, *keysFile)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	tlsOpts, err := tlsF.options(stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	r := &poolRunner{base: sc, pool: pool, cfg: engine.Config{
		Gates: gates, Metrics: targets, TokenSecret: key, TokenKeyID: kid, AllowNonlocal: *allowNonlocal, TLS: tlsOpts, Workers: 1,
		Label: *label, Command: append([]string{"loadtest", "capacity"}, args...), Progress: prog, TTY: tty, Log: logger,
		Game: gm,
	}}
	r.onClosed = func(m capacity.Measurement) {
		fmt.Fprintf(stdout, "closed loop: C0 = %.1f served/s (%d sent), p99 %v\n", m.Served, m.Sent, m.P99.Round(time.Millisecond))
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	fmt.Fprintf(stdout, "capacity: %s (%s): %d connections, closed loop of %d for %v, then steps of %v (at most %v), holding at p99 <= %v and %.0f%% served\n",
		sc.Name, sc.File, pool.Conns, cfg.ClosedConcurrency, cfg.ClosedTime, cfg.StepTime, cfg.SearchTime, cfg.P99SLO, cfg.MinServed*100)
	res, err := capacity.Find(ctx, cfg, r, func(st capacity.Step) {
		verdict := "held"
		if !st.Held {
			verdict = "did not hold"
		}
		fmt.Fprintf(stdout, "step %d: %.2f x C0 = %.0f requests/s offered: served %.1f/s (%.1f%%), p99 %v (from due %v): %s\n",
			len(r.runs)-1, st.Factor, st.Rate, st.Served, st.ServedRatio*100, st.P99.Round(time.Millisecond), st.P99FromDue.Round(time.Millisecond), verdict)
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	if res.Why != "" {
		fmt.Fprintf(stdout, "search ended: %s\n", res.Why)
	}
	code := exitOK
	if *out != "" {
		if err := writeSteps(*out, r.runs, res.C); err != nil {
			fmt.Fprintln(stderr, "-out:", err)
			code = exitError
		} else {
			fmt.Fprintf(stdout, "run file: %s\n", *out)
		}
	}
	if !(res.C > 0) {
		fmt.Fprintln(stdout, "capacity: not measured")
		return exitError
	}
	value := strconv.FormatFloat(res.C, 'f', 0, 64)
	fmt.Fprintf(stdout, "capacity: %s requests/s\n", value)
	if *valueOut != "" {
		if err := os.WriteFile(*valueOut, []byte(value+"\n"), 0o644); err != nil {
			fmt.Fprintln(stderr, "-value-out:", err)
			return exitError
		}
	}
	return code
}

// flagGiven reports whether flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// poolRunner is capacity.Runner on the engine: each call runs the base
// scenario's mix on a pool of one phase.
type poolRunner struct {
	base     *scenario.Scenario
	pool     scenario.Pool
	cfg      engine.Config
	runs     []*report.Run
	onClosed func(capacity.Measurement) // nil: nothing
}

var _ capacity.Runner = (*poolRunner)(nil)

func (r *poolRunner) Closed(ctx context.Context, name string, k int, d time.Duration) (capacity.Measurement, error) {
	m, err := r.step(ctx, scenario.PoolPhase{Name: name, Duration: scenario.Duration(d), Concurrency: k})
	if err == nil && r.onClosed != nil {
		r.onClosed(m)
	}
	return m, err
}

func (r *poolRunner) Open(ctx context.Context, name string, rate float64, d time.Duration) (capacity.Measurement, error) {
	return r.step(ctx, scenario.PoolPhase{Name: name, Duration: scenario.Duration(d), Rate: rate})
}

// step runs one phase: the base scenario's mix, client and bounds, without
// its arrivals, timeline and thresholds.
func (r *poolRunner) step(ctx context.Context, ph scenario.PoolPhase) (capacity.Measurement, error) {
	sc := *r.base
	sc.Arrivals, sc.Curve, sc.Timeline, sc.Thresholds, sc.Checks = scenario.Arrivals{}, arrival.Curve{}, nil, nil, nil
	sc.Scale, sc.Speed, sc.T0, sc.Ledger, sc.Run.Workers = 1, 1, 0, false, 1
	sc.Description = fmt.Sprintf("loadtest capacity, phase %s: the players.actions mix of %s over a pool of %d connections", ph.Name, r.base.File, r.pool.Conns)
	p := r.pool
	p.Phases = []scenario.PoolPhase{ph}
	sc.SetPool(p)
	cfg := r.cfg
	cfg.Scenario = &sc
	run, err := engine.Run(ctx, cfg)
	if err != nil {
		return capacity.Measurement{}, err
	}
	r.runs = append(r.runs, run)
	return measure(run, time.Duration(ph.Duration), ph.Concurrency == 0), nil
}

// measure is a step's figures from its run: served replies per second of
// the phase (those that came before its end), served / planned (planned:
// sent + never sent, open loop) and p99 of all served.
func measure(run *report.Run, d time.Duration, open bool) capacity.Measurement {
	secs := int(d / time.Second)
	var inWindow, served, sent, unsent int64
	for _, p := range run.Points {
		c := p.Counters
		n := c[record.OK.String()] + c[record.Business.String()]
		served += n
		if p.T < secs {
			inWindow += n
		}
		sent += c[record.CounterSent]
		unsent += c[engine.CounterPoolUnsent]
	}
	m := capacity.Measurement{Served: float64(inWindow) / d.Seconds(), Sent: int(sent),
		P99:        time.Duration(run.Summary.Latency.P99 * float64(time.Second)),
		P99FromDue: time.Duration(run.Summary.LatencyDue.P99 * float64(time.Second))}
	if planned := sent + unsent; open && planned > 0 {
		m.ServedRatio = float64(served) / float64(planned)
	}
	return m
}

// writeSteps writes the steps' runs as one run file: each step a phase,
// one after another, and the capacity found in the meta.
func writeSteps(path string, runs []*report.Run, c float64) error {
	if len(runs) == 0 {
		return errors.New("no step ran")
	}
	all := &report.Run{Meta: runs[0].Meta}
	all.Meta.Capacity, all.Meta.Phases, all.Meta.Thresholds = c, nil, nil
	off := 0
	for _, r := range runs {
		n := 0
		for _, p := range r.Points {
			n = max(n, p.T+1)
			p.T += off
			all.Points = append(all.Points, p)
		}
		for _, ph := range r.Meta.Phases {
			if ph.Name != "drain" {
				all.Meta.Phases = append(all.Meta.Phases, report.Phase{Name: ph.Name, From: ph.From + float64(off), To: ph.To + float64(off)})
			}
		}
		for _, e := range r.Events {
			e.T += float64(off)
			all.Events = append(all.Events, e)
		}
		all.Warnings = append(all.Warnings, r.Warnings...)
		off += n
	}
	all.Summary = report.Summarize(all.Points)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := report.NewWriter(f, all.Meta)
	if err == nil {
		for _, p := range all.Points {
			if err = w.Point(p); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = w.EndRun(all)
	}
	return errors.Join(err, f.Close())
}
