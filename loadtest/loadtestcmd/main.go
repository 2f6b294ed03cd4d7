// Package loadtestcmd is the loadtest command of a game: Main plays
// load-test scenarios of the game's actions against a Levee cluster on
// this machine and reports what it did. A game's own binary is
//
//	func main() { os.Exit(loadtestcmd.Main(mygame.Game(), os.Args[1:], loadtestcmd.Options{})) }
//
// (cmd/loadtest is arena's, with arena's ledger as its auditor). Its
// subcommands:
//
//	loadtest run [flags] FILE|PRESET        play a scenario (the players engine)
//	loadtest capacity [flags] FILE|PRESET   measure the requests/s the cluster serves of a scenario's mix
//	loadtest scenarios                      list the embedded presets
//	loadtest report [-html F] RUN.ndjson    the table (and plots) of a run file again
//	loadtest compare [-html F] A.ndjson B.ndjson ...
//	                                        runs side by side, per second
//	loadtest figure RUN.ndjson FIGURE       one figure of a run file, in the thresholds' language
//	loadtest reliability -out F RUN...      the failure drills' RELIABILITY.md
//	loadtest worker                         a load process started by run (not for people)
//
// A scenario is a YAML file (the language: loadtest/scenarios/README.md);
// the presets are launch (the default), smoke, overload, line, hold,
// hold-bare and hold-line (arena's: a game's own scenarios are files).
// Exit codes: 0 the run passed its thresholds,
// 99 it completed and a threshold failed, 2 bad flags or a bad scenario
// (nothing was sent, also for a target that is not loopback), 1 the run
// could not be done.
package loadtestcmd

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/loadtest/audit"
	"github.com/leveehq/levee/loadtest/engine"
)

// Options are what a game's loadtest binary adds to Main; the zero value
// is ready to use.
type Options struct {
	// Audit makes the game's auditor for scenarios with ledger: true
	// (arena: arenaledger.New); nil: the game has none.
	Audit audit.Factory
	// Stdout and Stderr default to os.Stdout and os.Stderr, Getenv to
	// os.Getenv.
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// Main runs the loadtest command line args (without the program's name)
// for game g and returns the exit code. g's declaration is validated
// first: one that cannot work is refused (exit 2) with its message.
func Main(g *game.Game, args []string, opts Options) int {
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if g == nil {
		fmt.Fprintln(opts.Stderr, "loadtest: no game")
		return exitUsage
	}
	if err := g.Validate(); err != nil {
		fmt.Fprintf(opts.Stderr, "loadtest: game %s: %v\n", g.Name(), err)
		return exitUsage
	}
	return run(engine.Game{Game: g, Audit: opts.Audit}, args, opts.Getenv, opts.Stdout, opts.Stderr)
}

// commands are the subcommands, in the order usage lists them.
var commands = []string{"run", "capacity", "scenarios", "report", "compare", "figure", "reliability", "worker"}

func run(gm engine.Game, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runScenario(gm, args[1:], getenv, stdout, stderr)
	case "capacity":
		return capacityCmd(gm, args[1:], stdout, stderr)
	case "report":
		return reportCmd(args[1:], stdout, stderr)
	case "compare":
		return compareRuns(args[1:], stdout, stderr)
	case "scenarios":
		return listScenarios(stdout)
	case "worker":
		return workerCmd(gm, stderr)
	case "reliability":
		return reliabilityCmd(args[1:], stdout, stderr)
	case "figure":
		return figureCmd(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "loadtest: %s: the flags come after a subcommand; the scenarios that had flags of their own "+
			"(-scenario smoke, overload, line, hold) are presets now: loadtest run smoke (loadtest scenarios lists them)\n", args[0])
		return exitUsage
	}
	fmt.Fprintf(stderr, "loadtest: unknown command %q; the commands are %s\n", args[0], strings.Join(commands, ", "))
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: loadtest COMMAND [flags] [args]")
	fmt.Fprintln(w, "  run [flags] FILE|PRESET        play a scenario (loadtest run -h for its flags)")
	fmt.Fprintln(w, "  capacity [flags] FILE|PRESET   measure the requests/s the cluster serves of the scenario's mix")
	fmt.Fprintln(w, "  scenarios                      list the presets")
	fmt.Fprintln(w, "  report [-html F] RUN.ndjson    the table (and plots) of a run file again")
	fmt.Fprintln(w, "  compare [-html F] A.ndjson B.ndjson ...   runs side by side")
	fmt.Fprintln(w, "  figure RUN.ndjson FIGURE       one figure of a run file (e.g. goodput[overload], p(99))")
	fmt.Fprintln(w, "  reliability -out F RUN...      the failure drills' RELIABILITY.md")
}
