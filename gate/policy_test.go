package gate

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/serve/servetest"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func buyOne(id uint64) *leveev2.ClientFrame    { return buyFrame(id, "sword", 1) }
func battleOne(id uint64) *leveev2.ClientFrame { return battleFrame(id, "b1") }

// A client that asks for CRITICAL on every frame gets the declared class:
// what reaches logic is the gate's decision, the request is still served,
// and the refused upgrade is counted. Lowering is honoured.
func TestClientCannotRaiseItsClass(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	const unknown = leveev2.Criticality(7) // a number the proto does not define
	cases := []struct {
		frame   func(uint64) *leveev2.ClientFrame
		asked   leveev2.Criticality
		want    priority.Class
		upgrade bool
	}{
		{battleOne, critical, priority.Default, true},
		{battleOne, leveev2.Criticality_CRITICALITY_UNSPECIFIED, priority.Default, false},
		{battleOne, dflt, priority.Default, false},
		{battleOne, sheddable, priority.Sheddable, false},
		{battleOne, unknown, priority.Default, false},
		{profileFrame, critical, priority.Default, true},
		{profileFrame, leveev2.Criticality_CRITICALITY_UNSPECIFIED, priority.Default, false},
		{profileFrame, sheddable, priority.Sheddable, false},
		{buyOne, leveev2.Criticality_CRITICALITY_UNSPECIFIED, priority.Critical, false},
		{buyOne, critical, priority.Critical, false},
		{buyOne, unknown, priority.Critical, false},
		{buyOne, dflt, priority.Default, false},
		{buyOne, sheddable, priority.Sheddable, false},
	}
	upgrades := map[string]float64{}
	for p, sub := range map[string]string{"alice": wire.ProtoSubprotocol, "bob": wire.JSONSubprotocol} {
		c, _ := g.connect(t, p, sub)
		for i, tc := range cases {
			id := uint64(100 + i)
			f := tc.frame(id)
			action := f.GetAction()
			if rep := ask(c, f, tc.asked); rep.GetRequestId() != id || rep.GetError() != nil {
				t.Fatalf("%s %s asking %v: %v, want it served", sub, action, tc.asked, rep)
			}
			got, ok := logic.classOf(id)
			if !ok {
				t.Fatalf("%s %s: logic never saw request %d", sub, action, id)
			}
			if got != tc.want {
				t.Errorf("%s %s asking %v reached logic as %v, want %v", sub, action, tc.asked, got, tc.want)
			}
			if tc.upgrade {
				upgrades[action]++
			}
		}
	}
	for _, action := range []string{arena.ActionStartBattle, arena.ActionGetProfile, arena.ActionBuyItem} {
		if got := testutil.ToFloat64(g.m.upgrades.WithLabelValues(action)); got != upgrades[action] {
			t.Errorf("gate_criticality_upgrades_refused_total{%s} = %v, want %v", action, got, upgrades[action])
		}
	}
	if upgrades[arena.ActionStartBattle] != 2 || upgrades[arena.ActionGetProfile] != 2 {
		t.Fatalf("the test asked for %v upgrades", upgrades)
	}
}

// The lowering rule over every declared class and every request: the
// lower of the two, the declared class for UNSPECIFIED and unknown
// numbers, and an upgrade exactly when the request asks for more.
func TestClassForLowersNeverRaises(t *testing.T) {
	asks := []leveev2.Criticality{leveev2.Criticality_CRITICALITY_UNSPECIFIED, critical, dflt, sheddable, 42}
	for _, declared := range priority.Classes {
		for _, asked := range asks {
			got, upgrade := classFor(declared, asked)
			want, wantUp := declared, false
			if c, ok := priority.FromProto(asked); ok {
				want, wantUp = min(c, declared), c > declared
			}
			if got != want || upgrade != wantUp {
				t.Errorf("classFor(%v, %v) = %v, %v, want %v, %v", declared, asked, got, upgrade, want, wantUp)
			}
		}
	}
	if loginCriticality != priority.Critical {
		t.Errorf("login is %v, want critical", loginCriticality)
	}
}

