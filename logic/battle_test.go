package logic

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func TestBattleBadInputsChangeNothing(t *testing.T) {
	e := start(t, envOpts{})
	before := e.login("alice")
	for _, c := range []struct {
		name     string
		id       string
		units    uint32
		ticks    uint32
		wantCode leveev2.ErrorCode
	}{
		{"empty id", "", 4, 100, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"id too long", strings.Repeat("b", 65), 4, 100, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"id with space", "b 1", 4, 100, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"id with slash", "b/1", 4, 100, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"non-ascii id", "bätt", 4, 100, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"zero units", "b1", 0, 100, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"too many units", "b1", 65, 100, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"zero ticks", "b1", 4, 0, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"too many ticks", "b1", 4, 10001, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, e.call(battleReq("alice", c.id, c.units, c.ticks)), c.wantCode)
			if after := e.profile("alice"); !proto.Equal(after, before) {
				t.Fatalf("state changed: %v, was %v", after, before)
			}
		})
	}
	wantError(t, e.call(battleReq("ghost", "b1", 4, 100)), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND)
	if n := e.battle.calls.Load(); n != 0 {
		t.Fatalf("battle called %d times for bad requests", n)
	}
}

// checkReward checks a first battle's reply against the rules.
func checkReward(t *testing.T, br *battleView) {
	t.Helper()
	p := br.GetPlayer()
	if br.GetWon() {
		if br.GetXpGained() != 50 || br.GetGoldGained() != 30 || br.GetRatingDelta() != 15 ||
			p.GetWins() != 1 || p.GetLosses() != 0 || p.GetGold() != 1030 || p.GetRating() != 1015 {
			t.Fatalf("won battle reply = %v", br)
		}
	} else if br.GetXpGained() != 10 || br.GetGoldGained() != 0 || br.GetRatingDelta() != -10 ||
		p.GetWins() != 0 || p.GetLosses() != 1 || p.GetGold() != 1000 || p.GetRating() != 990 {
		t.Fatalf("lost battle reply = %v", br)
	}
	if p.GetXp() != br.GetXpGained() || p.GetVersion() != 2 || br.GetResult() == nil {
		t.Fatalf("battle reply = %v", br)
	}
}

func TestBattleAppliedOnceAndReplayed(t *testing.T) {
	forEachStore(t, testBattleAppliedOnceAndReplayed)
}

func testBattleAppliedOnceAndReplayed(t *testing.T, ts *testStore) {
	e := start(t, envOpts{store: ts})
	e.login("alice")
	first := e.call(battleReq("alice", "battle-1", 4, 100)).GetBattle()
	if first.GetReplayed() || first.GetBattleId() != "battle-1" {
		t.Fatalf("first = %v", first)
	}
	checkReward(t, first)
	again := e.call(battleReq("alice", "battle-1", 4, 100)).GetBattle()
	if !again.GetReplayed() || again.GetResult().GetResultHash() != first.GetResult().GetResultHash() ||
		!proto.Equal(again.GetPlayer(), first.GetPlayer()) {
		t.Fatalf("again = %v, first %v", again, first)
	}
	if p := e.profile("alice"); !proto.Equal(p, first.GetPlayer()) {
		t.Fatalf("profile %v, want %v", p, first.GetPlayer())
	}
	if n := e.battle.calls.Load(); n != 1 {
		t.Fatalf("battle called %d times, want 1", n)
	}
	if got := e.requests("start_battle", "replayed"); got != 1 {
		t.Errorf("logic_requests_total{start_battle,replayed} = %d", got)
	}
}

// Requests for the same battle id that arrive together run one battle.
func TestBattleConcurrentSameID(t *testing.T) { forEachStore(t, testBattleConcurrentSameID) }

func testBattleConcurrentSameID(t *testing.T, ts *testStore) {
	e := start(t, envOpts{store: ts})
	e.login("alice")
	e.flushAndBlock("alice")
	const n = 5
	replies := make(chan *battleView, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.cli.Do(ctxT(t), battleReq("alice", "same", 4, 100))
			if err != nil {
				t.Error(err)
				return
			}
			replies <- view(r).GetBattle()
		}()
	}
	testwait.Until(t, "5 battle requests queued", func() bool { return e.depth(0) == n })
	e.gate.release()
	wg.Wait()
	close(replies)
	fresh := 0
	var hash uint64
	for r := range replies {
		if !r.GetReplayed() {
			fresh++
		}
		if hash != 0 && r.GetResult().GetResultHash() != hash {
			t.Fatalf("different results for one battle id")
		}
		hash = r.GetResult().GetResultHash()
	}
	if fresh != 1 {
		t.Fatalf("%d replies not marked replayed, want 1", fresh)
	}
	if c := e.battle.calls.Load(); c != 1 {
		t.Fatalf("battle called %d times, want 1", c)
	}
	if p := e.profile("alice"); p.GetWins()+p.GetLosses() != 1 || p.GetVersion() != 2 {
		t.Fatalf("reward not applied exactly once: %v", p)
	}
}

