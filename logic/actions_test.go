package logic

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func TestLoginCreatesPlayerOnce(t *testing.T) {
	e := start(t, envOpts{})
	r := e.call(loginReq("alice"))
	w := r.GetWelcome()
	p := w.GetPlayer()
	if p.GetId() != "alice" || p.GetLevel() != 1 || p.GetXp() != 0 || p.GetGold() != 1000 || p.GetRating() != 1000 ||
		len(p.GetInventory()) != 0 || p.GetVersion() != 1 || w.GetShard() != 0 {
		t.Fatalf("welcome = %v", w)
	}
	again := e.login("alice")
	if !proto.Equal(again, p) {
		t.Fatalf("second login changed the player: %v, was %v", again, p)
	}
}

func TestGetProfile(t *testing.T) {
	e := start(t, envOpts{})
	e.login("alice")
	e.login("bob")
	if p := e.profile("alice"); p.GetId() != "alice" || p.GetGold() != 1000 {
		t.Fatalf("own profile = %v", p)
	}
	if p := e.call(profileReq("alice", "alice")).GetProfile().GetPlayer(); p.GetId() != "alice" {
		t.Fatalf("own profile by id = %v", p)
	}
	wantError(t, e.call(profileReq("alice", "bob")), leveev2.ErrorCode_ERROR_CODE_FORBIDDEN)
	wantError(t, e.call(profileReq("nobody", "")), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND)
	if got := e.requests("get_profile", "rejected"); got != 2 {
		t.Errorf("logic_requests_total{get_profile,rejected} = %d, want 2", got)
	}
}

func TestBuyItem(t *testing.T) {
	e := start(t, envOpts{})
	e.login("alice")
	r := e.call(buyReq("alice", 7, "potion", 3)).GetBuyItem()
	p := r.GetPlayer()
	if r.GetGoldSpent() != 30 || r.GetReplayed() || p.GetGold() != 970 || p.GetInventory()["potion"] != 3 || p.GetVersion() != 2 {
		t.Fatalf("buy reply = %v", r)
	}
	r = e.call(buyReq("alice", 8, "sword", 1)).GetBuyItem()
	if p := r.GetPlayer(); p.GetGold() != 870 || p.GetInventory()["sword"] != 1 || p.GetInventory()["potion"] != 3 || p.GetVersion() != 3 {
		t.Fatalf("second buy = %v", r)
	}
	if got := e.profile("alice"); !proto.Equal(got, r.GetPlayer()) {
		t.Fatalf("profile %v differs from the last reply %v", got, r.GetPlayer())
	}
}

// Every bad purchase is a typed business error that changes nothing.
func TestBuyBadInputsChangeNothing(t *testing.T) {
	e := start(t, envOpts{})
	before := e.login("alice")
	for _, c := range []struct {
		name string
		req  *leveev2.LogicRequest
		code leveev2.ErrorCode
	}{
		{"zero quantity", buyReq("alice", 10, "potion", 0), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"negative quantity", buyReq("alice", 11, "potion", -1), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"very negative quantity", buyReq("alice", 12, "sword", math.MinInt32), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"quantity 101", buyReq("alice", 13, "potion", 101), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"absurd quantity", buyReq("alice", 14, "potion", math.MaxInt32), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"unknown item", buyReq("alice", 15, "no-such-item", 1), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"empty item", buyReq("alice", 16, "", 1), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"long item id", buyReq("alice", 17, strings.Repeat("x", 200), 1), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND},
		// Past the action's declared MaxRequestBytes (256): refused
		// before the shard.
		{"huge item id", buyReq("alice", 22, strings.Repeat("x", 10000), 1), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"undecodable request", undecodable(buyReq("alice", 23, "potion", 1)), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"unknown action", callReq("alice", 24, "sell_item", &leveev2.Error{}), leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE},
		{"no request id", buyReq("alice", 0, "potion", 1), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"insufficient gold", buyReq("alice", 18, "dragon_skin", 3), leveev2.ErrorCode_ERROR_CODE_REJECTED},
		{"insufficient gold, max quantity", buyReq("alice", 19, "dragon_skin", 100), leveev2.ErrorCode_ERROR_CODE_REJECTED},
		{"player never logged in", buyReq("ghost", 20, "potion", 1), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"no action", &leveev2.LogicRequest{PlayerId: "alice", RequestId: 21}, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.call(c.req)
			wantError(t, r, c.code)
			if len(r.GetError().GetMessage()) > 200 {
				t.Errorf("error message is %d bytes long", len(r.GetError().GetMessage()))
			}
			if after := e.profile("alice"); !samePlayer(after, before) {
				t.Fatalf("state changed: %v, was %v", after, before)
			}
		})
	}
	// A request Levee refused before the game saw it (too big, not
	// decodable) was never executed: its id stays open, and applies once
	// it is well formed.
	for _, rid := range []uint64{22, 23} {
		if r := e.call(buyReq("alice", rid, "potion", 1)).GetBuyItem(); r.GetReplayed() || r.GetPlayer().GetInventory()["potion"] != uint32(rid-21) {
			t.Fatalf("buy with the id %d of a malformed request = %v", rid, r)
		}
	}
	// The game's error, validation or business, is the id's outcome for
	// good (see TestRefusedPurchaseStaysRefused): a resend gets it again,
	// marked replayed, and the reason the game gave.
	for _, c := range []struct {
		rid    uint64
		req    *leveev2.LogicRequest
		code   leveev2.ErrorCode
		reason string
	}{
		{10, buyReq("alice", 10, "potion", 0), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, arena.ReasonBadQuantity},
		{18, buyReq("alice", 18, "dragon_skin", 3), leveev2.ErrorCode_ERROR_CODE_REJECTED, arena.ReasonInsufficientGold},
		{15, buyReq("alice", 15, "no-such-item", 1), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND, arena.ReasonUnknownItem},
	} {
		r := e.call(c.req)
		wantError(t, r, c.code)
		if !r.GetReplayed() || r.GetError().GetReason() != c.reason {
			t.Errorf("resend of request %d = %v, want replayed with reason %q", c.rid, r, c.reason)
		}
	}
	// A well-formed request under the id of a refused one is another
	// request: refused, not applied.
	wantError(t, e.call(buyReq("alice", 10, "dragon_skin", 1)), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST)
}

