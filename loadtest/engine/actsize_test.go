package engine

import (
	mrand "math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/loadtest/reqtmpl"
	"github.com/leveehq/levee/loadtest/scenario"
)

const buildScenario = `arrivals:
  phases: [{duration: 1s, players: 1}]
players:
  login: {do: get_profile}
  actions:
    - {do: buy_item, weight: 1, request: {item_id: potion, quantity: {$choice: [{$range: [1, 3]}, 100], $weights: [9, 1]}}}
    - {do: start_battle, weight: 1, request: {battle_id: "{{job_id}}", units: 8, ticks: 200}}
`

func buildPlan(t *testing.T) *plan {
	t.Helper()
	sc, err := scenario.Parse("build.yaml", []byte(buildScenario), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlan(sc, Game{Game: arena.Game()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A template's generators draw the request; the encoded request is the
// action's own message.
func TestBuildDraws(t *testing.T) {
	p := buildPlan(t)
	buy := &p.acts[0]
	if buy.do != arena.ActionBuyItem || buy.critNm != "critical" || buy.fixed != nil {
		t.Fatalf("buy %+v: want buy_item, critical as declared, built per request", buy)
	}
	rnd := mrand.New(mrand.NewPCG(1, 2))
	seen := map[int32]int{}
	const n = 20_000
	for range n {
		m, b, err := buy.build(reqtmpl.Vars{}, rnd)
		if err != nil {
			t.Fatal(err)
		}
		var got arenapb.BuyItemRequest
		if err := proto.Unmarshal(b, &got); err != nil || !proto.Equal(&got, m) || got.GetItemId() != "potion" {
			t.Fatalf("encoded %v (%v), message %v", &got, err, m)
		}
		seen[got.GetQuantity()]++
	}
	for _, q := range []int32{1, 2, 3} {
		if seen[q] == 0 {
			t.Errorf("quantity %d never drawn", q)
		}
	}
	// About 10 % ask for 100: 2,000 of 20,000, well within 1,600..2,400.
	if o := seen[100]; o < 1600 || o > 2400 || len(seen) != 4 {
		t.Errorf("quantities %v: want 1..3 and 100 about 10 %% of the time", seen)
	}
}

// A template without generators draws nothing, so that the players' other
// choices stay what they were; one without placeholders is encoded once.
func TestBuildFixedUsesNoRandom(t *testing.T) {
	p := buildPlan(t)
	a, b := mrand.New(mrand.NewPCG(7, 7)), mrand.New(mrand.NewPCG(7, 7))
	fight := &p.acts[1]
	m, _, err := fight.build(reqtmpl.Vars{Player: "p-r-1", Job: "p-r-1-b3"}, a)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&arenapb.StartBattleRequest{BattleId: "p-r-1-b3", Units: 8, Ticks: 200}); !proto.Equal(m, want) {
		t.Fatalf("battle %v, want %v", m, want)
	}
	if _, _, err := p.login.build(reqtmpl.Vars{}, a); err != nil || p.login.fixed == nil || !p.hasLogin {
		t.Fatalf("login: fixed %v, err %v", p.login.fixed, err)
	}
	if a.Uint64() != b.Uint64() {
		t.Fatal("a template without generators drew from the player's random source")
	}
}

// A scenario asking for the ledger of a game without an auditor is
// refused before anything is sent.
func TestLedgerNeedsAnAuditor(t *testing.T) {
	sc, err := scenario.Parse("l.yaml", []byte(buildScenario+"ledger: true\n"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newPlan(sc, Game{Game: arena.Game()}); err == nil {
		t.Fatal("ledger without an auditor: no error")
	}
}
