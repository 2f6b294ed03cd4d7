package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/loadtest/scenario"
)

const poolScenario = `pool:
  conns: 3
  phases:
    - {name: calm, duration: 1s, offered: 0.5}
    - {name: busy, duration: 1s, rate: 200}
players:
  actions:
    - {do: buy_item, weight: 1, request: {item_id: potion, quantity: 1}}
    - {do: start_battle, weight: 9, request: {battle_id: "{{job_id}}", units: 4, ticks: 50}}
client:
  request_timeout: 2s
`

func poolPlanOf(t *testing.T, sets ...string) (*plan, error) {
	t.Helper()
	sc, err := scenario.Parse("pool.yaml", []byte(poolScenario), sets, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newPlan(sc, Game{Game: arena.Game()})
}

// The mix is spread evenly: of two actions, exactly round(share x n) of
// the first in any n requests from 0.
func TestSpreadAct(t *testing.T) {
	p, err := poolPlanOf(t, "capacity=100")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{10, 95, 1000} {
		buys := 0
		for i := range n {
			if p.spreadAct(i).do == arena.ActionBuyItem {
				buys++
			}
		}
		if want := n / 10; buys != want {
			t.Errorf("%d requests: %d purchases, want %d", n, buys, want)
		}
	}
}

// Phases run back to back; offered is a multiple of the capacity, which
// it needs.
func TestPoolPlan(t *testing.T) {
	p, err := poolPlanOf(t, "capacity=100")
	if err != nil {
		t.Fatal(err)
	}
	ph := p.pool.phases
	if len(ph) != 2 || ph[0].rate != 50 || ph[0].from != 0 || ph[0].to != time.Second ||
		ph[1].rate != 200 || ph[1].from != time.Second || ph[1].to != 2*time.Second || p.end != 2*time.Second {
		t.Fatalf("phases %+v, end %v", ph, p.end)
	}
	m := p.pool.metaPhases(p.end, p.drain)
	if len(m) != 3 || m[0].Name != "calm" || m[1].From != 1 || m[2].Name != "drain" || m[2].From != 2 {
		t.Errorf("meta phases %+v", m)
	}
	if _, err := poolPlanOf(t); !errors.Is(err, scenario.ErrOfferedNoCapacity) {
		t.Errorf("without capacity: %v", err)
	}
}

// A pool run: the connections come up first, every planned request is
// sent once and answered, by phase, into the one recorder.
func TestPoolRun(t *testing.T) {
	g := clienttest.NewGameGate([]byte("s3cret"), arena.Game(), nil, nil)
	defer g.Close()
	sc, err := scenario.Parse("pool.yaml", []byte(poolScenario), []string{"capacity=100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := Run(context.Background(), Config{Scenario: sc, Gates: []string{g.URL()}, TokenSecret: "s3cret", Game: Game{Game: arena.Game()}})
	if err != nil {
		t.Fatal(err)
	}
	cs := run.Summary.Counters
	if cs["sent"]+cs[CounterPoolUnsent] != 250 || cs["lost"] != 0 || cs["ok"] != cs["sent"] || cs["dial_failures"] != 0 {
		t.Errorf("counters %v", cs)
	}
	if run.Summary.Peak["connected"] != 3 {
		t.Errorf("connected peak %v, want 3", run.Summary.Peak["connected"])
	}
	if len(run.Meta.Phases) != 3 || run.Meta.Phases[1].Name != "busy" {
		t.Errorf("phases %+v", run.Meta.Phases)
	}
	if len(run.Workers) != 1 || run.Workers[0].Peak != 3 {
		t.Errorf("workers %+v", run.Workers)
	}
}

// pool.max_rate cuts a phase's offered x capacity.
func TestPoolMaxRate(t *testing.T) {
	p, err := poolPlanOf(t, "capacity=1000", "pool.max_rate=300")
	if err != nil {
		t.Fatal(err)
	}
	if ph := p.pool.phases; ph[0].rate != 300 || ph[0].cut != 500 || ph[1].rate != 200 || ph[1].cut != 0 {
		t.Errorf("phases %+v", ph)
	}
}