// otherGame is a game unlike arena: a sheddable emote, a critical trade, a
// default query that reads another player's state, a job action.
func otherGame() *game.Game {
	g := game.New("other", func(id string) *wrapperspb.StringValue { return wrapperspb.String(id) })
	game.Mutation(g, "emote", game.Sheddable, func(c *game.Ctx, s *wrapperspb.StringValue, r *wrapperspb.StringValue) (*emptypb.Empty, *wrapperspb.StringValue, error) {
		return &emptypb.Empty{}, nil, nil
	})
	game.Mutation(g, "trade", game.Critical, func(c *game.Ctx, s *wrapperspb.StringValue, r *wrapperspb.Int64Value) (*emptypb.Empty, *wrapperspb.StringValue, error) {
		return &emptypb.Empty{}, nil, nil
	}, game.MaxRequestBytes(8))
	game.Query(g, "look", game.Default, func(c *game.Ctx, s *wrapperspb.StringValue, r *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		return s, nil
	}, game.ReadsPlayer(func(r *wrapperspb.StringValue) string { return r.GetValue() }))
	game.Job(g, "craft", func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) { return r, nil })
	game.JobAction(g, "collect", game.Default, "craft",
		func(r *wrapperspb.StringValue) string { return r.GetValue() },
		func(c *game.Ctx, s *wrapperspb.StringValue, r *wrapperspb.StringValue) (*wrapperspb.Int64Value, error) {
			return wrapperspb.Int64(1), nil
		},
		func(c *game.Ctx, s *wrapperspb.StringValue, r *wrapperspb.StringValue, res *wrapperspb.Int64Value) (*emptypb.Empty, *wrapperspb.StringValue, error) {
			return &emptypb.Empty{}, nil, nil
		})
	return g
}

// The gate's classes, cooling kinds and metrics come from the declaration:
// another game's actions get their declared classes, their own counters,
// and a job action cools as a job.
func TestClassesComeFromTheDeclaration(t *testing.T) {
	g := startGate(t, func(c *Config) { c.Game = otherGame() }, startFakeLogic(t))
	want := map[string]struct {
		class priority.Class
		kind  int
	}{
		"emote":   {priority.Sheddable, kindOther},
		"trade":   {priority.Critical, kindOther},
		"look":    {priority.Default, kindOther},
		"collect": {priority.Default, kindJob},
	}
	if len(g.actions) != len(want) {
		t.Fatalf("the gate knows %d actions, the game declares %d", len(g.actions), len(want))
	}
	for name, w := range want {
		a := g.actions[name]
		if a == nil || a.class != w.class || a.kind != w.kind || a.name != name {
			t.Errorf("action %s: %+v, want class %v kind %d", name, a, w.class, w.kind)
			continue
		}
		if a.upgradeRefused == nil {
			t.Errorf("action %s has no gate_criticality_upgrades_refused_total counter", name)
		}
	}
	body := scrapeMetrics(t, g)
	for name := range want {
		if !strings.Contains(body, `gate_criticality_upgrades_refused_total{action="`+name+`"} 0`) {
			t.Errorf("no upgrades counter for %s in /metrics", name)
		}
	}
	if strings.Contains(body, arena.ActionBuyItem) {
		t.Error("another game's gate has arena's actions in /metrics")
	}
}

// A declaration that cannot work is refused at start with its message.
func TestNewRefusesABadDeclaration(t *testing.T) {
	logic := startFakeLogic(t)
	bad := game.New("bad", func(id string) *wrapperspb.StringValue { return wrapperspb.String(id) })
	game.Mutation[*wrapperspb.StringValue, *wrapperspb.StringValue, *emptypb.Empty](bad, "wave", 0, func(c *game.Ctx, s *wrapperspb.StringValue, r *wrapperspb.StringValue) (*emptypb.Empty, *wrapperspb.StringValue, error) {
		return nil, nil, nil
	})
	cfg := DefaultConfig()
	cfg.Addr, cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.LogicAddrs = []string{logic.addr}
	cfg.Game = bad
	if s, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), `action "wave" has no class`) {
		if s != nil {
			_ = s.logic.close()
		}
		t.Fatalf("New: %v, want the declaration refused naming the action", err)
	}
	cfg.Game = nil
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "no game") {
		t.Fatalf("New without a game: %v", err)
	}
}

func scrapeMetrics(t *testing.T, g *testGate) string {
	t.Helper()
	code, body := servetest.Get(t, "http://"+g.OpsAddr().String()+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	return body
}
