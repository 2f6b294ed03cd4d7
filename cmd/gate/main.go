// Command gate runs Levee's gate tier for the demo game, arena (see
// gate/gatecmd for the flags, and for a game's own gate binary).
package main

import (
	"os"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/gate/gatecmd"
)

func main() { os.Exit(gatecmd.Main(arena.Game(), os.Args[1:])) }
