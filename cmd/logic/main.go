// Command logic runs Levee's logic tier for the demo game, arena: the
// sharded, durable owner of player state, behind bounded shard queues.
// `logic healthcheck` probes a running one. A game of its own builds the
// same command with logiccmd.Main.
package main

import (
	"os"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/logic/logiccmd"
)

func main() { os.Exit(logiccmd.Main(arena.Game(), os.Args[1:])) }
