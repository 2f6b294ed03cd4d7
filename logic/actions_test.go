package logic

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	leveev1 "levee/proto/leveev1"
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
	wantError(t, e.call(profileReq("alice", "bob")), leveev1.ErrorCode_ERROR_CODE_FORBIDDEN)
	wantError(t, e.call(profileReq("nobody", "")), leveev1.ErrorCode_ERROR_CODE_NOT_FOUND)
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
		req  *leveev1.LogicRequest
		code leveev1.ErrorCode
	}{
		{"zero quantity", buyReq("alice", 10, "potion", 0), leveev1.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"negative quantity", buyReq("alice", 11, "potion", -1), leveev1.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"very negative quantity", buyReq("alice", 12, "sword", math.MinInt32), leveev1.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"quantity 101", buyReq("alice", 13, "potion", 101), leveev1.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"absurd quantity", buyReq("alice", 14, "potion", math.MaxInt32), leveev1.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"unknown item", buyReq("alice", 15, "no-such-item", 1), leveev1.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"empty item", buyReq("alice", 16, "", 1), leveev1.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"huge item id", buyReq("alice", 17, strings.Repeat("x", 10000), 1), leveev1.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"no request id", buyReq("alice", 0, "potion", 1), leveev1.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"insufficient gold", buyReq("alice", 18, "dragon_skin", 3), leveev1.ErrorCode_ERROR_CODE_INSUFFICIENT_GOLD},
		{"insufficient gold, max quantity", buyReq("alice", 19, "dragon_skin", 100), leveev1.ErrorCode_ERROR_CODE_INSUFFICIENT_GOLD},
		{"player never logged in", buyReq("ghost", 20, "potion", 1), leveev1.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"no action", &leveev1.LogicRequest{PlayerId: "alice", RequestId: 21}, leveev1.ErrorCode_ERROR_CODE_BAD_REQUEST},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.call(c.req)
			wantError(t, r, c.code)
			if len(r.GetError().GetMessage()) > 200 {
				t.Errorf("error message is %d bytes long", len(r.GetError().GetMessage()))
			}
			if after := e.profile("alice"); !proto.Equal(after, before) {
				t.Fatalf("state changed: %v, was %v", after, before)
			}
		})
	}
	// A refused request id is not burnt: once it is valid it applies.
	if r := e.call(buyReq("alice", 18, "dragon_skin", 1)).GetBuyItem(); r.GetReplayed() || r.GetPlayer().GetGold() != 500 {
		t.Fatalf("buy with a previously refused request id = %v", r)
	}
}

func TestBuyIdempotentByRequestID(t *testing.T) {
	e := start(t, envOpts{})
	e.login("alice")
	first := e.call(buyReq("alice", 42, "sword", 2)).GetBuyItem()
	second := e.call(buyReq("alice", 42, "sword", 2)).GetBuyItem()
	if first.GetReplayed() || !second.GetReplayed() {
		t.Fatalf("replayed flags: first %v, second %v", first.GetReplayed(), second.GetReplayed())
	}
	if !proto.Equal(first.GetPlayer(), second.GetPlayer()) || second.GetGoldSpent() != 200 {
		t.Fatalf("replay differs: first %v, second %v", first, second)
	}
	// Even a different item under the same request id is the old purchase.
	third := e.call(buyReq("alice", 42, "potion", 1)).GetBuyItem()
	if !third.GetReplayed() || third.GetPlayer().GetInventory()["potion"] != 0 {
		t.Fatalf("same id, other item = %v", third)
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

func TestAppliedIsBounded(t *testing.T) {
	rec := &record{player: newPlayer("alice")}
	for i := 1; i <= maxApplied+44; i++ {
		if err := rec.add(buyKey(uint64(i)), &leveev1.LogicReply{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.applied) != maxApplied || rec.applied[0].key != "buy/45" || rec.applied[maxApplied-1].key != buyKey(maxApplied+44) {
		t.Fatalf("applied has %d entries, first %q", len(rec.applied), rec.applied[0].key)
	}
	if r, _ := rec.find("buy/44"); r != nil {
		t.Fatal("found a dropped outcome")
	}
	if r, err := rec.find("buy/45"); r == nil || err != nil {
		t.Fatalf("kept outcome not found: %v", err)
	}
}

// record.marshal writes exactly a leveev1.PlayerRecord.
func TestRecordEncoding(t *testing.T) {
	rec := &record{player: newPlayer("alice")}
	rec.player.Inventory["sword"] = 2
	want := &leveev1.PlayerRecord{Player: clonePlayer(rec.player)}
	for i := range 3 {
		reply := &leveev1.LogicReply{Result: &leveev1.LogicReply_BuyItem{BuyItem: &leveev1.BuyItemReply{
			Player: clonePlayer(rec.player), GoldSpent: int64(i * 10),
		}}}
		if err := rec.add(buyKey(uint64(i+1)), reply); err != nil {
			t.Fatal(err)
		}
		want.Applied = append(want.Applied, &leveev1.AppliedOp{Key: buyKey(uint64(i + 1)), Reply: reply})
	}
	b, err := rec.marshal()
	if err != nil {
		t.Fatal(err)
	}
	var got leveev1.PlayerRecord
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, want) {
		t.Fatalf("decoded %v, want %v", &got, want)
	}
	back, err := unmarshalRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.marshal()
	if !proto.Equal(back.player, rec.player) || len(back.applied) != 3 || string(again) != string(b) {
		t.Fatalf("round trip changed the record")
	}
	if r, err := back.find("buy/2"); err != nil || r.GetBuyItem().GetGoldSpent() != 10 {
		t.Fatalf("find after round trip: %v %v", r, err)
	}
	if _, err := unmarshalRecord([]byte{0xff}); err == nil {
		t.Fatal("garbage decoded")
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
