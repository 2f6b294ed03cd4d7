package loadtestcmd

import (
	"io"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenaledger"
)

// runArena is the command line of the default binary, cmd/loadtest:
// arena with its ledger.
func runArena(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return Main(arena.Game(), args, Options{Audit: arenaledger.New, Getenv: getenv, Stdout: stdout, Stderr: stderr})
}
