// Command loadtest drives simulated players against a Levee gate on this
// machine and prints what happened. Four scenarios (-scenario):
//
//   - smoke (the default): casual players; it exits 0 when every request got
//     exactly one reply and the only errors were typed business errors;
//   - overload: measures the cluster's capacity C (a closed loop's estimate
//     C0, then a stepped open-loop search from it), then offers 0.8 × C and
//     10 × C open loop and judges goodput, p99 and replies; it exits 0 when
//     the cluster held (or always, with -expect-hold=false);
//   - line: -bots players (3,000) connect at once to a gate whose admission
//     line is paced and wait to be admitted; it exits 0 when none was lost,
//     they were admitted in arrival order and the measured pace was the
//     configured one (-line-rate, or read from -admin-url), also after a
//     pace change through the admin API (-change-at, -change-rate);
//   - hold: -conns connections (15,000) wait in the gate's line (put it in
//     queueing mode) or, with -bare, are plain WebSockets to any server,
//     held for -hold (or until -hold-end-file exists); with -target-pid it
//     reports the server's resident memory per connection (the memory
//     benchmark, scripts/hold-memory.sh); scripts/hold-line.sh runs five of
//     them against five gates.
//
// Otherwise it exits 1 (saying why), and 2 on bad flags or a target that is
// not loopback.
//
// `loadtest compare LABEL=report.json ...` prints overload reports (their
// -json-out files) side by side.
//
// With -run-file, every scenario also writes the common NDJSON run file
// that `loadtest report` and `loadtest compare a.ndjson b.ndjson` read:
// smoke and overload every request per second, the phases, the tiers' RSS
// and CPU; line and hold the players arrived, connected, waiting in line,
// admitted, failed, dropped and left per second, line the waits in line,
// hold the server's RSS samples, and their phases.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"levee/internal/cli"
	"levee/loadtest"
	"levee/loadtest/report"
	"levee/loadtest/target"
)

func main() { os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr)) }

// Scenario names (-scenario).
const (
	scenarioSmoke    = "smoke"
	scenarioOverload = "overload"
	scenarioLine     = "line"
	scenarioHold     = "hold"
)

// Default request timeouts by scenario (-request-timeout 0).
const (
	smokeRequestTimeout    = 5 * time.Second
	overloadRequestTimeout = 2 * time.Second
)

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			return runScenario(args[1:], getenv, stdout, stderr)
		case "capacity":
			return capacityCmd(args[1:], stdout, stderr)
		case "report":
			return reportCmd(args[1:], stdout, stderr)
		case "compare":
			if isRunFiles(args[1:]) {
				return compareRuns(args[1:], stdout, stderr)
			}
			return compare(args[1:], stdout, stderr)
		case "scenarios":
			return listScenarios(stdout)
		case "worker":
			return workerCmd(stderr)
		case "reliability":
			return reliabilityCmd(args[1:], stdout, stderr)
		case "figure":
			return figureCmd(args[1:], stdout, stderr)
		}
	}
	return legacy(args, getenv, stdout, stderr, 1)
}

// isRunFiles tells the run files (.ndjson) of compare from the older
// LABEL=overload-report.json form.
func isRunFiles(args []string) bool {
	for _, a := range args {
		if strings.HasSuffix(a, ".ndjson") {
			return true
		}
	}
	return false
}