// A request for a battle id already in flight waits for that battle.
func TestBattleWaitsForInFlight(t *testing.T) {
	e := start(t, envOpts{})
	e.login("alice")
	release := e.battle.hold()
	type res struct {
		r   *leveev2.LogicReply
		err error
	}
	a, b := make(chan res, 1), make(chan res, 1)
	go func() {
		r, err := e.cli.Do(ctxT(t), battleReq("alice", "slow", 4, 100))
		a <- res{r, err}
	}()
	testwait.Until(t, "the battle call", func() bool { return e.battle.calls.Load() == 1 })

	e.flushAndBlock("alice")
	go func() {
		r, err := e.cli.Do(ctxT(t), battleReq("alice", "slow", 4, 100))
		b <- res{r, err}
	}()
	testwait.Until(t, "the second request queued", func() bool { return e.depth(0) == 1 })
	e.gate.release()
	// The shard answers in order: once this profile is back, it has seen
	// the second battle request, and must not have answered it.
	if p := e.profile("alice"); p.GetVersion() != 1 {
		t.Fatalf("reward applied before the battle ended: %v", p)
	}
	select {
	case r := <-b:
		t.Fatalf("second request answered before the battle ended: %v %v", r.r, r.err)
	default:
	}
	close(release)
	ra, rb := <-a, <-b
	if ra.err != nil || rb.err != nil {
		t.Fatalf("errors: %v, %v", ra.err, rb.err)
	}
	if view(ra.r).GetBattle().GetReplayed() || !view(rb.r).GetBattle().GetReplayed() {
		t.Fatalf("replayed flags: first %v, second %v", view(ra.r).GetBattle(), view(rb.r).GetBattle())
	}
	checkReward(t, view(ra.r).GetBattle())
	if c := e.battle.calls.Load(); c != 1 {
		t.Fatalf("battle called %d times, want 1", c)
	}
}

// A failed battle call is a status error with the callee's pushback, and
// applies nothing; the same battle id can be fought again. (The clock moves
// past the instance's cooling before each call.)
func TestBattleErrorAppliesNothing(t *testing.T) {
	fb := &fakeBattle{pushback: "250"}
	e := start(t, envOpts{battle: fb, clock: clock.NewFake(time.Unix(1_000_000, 0))})
	before := e.login("alice")
	for _, c := range []struct {
		err  error
		code codes.Code
		out  string
	}{
		{status.Error(codes.ResourceExhausted, "battle busy"), codes.ResourceExhausted, "busy"},
		{status.Error(codes.Unavailable, "battle down"), codes.Unavailable, "unavailable"},
		{status.Error(codes.Internal, "oops"), codes.Internal, "error"},
	} {
		fb.failWith(c.err)
		e.clk.Advance(time.Second)
		_, err := e.cli.Do(ctxT(t), battleReq("alice", "b1", 4, 100))
		wantStatus(t, err, c.code, "")
		if got := apperr.FromStatus(err).RetryAfter; got != 250*time.Millisecond {
			t.Errorf("%v: pushback = %v, want 250ms", c.code, got)
		}
		if got := e.srv.m.battleCalls.WithLabelValues(c.out); testutilValue(got) != 1 {
			t.Errorf("logic_battle_calls_total{%s} = %v, want 1", c.out, testutilValue(got))
		}
		if p := e.profile("alice"); !proto.Equal(p, before) {
			t.Fatalf("state changed after a failed battle: %v", p)
		}
	}
	fb.failWith(nil)
	e.clk.Advance(time.Second)
	r := e.call(battleReq("alice", "b1", 4, 100)).GetBattle()
	if r.GetReplayed() {
		t.Fatalf("retry after failures = %v", r)
	}
	checkReward(t, r)
	if c := e.battle.calls.Load(); c != 4 {
		t.Fatalf("battle called %d times, want 4", c)
	}
}

// The caller's deadline reaches the battle call.
func TestBattleDeadlinePropagates(t *testing.T) {
	e := start(t, envOpts{})
	e.login("alice")
	e.battle.hold() // never released: only the deadline ends the call
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := e.cli.Do(ctx, battleReq("alice", "late", 4, 100))
	wantStatus(t, err, codes.DeadlineExceeded, "")
	testwait.Until(t, "the battle call to end", func() bool {
		return testutilValue(e.srv.m.battleCalls.WithLabelValues("deadline")) == 1
	})
	if p := e.profile("alice"); p.GetVersion() != 1 {
		t.Fatalf("state changed: %v", p)
	}
}

// Too many battles in flight: the next is refused with RESOURCE_EXHAUSTED.
func TestBattleBoundedInFlight(t *testing.T) {
	e := start(t, envOpts{cfg: func(c *Config) { c.MaxBattles = 1 }})
	e.login("alice")
	release := e.battle.hold()
	done := make(chan error, 1)
	go func() {
		_, err := e.cli.Do(ctxT(t), battleReq("alice", "one", 4, 100))
		done <- err
	}()
	testwait.Until(t, "the battle call", func() bool { return e.battle.calls.Load() == 1 })
	_, err := e.cli.Do(ctxT(t), battleReq("alice", "two", 4, 100))
	wantStatus(t, err, codes.ResourceExhausted, "jobs in flight")
	if apperr.FromStatus(err).RetryAfter <= 0 {
		t.Error("no pushback on a refused battle")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Battles are spread round robin over every battle address.
func TestBattleRoundRobin(t *testing.T) {
	f1, f2 := &fakeBattle{}, &fakeBattle{}
	a1, a2 := startFakeBattle(t, f1), startFakeBattle(t, f2)
	e := start(t, envOpts{battle: f1, cfg: func(c *Config) { c.BattleAddrs = []string{a1, a2} }})
	e.login("alice")
	for i := 0; f1.calls.Load() == 0 || f2.calls.Load() == 0; i++ {
		if i == 200 {
			t.Fatalf("after 200 battles: %d and %d calls", f1.calls.Load(), f2.calls.Load())
		}
		e.call(battleReq("alice", "rr-"+string(rune('a'+i%26))+string(rune('a'+i/26)), 1, 1))
	}
}
