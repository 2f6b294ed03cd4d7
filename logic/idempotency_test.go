package logic

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// seedRich writes players with a billion gold into shard 0 of ts (before
// a server opens it), so that a test can make thousands of changes.
func seedRich(t testing.TB, ts *testStore, ids ...string) {
	t.Helper()
	st, done := ts.open(t)
	defer done()
	recs := map[string]*record{}
	for _, id := range ids {
		p := newPlayer(id)
		p.Gold = 1_000_000_000
		recs[id] = &record{state: p, version: 1}
	}
	if err := st.put(recs, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// buyMany applies n potion purchases for id, request ids from..from+n-1,
// from 64 callers at once so that they share group commits.
func (e *env) buyMany(id string, from uint64, n int) {
	e.t.Helper()
	const workers = 64
	var wg sync.WaitGroup
	next := make(chan uint64)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rid := range next {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				r, err := e.cli.Do(priority.Outgoing(ctx, priority.Critical), buyReq(id, rid, "potion", 1))
				cancel()
				if err != nil || view(r).GetBuyItem() == nil || view(r).GetBuyItem().GetReplayed() {
					e.t.Errorf("buy %d: %v %v", rid, r, err)
				}
			}
		}()
	}
	for rid := from; rid < from+uint64(n); rid++ {
		next <- rid
	}
	close(next)
	wg.Wait()
	if e.t.Failed() {
		e.t.FailNow()
	}
}

// Defect 6: a purchase and a battle resent after 300 and after 10,000
// further changes by the same player are replayed, never applied again.
func TestResendAfterManyChangesIsReplayed(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 10,000 purchases")
	}
	forEachStore(t, testResendAfterManyChangesIsReplayed)
}

func testResendAfterManyChangesIsReplayed(t *testing.T, ts *testStore) {
	seedRich(t, ts, "rich")
	e := start(t, envOpts{store: ts})
	start := e.login("rich")
	sword := e.call(buyReq("rich", 1, "sword", 1)).GetBuyItem()
	fight := e.call(battleReq("rich", "first", 4, 100)).GetBattle()
	if sword.GetReplayed() || fight.GetReplayed() || fight.GetResult() == nil {
		t.Fatalf("first sends: %v, %v", sword, fight)
	}
	check := func(after int) {
		t.Helper()
		before := e.profile("rich")
		r := e.call(buyReq("rich", 1, "sword", 1)).GetBuyItem()
		if !r.GetReplayed() || r.GetGoldSpent() != 100 || !proto.Equal(r.GetPlayer(), sword.GetPlayer()) {
			t.Errorf("purchase resent after %d changes: %v", after, r)
		}
		b := e.call(battleReq("rich", "first", 4, 100)).GetBattle()
		if !b.GetReplayed() || b.GetResult().GetResultHash() != fight.GetResult().GetResultHash() || !proto.Equal(b.GetPlayer(), fight.GetPlayer()) {
			t.Errorf("battle resent after %d changes: %v", after, b)
		}
		if n := e.battle.calls.Load(); n != 1 {
			t.Errorf("after %d changes the battle was fought %d times", after, n)
		}
		if p := e.profile("rich"); !proto.Equal(p, before) {
			t.Fatalf("resends after %d changes changed the player: %v, was %v", after, p, before)
		}
	}
	e.buyMany("rich", 100, 300)
	check(300)
	e.buyMany("rich", 400, 9_700)
	check(10_000)
	p := e.profile("rich")
	wantGold := start.GetGold() - 100 - 10_000*10 + fight.GetGoldGained()
	if p.GetGold() != wantGold || p.GetInventory()["sword"] != 1 || p.GetInventory()["potion"] != 10_000 ||
		p.GetWins()+p.GetLosses() != 1 || p.GetVersion() != start.GetVersion()+2+10_000 {
		t.Fatalf("after it all: %v, want gold %d, 1 sword, 10000 potions, one battle", p, wantGold)
	}
}

