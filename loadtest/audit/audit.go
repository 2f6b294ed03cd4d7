// Package audit is how a game's own checks plug into the load tool: an
// Auditor keeps the game's record of what a load process's players sent
// and got, and after the run checks it against what the cluster says
// (arena's is examples/arena/arenaledger: lost, doubled and phantom
// purchases and battle rewards). The engine knows nothing of the game: it
// hands the auditor every welcome, every request as it ended and every
// answer to a resend, and adds the figures Check returns to the run's
// counters, under the names the auditor gives them (thresholds name them
// too: ledger_lost == 0).
//
// A scenario asks for the check with `ledger: true`; the game's load tool
// registers its auditor (loadtestcmd.Options.Audit). A game without one
// refuses such a scenario.
package audit

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/gamedef"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Call is one request a player made, as it ended (after the SDK's
// retries).
type Call struct {
	Player    string
	Action    *gamedef.Action // the declared action
	RequestID uint64          // 0: none was chosen (nothing sent)
	Request   proto.Message   // the request as sent
	// Sends is how many times it went on the wire
	// (client.CallInfo.Attempts): 0 and not unresolved means it was never
	// sent.
	Sends int
	// Frame is the answering frame (a reply: its bytes, replayed and
	// version; or the error's frame); nil without one.
	Frame *leveev2.ServerFrame
	Err   error // nil for a reply; an *client.UnresolvedError when the outcome is unknown
}

// Conn is a player's connection as a check uses it (*client.Client).
type Conn interface {
	Send(ctx context.Context, action string, request []byte) (*leveev2.ServerFrame, error)
	Resend(ctx context.Context, f *leveev2.ClientFrame) (*leveev2.ServerFrame, error)
	Welcome() *leveev2.Welcome
	Err() error
	Close() error
}

// CheckConfig is how a check reaches the players.
type CheckConfig struct {
	// Dial connects as player (no SDK retries, budget or pacing: the
	// check retries by itself, within its own time).
	Dial func(ctx context.Context, player string) (Conn, error)
	// Timeout bounds the whole check; Call one request of it.
	Timeout, Call time.Duration
	Clock         clock.Clock
	Log           *slog.Logger
}

// Auditor is a game's record of one load process's requests. Its methods
// are called concurrently, by every player of the process.
type Auditor interface {
	// Welcome notes the welcome of a player's connection (its state and
	// version), on every connection.
	Welcome(player string, w *leveev2.Welcome)
	// Call notes a request as it ended.
	Call(c Call)
	// Resolve notes the answer to a resend (client.Resend) of player's
	// unresolved request id.
	Resolve(player string, id uint64, f *leveev2.ServerFrame, err error)
	// Check settles and checks the record after the run's drain, within
	// cfg.Timeout, and returns its figures by counter name (all of them,
	// zeros too: a checked run says 0 lost, not nothing).
	Check(ctx context.Context, cfg CheckConfig) map[string]int64
}

// Factory makes one load process's Auditor for game g.
type Factory func(g *game.Game) Auditor

// CounterChecks counts the load processes whose check ran: a run without
// one has no figures (missing, not 0: a zero counter does not show).
const CounterChecks = "ledger_checks"