// undecodable is req with a request that does not decode as its action's.
func undecodable(req *leveev2.LogicRequest) *leveev2.LogicRequest {
	req.GetCall().Request = []byte{0xff, 0xff, 0xff}
	return req
}

func TestBuyIdempotentByRequestID(t *testing.T) { forEachStore(t, testBuyIdempotentByRequestID) }

func testBuyIdempotentByRequestID(t *testing.T, ts *testStore) {
	e := start(t, envOpts{store: ts})
	e.login("alice")
	first := e.call(buyReq("alice", 42, "sword", 2)).GetBuyItem()
	second := e.call(buyReq("alice", 42, "sword", 2)).GetBuyItem()
	if first.GetReplayed() || !second.GetReplayed() {
		t.Fatalf("replayed flags: first %v, second %v", first.GetReplayed(), second.GetReplayed())
	}
	if !proto.Equal(first.GetPlayer(), second.GetPlayer()) || second.GetGoldSpent() != 200 {
		t.Fatalf("replay differs: first %v, second %v", first, second)
	}
	// A different item under the same request id is refused, not bought
	// (TestKeyReusedForAnotherRequest has the other cases).
	wantError(t, e.call(buyReq("alice", 42, "potion", 1)), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST)
	if third := e.call(buyReq("alice", 42, "sword", 2)).GetBuyItem(); !third.GetReplayed() || !proto.Equal(third.GetPlayer(), first.GetPlayer()) {
		t.Fatalf("third send = %v", third)
	}
	p := e.profile("alice")
	if p.GetGold() != 800 || p.GetInventory()["sword"] != 2 || p.GetVersion() != 2 {
		t.Fatalf("after one purchase sent three times: %v", p)
	}
	if got := e.requests("buy_item", "replayed"); got != 2 {
		t.Errorf("logic_requests_total{buy_item,replayed} = %d, want 2", got)
	}
	// A new request id is a new purchase.
	if r := e.call(buyReq("alice", 43, "sword", 2)).GetBuyItem(); r.GetReplayed() || r.GetPlayer().GetGold() != 600 {
		t.Fatalf("new request id = %v", r)
	}
}

func TestBadPlayerIDIsInvalidArgument(t *testing.T) {
	e := start(t, envOpts{})
	for _, id := range []string{"", "has space", "ünicode", strings.Repeat("a", 65)} {
		_, err := e.cli.Do(ctxT(t), loginReq(id))
		wantStatus(t, err, codes.InvalidArgument, "player_id")
	}
	if got := e.requests("login", "invalid"); got != 4 {
		t.Errorf("logic_requests_total{login,invalid} = %d, want 4", got)
	}
}

func TestWrongShard(t *testing.T) {
	e := start(t, envOpts{cfg: func(c *Config) { c.Shards, c.Instances, c.Instance = 4, 2, 1 }})
	var mine, theirs string
	for i := 0; mine == "" || theirs == ""; i++ {
		id := fmt.Sprintf("p%d", i)
		if s := shardOf(id, 4); s%2 == 1 {
			mine = id
		} else {
			theirs = id
		}
	}
	if w := e.call(loginReq(mine)).GetWelcome(); w.GetShard()%2 != 1 {
		t.Fatalf("welcome on shard %d", w.GetShard())
	}
	_, err := e.cli.Do(ctxT(t), loginReq(theirs))
	wantStatus(t, err, codes.FailedPrecondition, "wrong shard")
}