// winningBattleID is a battle id that the fake battle tier lets id win.
func winningBattleID(t *testing.T, id string, n int) string {
	t.Helper()
	for i := 0; ; i++ {
		b := fmt.Sprintf("win-%d-%d", n, i)
		if battleSeed(id, b)%2 == 0 {
			return b
		}
	}
}

// Defect 7: a refused purchase is final for its request id, also once the
// player can afford it; a new id buys.
func TestRefusedPurchaseStaysRefused(t *testing.T) {
	forEachStore(t, testRefusedPurchaseStaysRefused)
}

func testRefusedPurchaseStaysRefused(t *testing.T, ts *testStore) {
	e := start(t, envOpts{store: ts})
	e.login("alice")
	if r := e.call(buyReq("alice", 1, "sword", 1)).GetBuyItem(); r.GetPlayer().GetGold() != 900 {
		t.Fatalf("sword: %v", r)
	}
	refused := e.call(buyReq("alice", 2, "dragon_skin", 2)) // 1000 gold
	wantError(t, refused, leveev2.ErrorCode_ERROR_CODE_REJECTED)
	for i := range 4 {
		if b := e.call(battleReq("alice", winningBattleID(t, "alice", i), 4, 100)).GetBattle(); !b.GetWon() {
			t.Fatalf("battle %d: %v", i, b)
		}
	}
	rich := e.profile("alice")
	if rich.GetGold() != 1020 {
		t.Fatalf("after 4 wins: %v", rich)
	}
	again := e.call(buyReq("alice", 2, "dragon_skin", 2))
	wantError(t, again, leveev2.ErrorCode_ERROR_CODE_REJECTED)
	if again.GetError().GetMessage() != refused.GetError().GetMessage() {
		t.Errorf("replayed refusal %q, first %q", again.GetError().GetMessage(), refused.GetError().GetMessage())
	}
	if p := e.profile("alice"); !proto.Equal(p, rich) {
		t.Fatalf("the refused id was applied: %v, was %v", p, rich)
	}
	if r := e.call(buyReq("alice", 3, "dragon_skin", 2)).GetBuyItem(); r.GetReplayed() || r.GetPlayer().GetGold() != 20 {
		t.Fatalf("a new id for the same purchase: %v", r)
	}
	// An unknown item is final too.
	wantError(t, e.call(buyReq("alice", 4, "unicorn", 1)), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND)
	wantError(t, e.call(buyReq("alice", 4, "unicorn", 1)), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND)
}

// A request id sent again with another request is BAD_REQUEST and
// changes nothing; so is a battle id sent again with other units.
func TestKeyReusedForAnotherRequest(t *testing.T) {
	forEachStore(t, testKeyReusedForAnotherRequest)
}

func testKeyReusedForAnotherRequest(t *testing.T, ts *testStore) {
	e := start(t, envOpts{store: ts})
	e.login("alice")
	e.call(buyReq("alice", 42, "sword", 2))
	e.call(battleReqID("alice", 43, "b1", 4, 100))
	before := e.profile("alice")
	for _, c := range []struct {
		name string
		req  *leveev2.LogicRequest
		msg  string
	}{
		{"other item", buyReq("alice", 42, "potion", 2), "request id already used"},
		{"other quantity", buyReq("alice", 42, "sword", 1), "request id already used"},
		{"a battle under a purchase's id", battleReqID("alice", 42, "b2", 4, 100), "request id already used"},
		{"a purchase under a battle's id", buyReq("alice", 43, "sword", 2), "request id already used"},
		{"another battle under a battle's id", battleReqID("alice", 43, "b2", 4, 100), "request id already used"},
		{"a battle id with other units", battleReqID("alice", 44, "b1", 5, 100), "job key already used"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.call(c.req)
			wantError(t, r, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST)
			if msg := r.GetError().GetMessage(); !strings.Contains(msg, c.msg) {
				t.Errorf("message %q, want %q in it", msg, c.msg)
			}
			if p := e.profile("alice"); !proto.Equal(p, before) {
				t.Fatalf("state changed: %v, was %v", p, before)
			}
		})
	}
	if n := e.battle.calls.Load(); n != 1 {
		t.Fatalf("battle called %d times", n)
	}
	// The same battle under a new request id is still that battle.
	if b := e.call(battleReqID("alice", 45, "b1", 4, 100)).GetBattle(); !b.GetReplayed() {
		t.Fatalf("battle b1 under a new request id: %v", b)
	}
}

