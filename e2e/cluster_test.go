package e2e

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/leveehq/levee/battle"
	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenaclient"
	"github.com/leveehq/levee/examples/arena/arenaledger"
	"github.com/leveehq/levee/gate"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/loadtest/engine"
	"github.com/leveehq/levee/logic"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

var testSecret = []byte("e2e-secret")

// cluster is the three tiers running in this process on loopback ports.
type cluster struct {
	gateURL string
	gate    *gate.Server
	// The tiers' ops addresses (http://host:port), for their /metrics.
	battleOps         []string
	logicOps, gateOps string
	stop              map[string]func() error // tier name -> cancel and wait for Run
}

// arenaDriven is the demo game as the load engine drives it, with its
// ledger.
func arenaDriven() engine.Game { return engine.Game{Game: arena.Game(), Audit: arenaledger.New} }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runTier starts run in a goroutine and returns a func that cancels it and
// returns Run's error.
func runTier(t *testing.T, run func(context.Context) error) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				err = errors.New("Run did not return within 30s of cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// tiers says how startTiers starts the cluster: how many battle
// instances (1 if 0), logic's data directory (a temporary one if empty),
// and changes to each tier's default config (nil: none).
type tiers struct {
	battles int
	dataDir string
	battle  func(*battle.Config)
	logic   func(*logic.Config)
	gate    func(*gate.Config)
}

// startTiers starts battle, logic and a gate in this process on loopback
// ports, each stopped when the test ends.
func startTiers(t *testing.T, o tiers) *cluster {
	t.Helper()
	c := &cluster{stop: map[string]func() error{}}
	var battleAddrs []string
	for i := range max(o.battles, 1) {
		cfg := battle.DefaultConfig()
		cfg.Game = arena.Game()
		cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
		if o.battle != nil {
			o.battle(&cfg)
		}
		b, err := battle.New(cfg, quietLogger())
		if err != nil {
			t.Fatal(err)
		}
		battleAddrs = append(battleAddrs, b.GRPCAddr().String())
		c.battleOps = append(c.battleOps, "http://"+b.OpsAddr().String())
		c.stop["battle"+string(rune('1'+i))] = runTier(t, b.Run)
	}
	lcfg := logic.DefaultConfig()
	lcfg.Game = arena.Game()
	lcfg.GRPCAddr, lcfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	lcfg.DataDir = o.dataDir
	if lcfg.DataDir == "" {
		lcfg.DataDir = t.TempDir()
	}
	lcfg.BattleAddrs = battleAddrs
	if o.logic != nil {
		o.logic(&lcfg)
	}
	l, err := logic.New(lcfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	c.logicOps = "http://" + l.OpsAddr().String()
	c.stop["logic"] = runTier(t, l.Run)

	gcfg := gate.DefaultConfig()
	gcfg.Game = arena.Game()
	gcfg.Addr, gcfg.GRPCAddr, gcfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	gcfg.LogicAddrs = []string{l.GRPCAddr().String()}
	gcfg.TokenSecret = string(testSecret)
	if o.gate != nil {
		o.gate(&gcfg)
	}
	g, err := gate.New(gcfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	c.gate = g
	c.gateURL = (&url.URL{Scheme: "ws", Host: g.Addr().String(), Path: "/ws"}).String()
	c.gateOps = "http://" + g.OpsAddr().String()
	c.stop["gate"] = runTier(t, g.Run)
	return c
}

// startCluster is two battle instances, logic on dataDir and a gate, with
// their default configs.
func startCluster(t *testing.T, dataDir string) *cluster {
	t.Helper()
	return startTiers(t, tiers{battles: 2, dataDir: dataDir})
}

func dial(t *testing.T, c *cluster, player string, json bool) *client.Client {
	t.Helper()
	tok, err := token.Sign(testSecret, player, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.gateURL, tok, arenaclient.Options(client.Options{JSON: json}))
	if err != nil {
		t.Fatalf("dial as %s: %v", player, err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, err error, code leveev2.ErrorCode) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("err = %v, want typed %v", err, code)
	}
}

// TestGameLoop plays the whole loop through all three tiers: login, profile,
// purchase, battle, and the typed errors a player can meet.
func TestGameLoop(t *testing.T) {
	c := startCluster(t, t.TempDir())
	for _, json := range []bool{false, true} {
		player := "alice"
		if json {
			player = "bob-json"
		}
		cl := dial(t, c, player, json)
		ctx := ctxT(t)
		w, err := arenaclient.Profile(cl)
		if err != nil {
			t.Fatal(err)
		}
		if w.GetId() != player || w.GetGold() != 1000 || w.GetLevel() != 1 {
			t.Fatalf("welcome player = %v", w)
		}

		buy, _, err := arenaclient.BuyItem(ctx, cl, "sword", 1)
		if err != nil {
			t.Fatal(err)
		}
		if buy.GetPlayer().GetGold() != 900 || buy.GetPlayer().GetInventory()["sword"] != 1 {
			t.Fatalf("after buying a sword: %v", buy.GetPlayer())
		}
		_, _, err = arenaclient.BuyItem(ctx, cl, "dragon_skin", 100)
		wantCode(t, err, leveev2.ErrorCode_ERROR_CODE_REJECTED)
		if r := client.Reason(err); r != arena.ReasonInsufficientGold {
			t.Fatalf("reason %q, want %q", r, arena.ReasonInsufficientGold)
		}
		_, _, err = arenaclient.BuyItem(ctx, cl, "sword", -1)
		wantCode(t, err, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST)
		_, _, err = arenaclient.BuyItem(ctx, cl, "no-such-item", 1)
		wantCode(t, err, leveev2.ErrorCode_ERROR_CODE_NOT_FOUND)
		_, err = arenaclient.GetProfile(ctx, cl, "someone-else")
		wantCode(t, err, leveev2.ErrorCode_ERROR_CODE_FORBIDDEN)

		first, replayed, err := arenaclient.StartBattle(ctx, cl, "battle-1", 4, 100)
		if err != nil || replayed {
			t.Fatal(err, replayed)
		}
		again, replayed, err := arenaclient.StartBattle(ctx, cl, "battle-1", 4, 100)
		if err != nil {
			t.Fatal(err)
		}
		if !replayed || again.GetResult().GetResultHash() != first.GetResult().GetResultHash() {
			t.Fatalf("same battle id twice: first %v, again %v", first, again)
		}
		p, err := arenaclient.GetProfile(ctx, cl, "")
		if err != nil {
			t.Fatal(err)
		}
		// The reward of battle-1 is in the profile exactly once.
		if p.GetWins()+p.GetLosses() != 1 || p.GetXp() != first.GetXpGained() {
			t.Fatalf("profile after one battle fought twice: %v (first reply %v)", p, first)
		}
		if p.GetGold() != 900+first.GetGoldGained() {
			t.Fatalf("gold = %d, want %d", p.GetGold(), 900+first.GetGoldGained())
		}
	}
}

// TestStateSurvivesRestart restarts the whole cluster on the same data
// directory and finds the player as it was left.
func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	c := startCluster(t, dir)
	cl := dial(t, c, "carol", false)
	if _, _, err := arenaclient.BuyItem(ctxT(t), cl, "potion", 3); err != nil {
		t.Fatal(err)
	}
	for name, stop := range map[string]func() error{"gate": c.stop["gate"], "logic": c.stop["logic"]} {
		if err := stop(); err != nil {
			t.Fatalf("stop %s: %v", name, err)
		}
	}
	// The gate's shutdown closed the player's socket with 1012 (come back).
	select {
	case <-cl.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("client not closed by gate shutdown")
	}
	var ce *client.CloseError
	if !errors.As(cl.Err(), &ce) || ce.Code != 1012 {
		t.Fatalf("close error = %v, want close code 1012", cl.Err())
	}

	c2 := startCluster(t, dir)
	p, err := arenaclient.Profile(dial(t, c2, "carol", false))
	if err != nil {
		t.Fatal(err)
	}
	if p.GetGold() != 970 || p.GetInventory()["potion"] != 3 {
		t.Fatalf("after restart: %v", p)
	}
}