// legacy runs the flag-driven scenarios (-scenario smoke, overload, line,
// hold); failCode is the exit code of a run whose criteria failed (1, or
// 99 when run as a preset by `loadtest run`).
func legacy(args []string, getenv func(string) string, stdout, stderr io.Writer, failCode int) int {
	rc := loadtest.DefaultRunnerConfig()
	rc.RequestTimeout = 0
	sm := loadtest.DefaultSmoke()
	ov := loadtest.DefaultOverload()
	ln := loadtest.DefaultLine()
	hd := loadtest.DefaultHold()
	var admin loadtest.Admin
	var metricsURLs []string
	var maxRSSMB float64
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scenario := fs.String("scenario", scenarioSmoke, "traffic to play: smoke (casual players), overload (capacity, then 0.8x and 10x of it), "+
		"line (players wait in the paced admission line) or hold (connections held open: the memory benchmark)")
	fs.StringVar(&rc.GateURL, "gate-url", rc.GateURL, "gate WebSocket URL; must be loopback")
	fs.StringVar(&rc.TokenSecret, "token-secret", rc.TokenSecret, "the gate's token signing secret")
	fs.BoolVar(&rc.AllowNonlocal, "allow-nonlocal", false, "allow a -gate-url (and -metrics-urls) that is not loopback")
	fs.DurationVar(&rc.RequestTimeout, "request-timeout", 0,
		"per-request timeout, also the dial timeout and, in overload, the budget the server is told; 0 means 5s for smoke, 2s for overload")
	fs.Float64Var(&rc.JSONFraction, "json-fraction", rc.JSONFraction, "share of bots speaking protojson instead of binary")
	fs.Uint64Var(&rc.Seed, "seed", 0, "smoke: random seed for the bots' choices; 0 picks one (reported)")
	fs.StringVar(&rc.RunID, "run-id", "", "names the players bot-<run id>-<n>; empty picks one")
	fs.StringVar(&rc.SourceAddr, "source-addr", "", "loopback IP address the bots' connections come from, e.g. 127.0.0.11 (one per load process: "+
		"each source address has its own ephemeral ports); empty: the system's choice")
	fs.DurationVar(&rc.ProgressEvery, "progress", rc.ProgressEvery, "log progress this often; 0 never")
	// smoke
	fs.IntVar(&sm.Bots, "bots", sm.Bots, fmt.Sprintf("smoke, line: number of bots (line: %d unless set)", ln.Bots))
	fs.DurationVar(&sm.Ramp, "ramp", sm.Ramp, "smoke: bots arrive evenly over this long")
	fs.DurationVar(&sm.Duration, "duration", sm.Duration, "smoke: length of the run, ramp included")
	fs.DurationVar(&sm.Think, "think", sm.Think, "smoke: mean pause between a bot's actions")
	fs.Float64Var(&sm.ThinkJitter, "think-jitter", sm.ThinkJitter, "smoke: pauses are uniform in think*(1±jitter)")
	fs.Var((*cli.List)(&sm.Items), "items", "smoke: comma-separated item ids the bots buy")
	fs.Float64Var(&sm.OverspendFraction, "overspend-fraction", sm.OverspendFraction, "smoke: share of purchases beyond a player's gold")
	fs.IntVar(&sm.MaxRequests, "max-requests", 0, "smoke: bound on all requests; 0 derives it from bots, duration and think")
	// overload
	fs.IntVar(&ov.Conns, "conns", ov.Conns, fmt.Sprintf("overload, hold: connections (bots), all dialed first, SDK retries and pacing off (hold: %d unless set)", hd.Conns))
	uintVar(fs, &ov.Units, "units", "overload: units per team of every battle")
	uintVar(fs, &ov.Ticks, "ticks", "overload: ticks of every battle")
	fs.Float64Var(&ov.CriticalFraction, "critical-fraction", ov.CriticalFraction, "overload: share of requests that are CRITICAL purchases (the rest DEFAULT battles)")
	fs.StringVar(&ov.Item, "item", ov.Item, "overload: the item the purchases buy (one each)")
	fs.IntVar(&ov.CapacityConcurrency, "capacity-concurrency", ov.CapacityConcurrency, "overload: requests outstanding at once in the closed-loop capacity phase")
	fs.DurationVar(&ov.CapacityTime, "capacity-time", ov.CapacityTime, "overload: length of the closed-loop capacity phase (its served/s is the first estimate C0; a refused request's worker first waits its retry_after)")
	fs.DurationVar(&ov.CapacityStepTime, "capacity-step-time", ov.CapacityStepTime, "overload: length of each step of the open-loop capacity search (C0 x 1, then up while steps hold: 1.25, 1.5, 1.75, 2, 2.5, 3, 4, ...; or down while they do not: 0.85, 0.72, ...)")
	fs.DurationVar(&ov.CapacitySearchTime, "capacity-search-time", ov.CapacitySearchTime, "overload: bound on the capacity search's steps in all; 0 skips the search (C = C0)")
	fs.DurationVar(&ov.CapacityP99SLO, "capacity-p99-slo", ov.CapacityP99SLO, "overload: a search step holds when p99 of served <= this and served/offered >= -capacity-min-served; C = served/s of the best step that held")
	fs.Float64Var(&ov.CapacityMinServed, "capacity-min-served", ov.CapacityMinServed, "overload: a search step holds when served/offered >= this")
	fs.Float64Var(&ov.BaselineFactor, "baseline-factor", ov.BaselineFactor, "overload: the baseline phase offers this x C")
	fs.DurationVar(&ov.PhaseTime, "phase-time", ov.PhaseTime, "overload: length of the baseline phase")
	fs.Float64Var(&ov.OverloadFactor, "overload-factor", ov.OverloadFactor, "overload: the overload phase offers this x C")
	fs.DurationVar(&ov.OverloadTime, "overload-time", ov.OverloadTime, "overload: length of the overload phase")
	fs.DurationVar(&ov.ReplyGrace, "reply-grace", ov.ReplyGrace, "overload: how long past -request-timeout a reply is still awaited before the request counts as lost")
	fs.DurationVar(&ov.LateAfter, "late-after", ov.LateAfter, "overload: a request dispatched this long after its due time counts as late")
	fs.Float64Var(&ov.MaxRate, "max-rate", ov.MaxRate, "overload: cap on any phase's requests per second")
	fs.IntVar(&ov.MaxOutstanding, "max-outstanding", 0, "overload: cap on requests in flight; 0 derives it: rate x (timeout + grace) x 1.1 + 64")
	fs.Var((*cli.List)(&metricsURLs), "metrics-urls", "overload: comma-separated [name=]URL of the tiers' /metrics (loopback) sampled for RSS, goroutines and CPU; hold: the server's /metrics, read for its goroutines, heap and stacks")
	fs.DurationVar(&ov.MetricsEvery, "metrics-every", ov.MetricsEvery, "overload: sample -metrics-urls this often")
	fs.Float64Var(&ov.MinGoodputRatio, "min-goodput-ratio", ov.MinGoodputRatio, "overload: pass needs overload goodput >= this x C")
	fs.Float64Var(&ov.MaxP99Ratio, "max-p99-ratio", ov.MaxP99Ratio, "overload: pass needs overload p99 of served <= this x baseline p99")
	fs.Float64Var(&maxRSSMB, "max-rss-mb", 0, "overload: pass needs every sampled tier's RSS <= this many MiB; 0 does not check")
	// line and hold
	dialParallel := fs.Int("dial-parallel", 0, fmt.Sprintf("line, hold: WebSocket handshakes in progress at once; 0 means %d (line) or %d (hold)", ln.DialParallel, hd.DialParallel))
	fs.DurationVar(&ln.Bound, "bound", ln.Bound, "line: the longest any bot waits to be admitted, from the start; hold: the longest the dials may take")
	fs.Float64Var(&ln.Rate, "line-rate", 0, "line: the configured pace, admissions per second, the measured one is judged against; 0 takes -start-rate's, else the admin API's")
	fs.DurationVar(&ln.Window, "window", ln.Window, "line: the pace is also reported per window of this width")
	fs.DurationVar(&ln.Settle, "settle", ln.Settle, "line: left out of the measured pace after a pace change")
	fs.Float64Var(&ln.PaceTolerance, "pace-tolerance", ln.PaceTolerance, "line: pass needs the measured pace within ± this share of the configured one")
	fs.DurationVar(&ln.OrderSlack, "order-slack", ln.OrderSlack, "line: extra uncertainty of each release time (taken from the gate's waited_ms) before two count as surely inverted; 0 is sound")
	fs.DurationVar(&ln.MaxStatusGap, "max-status-gap", ln.MaxStatusGap, "line: pass needs a queue status at least this often while waiting")
	fs.StringVar(&admin.URL, "admin-url", "", "line: the gate's line admin API, e.g. http://127.0.0.1:8082/admin/line (loopback)")
	fs.StringVar(&admin.Token, "admin-token", "", "line: bearer token of the admin API")
	fs.StringVar(&ln.Start.Mode, "start-mode", "", "line: set the line to this mode through -admin-url before the bots dial (empty: leave it)")
	fs.BoolVar(&ln.StartWhenJoined, "start-when-joined", false, "line: apply the -start-* setting once every bot is in line (or failed), not before they dial: "+
		"with the gate's line in queueing mode, the pace is then measured on a full line however slowly the bots connect")
	fs.IntVar(&ln.Start.Rate, "start-rate", 0, "line: set the release rate (players per -start-interval) before the bots dial; 0 leaves it")
	fs.DurationVar(&ln.Start.Interval, "start-interval", 0, "line: the interval of -start-rate")
	fs.DurationVar(&ln.ChangeAt, "change-at", 0, "line: change the line through -admin-url this long after the first admission; 0 never")
	fs.StringVar(&ln.Change.Mode, "change-mode", "", "line: the mode set at -change-at (empty: leave it)")
	fs.IntVar(&ln.Change.Rate, "change-rate", 0, "line: the release rate (players per -change-interval) set at -change-at")
	fs.DurationVar(&ln.Change.Interval, "change-interval", 0, "line: the interval of -change-rate")
	fs.DurationVar(&hd.Hold, "hold", hd.Hold, "hold: how long the connections are held once all are up")
	fs.BoolVar(&hd.Bare, "bare", false, "hold: plain WebSocket connections to any server (e.g. cmd/barews), no Levee protocol, no token")
	fs.IntVar(&hd.PID, "target-pid", 0, "hold: the server's process id, whose RSS (/proc/PID/status VmRSS) is read before and during the hold; 0: none")
	fs.DurationVar(&hd.SampleEvery, "sample-every", hd.SampleEvery, "hold: RSS sample interval")
	fs.DurationVar(&hd.Settle, "hold-settle", hd.Settle, "hold: the first part of the hold, not sampled")
	fs.StringVar(&hd.EndFile, "hold-end-file", "", "hold: end the hold early, as if -hold had passed, once this file exists (looked for every -sample-every); "+
		"lets a script end several load processes' holds together")
	expectHold := fs.Bool("expect-hold", true, "overload: exit 1 when the criteria fail; false only reports (the unprotected comparison run)")
	jsonOut := fs.String("json-out", "", "also write the report as JSON to this file")
	runFile := fs.String("run-file", "", "also write the common NDJSON run file here (per second: smoke, overload every request and "+
		"the tiers' RSS and CPU; line, hold the players connected, waiting and admitted, hold the server's RSS; and the phases), "+
		"which loadtest report and loadtest compare read")
	label := fs.String("label", "", "names the run in -run-file, e.g. protected or unprotected (plots, comparisons)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	cli.UsageWithEnv(fs, "LOADTEST")
	if err := cli.Parse(fs, "LOADTEST", args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["label"] && *runFile == "" {
		fmt.Fprintln(stderr, "-label: names the run in -run-file; give -run-file too")
		return 2
	}
	if rc.RequestTimeout == 0 {
		rc.RequestTimeout = smokeRequestTimeout
		if *scenario == scenarioOverload {
			rc.RequestTimeout = overloadRequestTimeout
		}
	}
	if err := rc.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	switch *scenario {
	case scenarioSmoke:
		if err := sm.Validate(); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	case scenarioOverload:
		targets, err := loadtest.ParseMetricsTargets(metricsURLs)
		if err == nil {
			ov.MetricsTargets = targets
			ov.MaxRSSBytes = maxRSSMB * (1 << 20)
			err = ov.Validate()
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	case scenarioLine:
		if set["bots"] {
			ln.Bots = sm.Bots
		}
		if *dialParallel != 0 {
			ln.DialParallel = *dialParallel
		}
		if admin.URL != "" {
			ln.Admin = &admin
		}
		if err := ln.Validate(); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	case scenarioHold:
		if set["conns"] {
			hd.Conns = ov.Conns
		}
		if *dialParallel != 0 {
			hd.DialParallel = *dialParallel
		}
		if set["bound"] {
			hd.DialBound = ln.Bound
		}
		targets, err := loadtest.ParseMetricsTargets(metricsURLs)
		if err == nil && len(targets) > 1 {
			err = fmt.Errorf("-metrics-urls: hold reads one server's, got %d", len(targets))
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if len(targets) == 1 {
			hd.MetricsURL = targets[0].URL
		}
		if err := hd.Validate(); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	default:
		fmt.Fprintf(stderr, "-scenario: must be %s, %s, %s or %s, got %q\n", scenarioSmoke, scenarioOverload, scenarioLine, scenarioHold, *scenario)
		return 2
	}
	logger, err := cli.NewLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}

	ctx, stop := cli.SignalContext()
	defer stop()
	runner, err := loadtest.NewRunner(rc, logger)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	var rf *loadtest.RunFile
	if *runFile != "" {
		rf, err = loadtest.CreateRunFile(*runFile, report.Meta{Scenario: *scenario, Label: *label,
			Command: append([]string{"loadtest"}, args...)})
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	var rep legacyReport
	var problems []string
	var criteria []report.Criterion
	var warnings []string
	switch *scenario {
	case scenarioLine:
		ln.RunFile = rf
		lrep, err := runner.RunLine(ctx, ln)
		if err != nil {
			rf.Discard()
			return startError(stderr, err)
		}
		rep = lrep
		criteria, warnings = lrep.RunCriteria(), lrep.Warnings
		for _, c := range lrep.Criteria {
			if !c.Pass {
				problems = append(problems, c.Name+": "+c.Got)
			}
		}
	case scenarioHold:
		hd.RunFile = rf
		hrep, err := runner.RunHold(ctx, hd)
		if err != nil {
			rf.Discard()
			return startError(stderr, err)
		}
		rep = hrep
		criteria, warnings = hrep.RunCriteria(), hrep.Warnings
		if !hrep.Passed {
			problems = append(problems, fmt.Sprintf("held %d of %d, dropped %d", hrep.Held, hrep.Conns, hrep.Dropped))
			problems = append(problems, hrep.Warnings...)
		}
	case scenarioOverload:
		ov.RunFile = rf
		orep, err := runner.RunOverload(ctx, ov)
		if err != nil {
			rf.Discard()
			return startError(stderr, err)
		}
		rep = orep
		criteria, warnings = orep.RunCriteria(), orep.Warnings
		if !orep.Passed {
			for _, c := range orep.Criteria {
				if !c.Pass {
					problems = append(problems, c.Name+": "+c.Got)
				}
			}
		}
	default:
		srep, err := runner.RunRecorded(ctx, sm.Scenario(), rf)
		if err != nil {
			rf.Discard()
			return startError(stderr, err)
		}
		rep = srep
		criteria = srep.RunCriteria()
		problems = srep.Problems()
	}
	if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, rep); err != nil {
			fmt.Fprintf(stderr, "-json-out: %v\n", err)
			return 1
		}
	}
	if err := rf.End(criteria, warnings); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if len(problems) > 0 {
		fmt.Fprintln(stdout, "\nFAIL")
		for _, p := range problems {
			fmt.Fprintln(stdout, "  -", p)
		}
		if *scenario == scenarioOverload && !*expectHold {
			fmt.Fprintln(stdout, "(-expect-hold=false: reported, not failed)")
			return 0
		}
		return failCode
	}
	fmt.Fprintln(stdout, "\nPASS")
	return 0
}

// report is what both scenarios' reports can do.
type legacyReport interface {
	WriteTable(io.Writer) error
	WriteJSON(io.Writer) error
}

func startError(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, err)
	if errors.Is(err, target.ErrNonLocal) || errors.Is(err, loadtest.ErrScenario) {
		return 2
	}
	return 1
}

// uintVar binds a uint32 flag.
func uintVar(fs *flag.FlagSet, p *uint32, name, usage string) {
	fs.Func(name, fmt.Sprintf("%s (default %d)", usage, *p), func(s string) error {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return err
		}
		*p = uint32(v)
		return nil
	})
}

func writeJSON(path string, rep legacyReport) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// compare prints overload reports side by side: args are LABEL=path.json.
func compare(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: loadtest compare LABEL=report.json [LABEL=report.json ...]")
		return 2
	}
	var labels []string
	var reps []*loadtest.OverloadReport
	for _, a := range args {
		label, path, ok := strings.Cut(a, "=")
		if !ok {
			label, path = a, a
		}
		rep, err := loadtest.ReadOverloadReport(path)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		labels = append(labels, label)
		reps = append(reps, rep)
	}
	if err := loadtest.WriteComparison(stdout, labels, reps); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