func battleReqID(id string, rid uint64, battleID string, units, ticks uint32) *leveev2.LogicRequest {
	r := battleReq(id, battleID, units, ticks)
	r.RequestId = rid
	return r
}

// Outcomes survive a restart of the server on the same data dir.
func TestOutcomesSurviveRestart(t *testing.T) {
	forEachStore(t, testOutcomesSurviveRestart)
}

func testOutcomesSurviveRestart(t *testing.T, ts *testStore) {
	fb := &fakeBattle{}
	e := start(t, envOpts{store: ts, battle: fb})
	e.login("alice")
	bought := e.call(buyReq("alice", 7, "sword", 1)).GetBuyItem()
	fought := e.call(battleReq("alice", "b1", 4, 100)).GetBattle()
	refused := e.call(buyReq("alice", 8, "dragon_skin", 100))
	wantError(t, refused, leveev2.ErrorCode_ERROR_CODE_REJECTED)
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	e2 := start(t, envOpts{store: ts, battle: fb})
	before := e2.profile("alice")
	if r := e2.call(buyReq("alice", 7, "sword", 1)).GetBuyItem(); !r.GetReplayed() || !proto.Equal(r.GetPlayer(), bought.GetPlayer()) {
		t.Fatalf("purchase after restart: %v", r)
	}
	if r := e2.call(battleReq("alice", "b1", 4, 100)).GetBattle(); !r.GetReplayed() || !proto.Equal(r.GetPlayer(), fought.GetPlayer()) {
		t.Fatalf("battle after restart: %v", r)
	}
	wantError(t, e2.call(buyReq("alice", 8, "dragon_skin", 100)), leveev2.ErrorCode_ERROR_CODE_REJECTED)
	if p := e2.profile("alice"); !proto.Equal(p, before) || fb.calls.Load() != 1 {
		t.Fatalf("resends after restart changed the player (%v, was %v) or fought again (%d)", p, before, fb.calls.Load())
	}
}

// A request whose issued_at_ms is too far in the future is BAD_REQUEST and
// leaves its id open.
func TestIssuedInTheFuture(t *testing.T) {
	forEachStore(t, testIssuedInTheFuture)
}

func testIssuedInTheFuture(t *testing.T, ts *testStore) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e := start(t, envOpts{store: ts, clock: clk})
	e.login("alice")
	req := buyReq("alice", 1, "sword", 1)
	req.IssuedAtMs = uint64(clk.Now().Add(maxIssuedSkew + time.Second).UnixMilli())
	wantError(t, e.call(req), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST)
	req.IssuedAtMs = 1 << 63
	wantError(t, e.call(req), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST)
	req.IssuedAtMs = uint64(clk.Now().Add(maxIssuedSkew).UnixMilli()) // at the limit
	if r := e.call(req).GetBuyItem(); r.GetReplayed() || r.GetPlayer().GetGold() != 900 {
		t.Fatalf("within the skew: %v", r)
	}
}

// After the window the shard purges the outcomes on its own (the store
// shrinks), and a resend with its old issued_at_ms is REQUEST_EXPIRED and
// changes nothing; a fresh request still works. Up to the window's end the
// resend is replayed.
func TestOutcomesPurgedAfterWindow(t *testing.T) {
	forEachStore(t, testOutcomesPurgedAfterWindow)
}

