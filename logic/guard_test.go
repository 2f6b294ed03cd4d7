package logic

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/clock"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// guardGame is a small game on arena's messages whose code misbehaves on
// request: "boom" as an item panics in the handler (after changing its
// copy of the state), "fail" returns a plain error; peek reads any
// player's state; forge runs the job "forge" (in process, see jobsFunc)
// whose continuation panics for the key "boom".
func guardGame() *game.Game {
	g := game.New("guard", arena.NewPlayer)
	game.Mutation(g, "buy", game.Critical, func(c *game.Ctx, p *arenapb.Player, req *arenapb.BuyItemRequest) (*arenapb.BuyItemReply, *arenapb.Player, error) {
		p.Gold -= 10
		switch req.GetItemId() {
		case "boom":
			panic("the studio's bug")
		case "fail":
			return nil, nil, errors.New("a plain error")
		case "same":
			return &arenapb.BuyItemReply{GoldSpent: c.Now().Unix()}, nil, nil // nil next: unchanged
		}
		return &arenapb.BuyItemReply{Player: p, GoldSpent: 10}, p, nil
	})
	game.Query(g, "peek", game.Sheddable, func(c *game.Ctx, p *arenapb.Player, req *arenapb.GetProfileRequest) (*arenapb.ProfileReply, error) {
		return &arenapb.ProfileReply{Player: p}, nil
	}, game.ReadsPlayer(func(r *arenapb.GetProfileRequest) string { return r.GetPlayerId() }))
	game.Job(g, "forge", func(ctx context.Context, r *arenapb.SimulateRequest) (*arenapb.SimulateReply, error) {
		return &arenapb.SimulateReply{BattleId: r.GetBattleId(), Winner: 1}, nil
	})
	game.JobAction(g, "forge", game.Default, "forge",
		func(r *arenapb.StartBattleRequest) string { return r.GetBattleId() },
		func(c *game.Ctx, p *arenapb.Player, r *arenapb.StartBattleRequest) (*arenapb.SimulateRequest, error) {
			return &arenapb.SimulateRequest{BattleId: r.GetBattleId(), Seed: uint64(c.Now().Unix())}, nil
		},
		func(c *game.Ctx, p *arenapb.Player, r *arenapb.StartBattleRequest, res *arenapb.SimulateReply) (*arenapb.BattleReply, *arenapb.Player, error) {
			if r.GetBattleId() == "boom" {
				panic("the continuation's bug")
			}
			p.Wins++
			return &arenapb.BattleReply{BattleId: res.GetBattleId(), Won: true, Player: p}, p, nil
		})
	return g
}

// jobsFunc runs the game's jobs in process (Config.Jobs), counting them.
type jobsFunc struct {
	g     *game.Game
	mu    sync.Mutex
	calls []string // job/key
}

func (j *jobsFunc) Run(ctx context.Context, job, key string, request []byte) ([]byte, error) {
	j.mu.Lock()
	j.calls = append(j.calls, job+"/"+key)
	j.mu.Unlock()
	d, ok := j.g.Def().Job(job)
	if !ok {
		return nil, errors.New("no such job")
	}
	req := d.Request.New().Interface()
	if err := proto.Unmarshal(request, req); err != nil {
		return nil, err
	}
	rep, err := d.Run(ctx, req)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(rep)
}

func (j *jobsFunc) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.calls)
}

func startGuard(t *testing.T, w *syncWriter, clk *clock.Fake) (*env, *jobsFunc) {
	g := guardGame()
	jobs := &jobsFunc{g: g}
	e := start(t, envOpts{
		log: slog.New(slog.NewTextHandler(w, nil)),
		cfg: func(c *Config) {
			c.Game, c.Jobs, c.BattleAddrs, c.Shards = g, jobs, nil, 1
			if clk != nil {
				c.Clock = clk
			}
		},
	})
	return e, jobs
}

