package loadtestcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/leveehq/levee/internal/cli"
	"github.com/leveehq/levee/loadtest/engine"
	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/probe"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/scenario"
)

// Exit codes of run, report and compare (k6's convention for thresholds).
const (
	exitOK        = 0
	exitError     = 1  // could not run, or could not write the report
	exitUsage     = 2  // bad flags or a bad scenario file
	exitThreshold = 99 // a threshold failed
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// runScenario is `loadtest run [flags] FILE|PRESET`.
func runScenario(gm engine.Game, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sets stringList
	fs.Var(&sets, "set", "override a scenario field: PATH=VALUE with a YAML path (players.think=2s, arrivals.phases[1].players=500); repeatable")
	scale := fs.Float64("scale", 0, "players and release rates x this (0.1 = 8,000 players on launch day); 0: the scenario's")
	speed := fs.Float64("speed", 0, "run scenario time this many times faster than the wall clock; 0: the scenario's")
	var gates, admins, metrics, sources []string
	fs.Var((*cli.List)(&gates), "gate-urls", "comma-separated gate WebSocket URLs, ws:// or wss:// (loopback); player n goes to the n-th mod count (default ws://127.0.0.1:8080/ws)")
	fs.Var((*cli.List)(&admins), "admin-urls", "comma-separated gates' line admin URLs (http://127.0.0.1:8082/admin/line) the timeline changes; empty: the timeline is skipped")
	faultsSpec := fs.String("faults", "", "inject the timeline's fault steps: docker:PROJECT (the containers of compose project PROJECT, through the docker CLI; kill and fill need root on the Docker host); empty: fault steps are recorded as skipped")
	adminToken := fs.String("admin-token", "", "bearer token of the admin API; empty: $GATE_ADMIN_TOKEN (keeps it out of ps)")
	fs.Var((*cli.List)(&metrics), "metrics", "comma-separated tier=URL of the servers' /metrics (gate=, logic=, battle=) probed each second")
	secret := fs.String("token-secret", "levee-dev-secret", "the gates' token signing secret")
	keysFile := fs.String("token-keys", "", "the gates' key ring file (-token-keys): sign v2 tokens with its current key, as read at start; replaces -token-secret")
	workers := fs.Int("workers", 0, "load processes; 0: the scenario's run.workers, else as many as the peak needs")
	perWorker := fs.Int("per-worker", engine.DefaultPerWorker, "players one load process holds at most (the file limit is 20,000 per process)")
	fs.Var((*cli.List)(&sources), "source-addrs", "comma-separated loopback source addresses, one per worker in turn (127.0.0.11,127.0.0.12,...)")
	pid := fs.Int("pid", 0, "a server process on this machine whose resident memory (/proc/PID/status VmRSS) is read before the first player and each second: the rss_per_conn figure; 0: none")
	label := fs.String("label", "", "the run's label in reports (protected, unprotected)")
	out := fs.String("out", "", "write the run (NDJSON, one point per second) to this file")
	html := fs.String("html", "", "write the HTML report to this file")
	progressMode := fs.String("progress", "auto", "progress output: auto (updating line on a terminal, a line every 5 s otherwise), line, off")
	allowNonlocal := fs.Bool("allow-nonlocal", false, "allow targets that are not loopback")
	tlsF := addTLSFlags(fs)
	logLevel := fs.String("log-level", "warn", "log level: debug, info, warn, error")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadtest run [flags] FILE.yaml|PRESET   (loadtest scenarios lists the presets)")
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
	name := pos[0]
	var injector fault.Injector
	if *faultsSpec != "" {
		if injector, err = fault.ParseSpec(*faultsSpec); err != nil {
			fmt.Fprintln(stderr, "-faults:", err)
			return exitUsage
		}
	}
	if *adminToken == "" {
		*adminToken = getenv("GATE_ADMIN_TOKEN")
	}
	overrides := []string(sets)
	if *scale != 0 {
		overrides = append(overrides, "scale="+strconv.FormatFloat(*scale, 'g', -1, 64))
	}
	if *speed != 0 {
		overrides = append(overrides, "speed="+strconv.FormatFloat(*speed, 'g', -1, 64))
	}
	sc, err := scenario.Load(name, overrides)
	if err == nil {
		err = sc.Bind(gm.Game.Def())
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if len(gates) == 0 {
		gates = []string{"ws://127.0.0.1:8080/ws"}
	}
	tlsOpts, err := tlsF.options(stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	targets, logger, prog, tty, err := outputs(metrics, *logLevel, *progressMode, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	kid, key, err := signingKey(*secret, *keysFile)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	var outF *os.File
	cfg := engine.Config{
		Scenario: sc, Name: name, Overrides: overrides,
		Gates: gates, Admin: admins, AdminToken: *adminToken, Faults: injector, Metrics: targets, TokenSecret: key, TokenKeyID: kid,
		AllowNonlocal: *allowNonlocal, TLS: tlsOpts, Workers: *workers, PerWorker: *perWorker, SourceAddrs: sources, PID: *pid,
		Label: *label, Command: append([]string{"loadtest", "run"}, args...),
		Progress: prog, TTY: tty, Log: logger, Game: gm,
	}
	if *out != "" {
		if outF, err = os.Create(*out); err != nil {
			fmt.Fprintln(stderr, "-out:", err)
			return exitError
		}
		defer outF.Close()
		cfg.Out = outF
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	fmt.Fprintf(stderr, "loadtest: %s (%s): peak %.0f players at scale %g, speed %g: %s of wall time, %d gate(s)\n",
		sc.Name, sc.File, sc.WallCurve().Peak(), sc.Scale, sc.Speed, sc.WallDuration(), len(gates))
	run, err := engine.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if outF != nil {
		if err := outF.Close(); err != nil {
			fmt.Fprintln(stderr, "-out:", err)
			return exitError
		}
	}
	return finish(run, *html, *out, stdout, stderr)
}

// outputs reads the flags run and capacity share: the -metrics targets,
// the -log-level logger and the -progress writer (nil: off; tty: an
// updating line).
func outputs(metrics []string, logLevel, progressMode string, stderr io.Writer) (targets []probe.Target, logger *slog.Logger, prog io.Writer, tty bool, err error) {
	if targets, err = probe.ParseTargets(metrics); err != nil {
		return nil, nil, nil, false, fmt.Errorf("-metrics: %w", err)
	}
	if logger, err = cli.NewLogger(stderr, logLevel); err != nil {
		return nil, nil, nil, false, err
	}
	switch progressMode {
	case "auto":
		return targets, logger, stderr, isTerminal(os.Stderr), nil
	case "line":
		return targets, logger, stderr, false, nil
	case "off":
		return targets, logger, nil, false, nil
	}
	return nil, nil, nil, false, fmt.Errorf("-progress: want auto, line or off, got %q", progressMode)
}

// parseInterleaved parses flags before and after the positional
// arguments (`loadtest run launch -scale 0.1`), which flag.Parse alone stops
// at; it returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// finish prints the table, writes the HTML and returns the exit code.
func finish(run *report.Run, html, out string, stdout, stderr io.Writer) int {
	if err := report.WriteTable(stdout, run); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	if html != "" {
		if err := writeHTML(html, run); err != nil {
			fmt.Fprintln(stderr, "-html:", err)
			return exitError
		}
		fmt.Fprintf(stdout, "HTML report: %s\n", html)
	}
	if out != "" {
		fmt.Fprintf(stdout, "run file: %s (loadtest report %s rebuilds this)\n", out, out)
	}
	for _, c := range run.Criteria {
		if !c.Passed {
			fmt.Fprintln(stdout, "\nFAIL: a threshold failed")
			return exitThreshold
		}
	}
	fmt.Fprintln(stdout, "\nPASS")
	return exitOK
}

func writeHTML(path string, runs ...*report.Run) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := report.WriteHTML(f, runs...); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// reportCmd is `loadtest report [-html FILE] run.ndjson`.
func reportCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	html := fs.String("html", "", "write the HTML report to this file")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: loadtest report [-html report.html] run.ndjson")
		return exitUsage
	}
	run, err := readRun(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	return finish(run, *html, "", stdout, stderr)
}

func readRun(path string) (*report.Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return report.Read(f)
}

// compareRuns is `loadtest compare [-html FILE] a.ndjson b.ndjson ...`.
func compareRuns(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	html := fs.String("html", "", "write one HTML report with every run's curves on the same plots")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(pos) < 2 {
		fmt.Fprintln(stderr, "usage: loadtest compare [-html compare.html] a.ndjson b.ndjson [...]")
		return exitUsage
	}
	var runs []*report.Run
	for _, p := range pos {
		run, err := readRun(p)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitUsage
		}
		if run.Meta.Label == "" {
			run.Meta.Label = p
		}
		runs = append(runs, run)
	}
	if err := report.WriteCompare(stdout, runs...); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	if *html != "" {
		if err := writeHTML(*html, runs...); err != nil {
			fmt.Fprintln(stderr, "-html:", err)
			return exitError
		}
		fmt.Fprintf(stdout, "HTML report: %s\n", *html)
	}
	return exitOK
}

// listScenarios is `loadtest scenarios`.
func listScenarios(stdout io.Writer) int {
	for _, p := range scenario.Presets() {
		fmt.Fprintf(stdout, "%-10s %s\n", p.Name, p.Description)
	}
	return exitOK
}

// workerCmd is `loadtest worker`: a load process started by `loadtest run`.
func workerCmd(gm engine.Game, stderr io.Writer) int {
	logger, _ := cli.NewLogger(stderr, "warn")
	ctx, stop := cli.SignalContext()
	defer stop()
	if err := engine.Worker(ctx, gm, os.Stdin, os.Stdout, logger); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	return exitOK
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