func testOutcomesPurgedAfterWindow(t *testing.T, ts *testStore) {
	const window = time.Hour
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	fb := &fakeBattle{}
	e := start(t, envOpts{store: ts, battle: fb, clock: clk, cfg: func(c *Config) { c.IdempotencyWindow = window }})
	e.login("alice")
	issued := uint64(t0.UnixMilli())
	buy := buyReq("alice", 1, "sword", 1)
	buy.IssuedAtMs = issued
	fight := battleReq("alice", "b1", 4, 100)
	fight.IssuedAtMs = issued
	e.call(buy)
	e.call(fight)
	st := e.srv.shards[0].Load().store
	outcomes := func() int { return outcomeCount(t, st) }
	if n := outcomes(); n != 3 { // purchase: 1 key; battle: 2 (battle id, request id)
		t.Fatalf("%d outcome keys, want 3", n)
	}

	clk.Advance(window) // the resend is exactly as old as the window: still replayed
	if r := e.call(buy).GetBuyItem(); !r.GetReplayed() {
		t.Fatalf("resend at the end of the window: %v", r)
	}
	if r := e.call(fight).GetBattle(); !r.GetReplayed() {
		t.Fatalf("battle resent at the end of the window: %v", r)
	}
	if n := outcomes(); n != 3 {
		t.Fatalf("%d outcome keys at the end of the window, want 3", n)
	}

	clk.Advance(maxIssuedSkew + purgeEvery) // kept window + skew, then purged at the next tick
	testwait.Until(t, "the shard to purge the outcomes", func() bool { return outcomes() == 0 })
	before := e.profile("alice")
	wantError(t, e.call(buy), leveev2.ErrorCode_ERROR_CODE_REQUEST_EXPIRED)
	wantError(t, e.call(fight), leveev2.ErrorCode_ERROR_CODE_REQUEST_EXPIRED)
	if p := e.profile("alice"); !proto.Equal(p, before) || fb.calls.Load() != 1 {
		t.Fatalf("expired resends changed the player (%v, was %v) or fought (%d calls)", p, before, fb.calls.Load())
	}
	if n := outcomes(); n != 0 {
		t.Fatalf("expired resends stored %d keys", n)
	}
	fresh := buyReq("alice", 2, "sword", 1)
	fresh.IssuedAtMs = uint64(clk.Now().UnixMilli())
	if r := e.call(fresh).GetBuyItem(); r.GetReplayed() || r.GetPlayer().GetGold() != before.GetGold()-100 {
		t.Fatalf("fresh purchase: %v", r)
	}

	// A longer window after a restart does not bring back what was
	// purged: the purged request is still refused, never applied again.
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	e2 := start(t, envOpts{store: ts, battle: fb, clock: clk, cfg: func(c *Config) { c.IdempotencyWindow = 48 * time.Hour }})
	wantError(t, e2.call(buy), leveev2.ErrorCode_ERROR_CODE_REQUEST_EXPIRED)
	if r := e2.call(fresh).GetBuyItem(); !r.GetReplayed() {
		t.Fatalf("the fresh purchase after the restart: %v", r)
	}
}

// The purge deletes at most its limit per transaction, oldest first, and
// keeps what is not yet due.
func TestPurgeIsBounded(t *testing.T) {
	forEachStore(t, testPurgeIsBounded)
}