// syncWriter serialises writes to a buffer shared with the server's log.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// A handler that panics fails its own request with INTERNAL, changes and
// stores nothing, is logged once with its action and player and counted;
// the shard goes on serving the others, the same player included.
func TestPanickingHandlerFailsOnlyItsRequest(t *testing.T) {
	log := &syncWriter{w: &bytes.Buffer{}}
	e, _ := startGuard(t, log, nil)
	e.login("alice")
	e.login("bob")
	for range 3 {
		_, err := e.cli.Do(ctxT(t), callReq("alice", 7, "buy", &arenapb.BuyItemRequest{ItemId: "boom"}))
		wantStatus(t, err, codes.Internal, `handler of "buy"`)
	}
	if n := testutil.ToFloat64(e.srv.m.handlerPanics.WithLabelValues("buy")); n != 3 {
		t.Errorf("logic_handler_panics_total{buy} = %v, want 3", n)
	}
	lines := strings.Count(log.String(), "game handler panicked")
	if lines != 3 || !strings.Contains(log.String(), "action=buy") || !strings.Contains(log.String(), "player=alice") ||
		!strings.Contains(log.String(), "the studio's bug") {
		t.Errorf("log: %d panic lines in %q", lines, log.String())
	}
	// Nothing changed (the handler's copy was thrown away) and nothing
	// was stored: the id is still open.
	if p := e.call(callReq("alice", 1, "peek", &arenapb.GetProfileRequest{})).GetProfile().GetPlayer(); p.GetGold() != startGold || p.GetVersion() != 1 {
		t.Fatalf("after the panics alice is %v (version %d)", p, p.GetVersion())
	}
	r := e.call(callReq("alice", 7, "buy", &arenapb.BuyItemRequest{ItemId: "potion"}))
	if b := r.GetBuyItem(); b.GetReplayed() || b.GetPlayer().GetGold() != startGold-10 || r.GetVersion() != 2 {
		t.Fatalf("the panicked request's id, resent well: %v", r)
	}
	// The shard serves the others.
	if r := e.call(callReq("bob", 1, "buy", &arenapb.BuyItemRequest{ItemId: "potion"})); r.GetBuyItem().GetPlayer().GetGold() != startGold-10 {
		t.Fatalf("bob after alice's panics: %v", r)
	}
	// A plain error is INTERNAL too, and changes nothing either.
	_, err := e.cli.Do(ctxT(t), callReq("bob", 2, "buy", &arenapb.BuyItemRequest{ItemId: "fail"}))
	wantStatus(t, err, codes.Internal, "a plain error")
	if n, _ := histogram(t, e.srv.m.handlerDuration.WithLabelValues("buy").(prometheus.Histogram)); n != 6 {
		t.Errorf("logic_handler_duration_seconds{buy} has %d samples, want 6", n)
	}
}

// A continuation that panics fails every request waiting for the job, with
// INTERNAL, and applies nothing; the key stays open.
func TestPanickingContinuation(t *testing.T) {
	log := &syncWriter{w: &bytes.Buffer{}}
	e, jobs := startGuard(t, log, nil)
	e.login("alice")
	_, err := e.cli.Do(ctxT(t), callReq("alice", 9, "forge", &arenapb.StartBattleRequest{BattleId: "boom"}))
	wantStatus(t, err, codes.Internal, `handler of "forge"`)
	if n := testutil.ToFloat64(e.srv.m.handlerPanics.WithLabelValues("forge")); n != 1 || jobs.count() != 1 {
		t.Fatalf("panics %v, jobs run %d", n, jobs.count())
	}
	if p := e.profile2("alice"); p.GetWins() != 0 || p.GetVersion() != 1 {
		t.Fatalf("after the panic alice is %v", p)
	}
	r := e.call(callReq("alice", 10, "forge", &arenapb.StartBattleRequest{BattleId: "ok"}))
	if b := r.GetBattle(); b.GetReplayed() || b.GetPlayer().GetWins() != 1 || r.GetVersion() != 2 {
		t.Fatalf("forge after a panic: %v", r)
	}
	// The job ran in process once per key, and its result applies once.
	if r := e.call(callReq("alice", 11, "forge", &arenapb.StartBattleRequest{BattleId: "ok"})); !r.GetReplayed() || jobs.count() != 2 {
		t.Fatalf("resend under another id: %v, %d jobs", r, jobs.count())
	}
}

