// Command loadtest drives simulated players against a Levee gate on this
// machine and prints what happened. It exits 0 when every request got
// exactly one reply and the only errors were typed business errors, 1
// otherwise (saying why), and 2 on bad flags or a target that is not
// loopback.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"levee/internal/cli"
	"levee/loadtest"
)

func main() { os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr)) }

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	rc := loadtest.DefaultRunnerConfig()
	sm := loadtest.DefaultSmoke()
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&rc.GateURL, "gate-url", rc.GateURL, "gate WebSocket URL; must be loopback")
	fs.StringVar(&rc.TokenSecret, "token-secret", rc.TokenSecret, "the gate's token signing secret")
	fs.BoolVar(&rc.AllowNonlocal, "allow-nonlocal", false, "allow a -gate-url that is not loopback")
	fs.DurationVar(&rc.RequestTimeout, "request-timeout", rc.RequestTimeout, "per-request timeout (also the dial timeout)")
	fs.Float64Var(&rc.JSONFraction, "json-fraction", rc.JSONFraction, "share of bots speaking protojson instead of binary")
	fs.Uint64Var(&rc.Seed, "seed", 0, "random seed for the bots' choices; 0 picks one (reported)")
	fs.StringVar(&rc.RunID, "run-id", "", "names the players bot-<run id>-<n>; empty picks one")
	fs.DurationVar(&rc.ProgressEvery, "progress", rc.ProgressEvery, "log progress this often; 0 never")
	fs.IntVar(&sm.Bots, "bots", sm.Bots, "number of bots")
	fs.DurationVar(&sm.Ramp, "ramp", sm.Ramp, "bots arrive evenly over this long")
	fs.DurationVar(&sm.Duration, "duration", sm.Duration, "length of the run, ramp included")
	fs.DurationVar(&sm.Think, "think", sm.Think, "mean pause between a bot's actions")
	fs.Float64Var(&sm.ThinkJitter, "think-jitter", sm.ThinkJitter, "pauses are uniform in think*(1±jitter)")
	fs.Var((*cli.List)(&sm.Items), "items", "comma-separated item ids the bots buy")
	fs.Float64Var(&sm.OverspendFraction, "overspend-fraction", sm.OverspendFraction, "share of purchases beyond a player's gold")
	fs.IntVar(&sm.MaxRequests, "max-requests", 0, "bound on all requests; 0 derives it from bots, duration and think")
	jsonOut := fs.String("json-out", "", "also write the report as JSON to this file")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	cli.UsageWithEnv(fs, "LOADTEST")
	if err := cli.Parse(fs, "LOADTEST", args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := rc.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := sm.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
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
	rep, err := runner.Run(ctx, sm.Scenario())
	if err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, loadtest.ErrNonLocal) || errors.Is(err, loadtest.ErrScenario) {
			return 2
		}
		return 1
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
	if problems := rep.Problems(); len(problems) > 0 {
		fmt.Fprintln(stdout, "\nFAIL")
		for _, p := range problems {
			fmt.Fprintln(stdout, "  -", p)
		}
		return 1
	}
	fmt.Fprintln(stdout, "\nPASS")
	return 0
}

func writeJSON(path string, rep *loadtest.Report) error {
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