func testPurgeIsBounded(t *testing.T, ts *testStore) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st, done := ts.open(t)
	outs := map[string]outcome{}
	for i := range 5000 {
		at := t0.Add(time.Duration(i%2) * time.Hour) // half due, half an hour later
		key := requestKey("p", uint64(i+1))
		enc, err := encodeOutcome(at, buyReq("p", uint64(i+1), "potion", 1).GetCall(), &leveev2.LogicReply{})
		if err != nil {
			t.Fatal(err)
		}
		outs[key] = outcome{key: key, at: at, enc: enc}
	}
	if err := st.put(nil, outs, nil); err != nil {
		t.Fatal(err)
	}
	cutoff := t0.Add(time.Minute)
	for i, want := range []struct {
		n    int
		more bool
	}{{2048, true}, {452, false}, {0, false}} {
		n, more, err := st.purge(cutoff, 2048)
		if err != nil || n != want.n || more != want.more {
			t.Fatalf("purge %d = %d, %v, %v; want %d, %v", i, n, more, err, want.n, want.more)
		}
	}
	if o := outcomeCount(t, st); o != 2500 {
		t.Fatalf("%d outcomes left, want 2500", o)
	}
	if so, err := st.outcome(requestKey("p", 2)); err != nil || so == nil {
		t.Fatalf("an outcome not yet due is gone: %v %v", so, err)
	}
	if so, err := st.outcome(requestKey("p", 1)); err != nil || so != nil {
		t.Fatalf("a due outcome is still there: %v %v", so, err)
	}
	if st.purgedUpTo() != t0.UnixMilli() {
		t.Fatalf("purgedUpTo = %d, want %d", st.purgedUpTo(), t0.UnixMilli())
	}
	// As the store finds it when it opens the shard again.
	done()
	again, done := ts.open(t)
	defer done()
	if again.purgedUpTo() != t0.UnixMilli() {
		t.Fatalf("purgedUpTo after reopening = %d, want %d", again.purgedUpTo(), t0.UnixMilli())
	}
}

// A request that joins a battle already in flight under a request id of
// its own is answered with the battle's outcome, and that id is taken by
// it for good: while the battle runs and after, it is not free for
// another request, and a resend of it is replayed.
func TestBattleJoinerKeepsItsRequestID(t *testing.T) {
	forEachStore(t, testBattleJoinerKeepsItsRequestID)
}

func testBattleJoinerKeepsItsRequestID(t *testing.T, ts *testStore) {
	e := start(t, envOpts{store: ts})
	e.login("alice")
	release := e.battle.hold()
	first := make(chan *leveev2.LogicReply, 1)
	go func() {
		r, err := e.cli.Do(ctxT(t), battleReqID("alice", 70, "slow", 4, 100))
		if err != nil {
			t.Errorf("first: %v", err)
		}
		first <- r
	}()
	testwait.Until(t, "the battle call", func() bool { return e.battle.calls.Load() == 1 })
	joiner := make(chan *leveev2.LogicReply, 1)
	e.flushAndBlock("alice")
	go func() {
		r, err := e.cli.Do(ctxT(t), battleReqID("alice", 71, "slow", 4, 100))
		if err != nil {
			t.Errorf("joiner: %v", err)
		}
		joiner <- r
	}()
	testwait.Until(t, "the joiner queued", func() bool { return e.depth(0) == 1 })
	e.gate.release()
	// Queued after the joiner, so the shard has seen it: its id is taken.
	wantError(t, e.call(buyReq("alice", 71, "sword", 1)), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST)
	close(release)
	if r := <-first; view(r).GetBattle() == nil {
		t.Fatalf("first: %v", r)
	}
	if r := <-joiner; !view(r).GetBattle().GetReplayed() {
		t.Fatalf("joiner: %v", r)
	}
	before := e.profile("alice")
	wantError(t, e.call(buyReq("alice", 71, "sword", 1)), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST)
	if r := e.call(battleReqID("alice", 71, "slow", 4, 100)).GetBattle(); !r.GetReplayed() {
		t.Fatalf("resend of the joiner's id: %v", r)
	}
	if p := e.profile("alice"); !proto.Equal(p, before) || e.battle.calls.Load() != 1 {
		t.Fatalf("state changed or battle fought again: %v (was %v), %d calls", p, before, e.battle.calls.Load())
	}
}
