// Command craft is the crafting game's whole cluster in one binary, built
// from Levee's exported packages alone:
//
//	craft gate     [flags]   the gate tier (gatecmd)
//	craft logic    [flags]   the logic tier (logiccmd)
//	craft battle   [flags]   the job tier, running the forge (battlecmd)
//	craft loadtest [args]    the load tool, driving craft's actions (loadtestcmd)
//
// Each subcommand takes the flags and environment of Levee's own binary
// of that tier; `craft <tier> -h` lists them.
package main

import (
	"fmt"
	"io"
	"os"

	"example.com/craft"
	"github.com/leveehq/levee/battle/battlecmd"
	"github.com/leveehq/levee/gate/gatecmd"
	"github.com/leveehq/levee/loadtest/loadtestcmd"
	"github.com/leveehq/levee/logic/logiccmd"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	g := craft.Game()
	switch cmd, rest := args[0], args[1:]; cmd {
	case "gate":
		return gatecmd.Main(g, rest)
	case "logic":
		return logiccmd.Main(g, rest)
	case "battle":
		return battlecmd.Main(g, rest)
	case "loadtest":
		return loadtestcmd.Main(g, rest, loadtestcmd.Options{})
	case "worker":
		// The load tool starts its worker processes as "<this binary>
		// worker" (more than one when a day needs more than 15,000
		// players): the loadtest's own subcommand.
		return loadtestcmd.Main(g, args, loadtestcmd.Options{})
	case "-h", "-help", "--help", "help":
		usage(stderr)
		return 0
	default:
		fmt.Fprintf(stderr, "craft: unknown command %q\n", cmd)
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: craft gate|logic|battle|loadtest [flags]
  gate      the gate tier: players' websockets, the line, admission
  logic     the logic tier: the players' state, craft's actions
  battle    the job tier: runs the forge job
  loadtest  the load tool, e.g. craft loadtest run launch.yaml
`)
}
