package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenaledger"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/loadtest/scenario"
)

const replayScenario = `arrivals:
  phases:
    - {duration: 500ms, players: 4}
    - {duration: 1s, players: 4}
players:
  login: {do: get_profile}
  actions:
    - {do: buy_item, weight: 1, request: {item_id: potion, quantity: 1}}
    - {do: start_battle, weight: 1, request: {battle_id: "{{job_id}}", units: 2, ticks: 10}}
    - {do: get_profile, weight: 1}
  think: 100ms
client:
  request_timeout: 2s
replay_check: 1000
run:
  duration: 2s
  drain: 1s
`

// lastingGame plays arena with each player's state and stored outcomes
// kept across its connections, as logic keeps them: a resend on a new
// connection is answered replayed.
func lastingGame() clienttest.Handler {
	g := arena.Game()
	var mu sync.Mutex
	players := map[string]*clienttest.Player{}
	return func(c *clienttest.Conn) {
		for {
			f, err := c.Recv()
			if err != nil {
				return
			}
			mu.Lock()
			p := players[c.Player]
			if p == nil {
				p = clienttest.NewPlayer(g.Def(), c.Player)
				players[c.Player] = p
			}
			out := p.Serve(c.Context(), f, time.Now())
			mu.Unlock()
			out.Backpressure = apperr.NewBackpressure(0, 0, 0)
			if c.Send(out) != nil {
				return
			}
		}
	}
}

func runReplay(t *testing.T, h clienttest.Handler) map[string]int64 {
	t.Helper()
	gate := clienttest.NewGameGate([]byte("s3cret"), arena.Game(), nil, h)
	defer gate.Close()
	sc, err := scenario.Parse("replay.yaml", []byte(replayScenario), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := Run(context.Background(), Config{Scenario: sc, Gates: []string{gate.URL()}, TokenSecret: "s3cret", Game: Game{Game: arena.Game()}})
	if err != nil {
		t.Fatal(err)
	}
	return run.Summary.Counters
}

// Every acknowledged mutation resent after the run is answered replayed
// by a server that keeps its outcomes.
func TestReplayCheckPasses(t *testing.T) {
	cs := runReplay(t, lastingGame())
	acked := cs["buy_item/ok"] + cs["start_battle/ok"]
	if acked == 0 || cs[CounterReplayChecks] != 1 || cs[CounterReplayChecked] != acked ||
		cs[CounterReplayFresh]+cs[CounterReplayFailed]+cs[CounterReplayUnchecked] != 0 {
		t.Fatalf("counters %v: want every one of the %d acknowledged mutations replayed", cs, acked)
	}
}

// A server that forgets outcomes between connections (clienttest's game
// keeps them per connection) applies the resends again: replay_fresh.
func TestReplayCheckFindsFreshApplies(t *testing.T) {
	cs := runReplay(t, nil)
	acked := cs["buy_item/ok"] + cs["start_battle/ok"]
	if acked == 0 || cs[CounterReplayFresh] != acked || cs[CounterReplayChecked] != 0 {
		t.Fatalf("counters %v: want all %d resends applied fresh", cs, acked)
	}
}

// Arena's ledger as the auditor, end to end through the engine and the
// SDK: a server that keeps its players balances (nothing lost, doubled or
// phantom), and the figures are the ledger's names.
func TestLedgerAuditorBalances(t *testing.T) {
	gate := clienttest.NewGameGate([]byte("s3cret"), arena.Game(), nil, lastingGame())
	defer gate.Close()
	sc, err := scenario.Parse("ledger.yaml", []byte(replayScenario+"ledger: true\n"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := Run(context.Background(), Config{Scenario: sc, Gates: []string{gate.URL()}, TokenSecret: "s3cret",
		Game: Game{Game: arena.Game(), Audit: arenaledger.New}})
	if err != nil {
		t.Fatal(err)
	}
	cs := run.Summary.Counters
	acked := cs["buy_item/ok"] + cs["start_battle/ok"]
	if acked == 0 || cs["ledger_checks"] != 1 || cs["ledger_players"] != 4 || cs["ledger_acked"] != acked ||
		cs["ledger_lost"]+cs["ledger_doubled"]+cs["ledger_phantom"]+cs["ledger_mismatch"]+cs["ledger_unchecked"] != 0 ||
		cs[CounterReplayChecked] != acked {
		t.Fatalf("counters %v: want the 4 players balanced with their %d acknowledged mutations", cs, acked)
	}
}