// profile2 is the player's state read with guardGame's peek.
func (e *env) profile2(id string) *playerView {
	e.t.Helper()
	return e.call(callReq(id, 1, "peek", &arenapb.GetProfileRequest{})).GetProfile().GetPlayer()
}

// A query declared with ReadsPlayer reads the target's state, on the
// target's shard; a target that is no player id is BAD_REQUEST.
func TestReadsPlayerRoutesToTarget(t *testing.T) {
	g := guardGame()
	e := start(t, envOpts{cfg: func(c *Config) { c.Game, c.Jobs, c.Shards, c.Instances, c.Instance = g, &jobsFunc{g: g}, 2, 2, 0 }})
	var mine, ghost, theirs string // mine and ghost on shard 0, theirs on 1
	for i := 0; mine == "" || ghost == "" || theirs == ""; i++ {
		id := "p" + string(rune('a'+i))
		switch {
		case shardOf(id, 2) == 1:
			theirs = id
		case mine == "":
			mine = id
		default:
			ghost = id
		}
	}
	e.login(mine)
	if p := e.call(callReq(theirs, 1, "peek", &arenapb.GetProfileRequest{PlayerId: mine})).GetProfile().GetPlayer(); p.GetId() != mine {
		t.Fatalf("%s peeking at %s got %v", theirs, mine, p)
	}
	_, err := e.cli.Do(ctxT(t), callReq(mine, 1, "peek", &arenapb.GetProfileRequest{PlayerId: theirs}))
	wantStatus(t, err, codes.FailedPrecondition, "wrong shard")
	wantError(t, e.call(callReq(mine, 1, "peek", &arenapb.GetProfileRequest{PlayerId: "no such/player"})), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST)
	wantError(t, e.call(callReq(theirs, 1, "peek", &arenapb.GetProfileRequest{PlayerId: ghost})), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND)
}

// A nil next state leaves the state as it was; Levee still bumps the
// version of a successful mutation. Handlers read the time from
// Config.Clock.
func TestNilNextStateAndClock(t *testing.T) {
	clk := clock.NewFake(time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC))
	e, _ := startGuard(t, &syncWriter{w: &bytes.Buffer{}}, clk)
	e.login("alice")
	r := e.call(callReq("alice", 3, "buy", &arenapb.BuyItemRequest{ItemId: "same"}))
	if r.GetVersion() != 2 || r.GetBuyItem() == nil {
		t.Fatalf("unchanged mutation: %v", r)
	}
	if p := e.profile2("alice"); p.GetGold() != startGold || p.GetVersion() != 2 {
		t.Fatalf("after a mutation with a nil next state: %v", p)
	}
	if got := r.GetBuyItem().GetGoldSpent(); got != clk.Now().Unix() {
		t.Fatalf("the handler's Ctx.Now was unix %d, want the fake clock's %d", got, clk.Now().Unix())
	}
}

// New refuses to start without a game, or with one Validate refuses, with
// its message naming the action.
func TestNewRefusesBadGame(t *testing.T) {
	cfg := testConfig(t.TempDir(), "127.0.0.1:1")
	cfg.Game = nil
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "Config.Game is nil") {
		t.Fatalf("no game: %v", err)
	}
	g := guardGame()
	game.Query(g, "peek", game.Default, func(*game.Ctx, *arenapb.Player, *arenapb.GetProfileRequest) (*arenapb.ProfileReply, error) {
		return nil, nil
	})
	cfg.Game = g
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), `action "peek" is declared twice`) {
		t.Fatalf("bad game: %v", err)
	}
}
