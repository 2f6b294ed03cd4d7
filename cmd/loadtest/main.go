// Command loadtest is arena's load tool: loadtestcmd.Main with arena's
// declaration and its ledger (examples/arena/arenaledger) as the auditor.
// See package loadtest/loadtestcmd for the subcommands.
package main

import (
	"os"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenaledger"
	"github.com/leveehq/levee/loadtest/loadtestcmd"
)

func main() {
	os.Exit(loadtestcmd.Main(arena.Game(), os.Args[1:], loadtestcmd.Options{Audit: arenaledger.New}))
}
