// Command battle runs Levee's battle tier for the default game, arena:
// deterministic, CPU-heavy battle simulations over gRPC (its job
// "simulate"). `battle healthcheck` probes a running one. A game's own
// binary is the same line with its game (package battle/battlecmd).
package main

import (
	"os"

	"github.com/leveehq/levee/battle/battlecmd"
	"github.com/leveehq/levee/examples/arena"
)

func main() { os.Exit(battlecmd.Main(arena.Game(), os.Args[1:])) }
