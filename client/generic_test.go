package client_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// TestCallSendAndTypedCall drives one game through the three ways of
// calling an action, on both subprotocols.
func TestCallSendAndTypedCall(t *testing.T) {
	g := newGate(t, arenaPlay)
	for _, json := range []bool{false, true} {
		c := dial(t, g, "hal", client.Options{JSON: json})
		if c.PlayerID() != "hal" || c.Welcome().GetVersion() != 1 {
			t.Fatalf("json=%v: welcome = %v", json, c.Welcome())
		}
		st, err := client.StateOf[*arenapb.Player](c)
		if err != nil || st.GetId() != "hal" || st.GetGold() != arena.StartGold {
			t.Fatalf("json=%v: welcome state = %v, %v", json, st, err)
		}
		ctx := ctx5s(t)

		var prof arenapb.ProfileReply
		if err := c.Call(ctx, arena.ActionGetProfile, &arenapb.GetProfileRequest{}, &prof); err != nil || prof.GetPlayer().GetId() != "hal" {
			t.Fatalf("json=%v: Call = %v, %v", json, &prof, err)
		}
		if err := c.Call(ctx, arena.ActionGetProfile, &arenapb.GetProfileRequest{}, nil); err != nil {
			t.Fatalf("json=%v: Call without a reply: %v", json, err)
		}

		var info client.CallInfo
		rep, err := client.Call[*arenapb.BuyItemReply](client.WithCallInfo(ctx, &info), c, arena.ActionBuyItem,
			&arenapb.BuyItemRequest{ItemId: "potion", Quantity: 3})
		if err != nil || rep.GetGoldSpent() != 30 || info.Version != 2 || info.Replayed {
			t.Fatalf("json=%v: Call[BuyItemReply] = %v, %v, info %+v", json, rep, err, info)
		}

		b, _ := proto.Marshal(&arenapb.StartBattleRequest{BattleId: "b-" + map[bool]string{true: "j", false: "p"}[json], Units: 2, Ticks: 10})
		f, err := c.Send(ctx, arena.ActionStartBattle, b)
		if err != nil || f.GetReplayed() || f.GetVersion() != 3 {
			t.Fatalf("json=%v: Send = %v, %v", json, f, err)
		}
		var br arenapb.BattleReply
		if err := proto.Unmarshal(f.GetReply(), &br); err != nil || br.GetPlayer() == nil {
			t.Fatalf("json=%v: battle reply = %v, %v", json, &br, err)
		}
		again, err := c.Send(ctx, arena.ActionStartBattle, b)
		if err != nil || !again.GetReplayed() || !proto.Equal(again, withID(f, again.GetRequestId(), true)) {
			t.Fatalf("json=%v: the same battle again = %v, %v; want the first outcome replayed", json, again, err)
		}
	}
}

// withID is f answered to request id with the replayed flag.
func withID(f *leveev2.ServerFrame, id uint64, replayed bool) *leveev2.ServerFrame {
	g := proto.CloneOf(f)
	g.RequestId, g.Replayed = id, replayed
	return g
}

// TestGameErrorsCarryTheirReason: a game's refusal is a final business
// error with the game's code, and a resend gets the same outcome.
func TestGameErrorsCarryTheirReason(t *testing.T) {
	g := newGate(t, arenaPlay)
	c := dial(t, g, "ivy", client.Options{})
	ctx := ctx5s(t)
	_, err := buyItem(ctx, c, "dragon_skin", 3)
	e := client.AsError(err)
	if e == nil || e.Code != leveev2.ErrorCode_ERROR_CODE_REJECTED || e.Reason != arena.ReasonInsufficientGold ||
		!e.IsBusiness() || e.Retryable() || client.Reason(err) != arena.ReasonInsufficientGold {
		t.Fatalf("unaffordable purchase: %#v", err)
	}
	if !errors.Is(err, &client.Error{Code: leveev2.ErrorCode_ERROR_CODE_REJECTED, Reason: arena.ReasonInsufficientGold}) ||
		errors.Is(err, &client.Error{Code: leveev2.ErrorCode_ERROR_CODE_REJECTED, Reason: "other"}) {
		t.Fatal("errors.Is by code and reason")
	}
	_, err = buyItem(ctx, c, "potion", 0)
	if client.Code(err) != leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST || client.Reason(err) != arena.ReasonBadQuantity {
		t.Fatalf("bad quantity: %v", err)
	}
	if client.Unresolved(err) != nil {
		t.Fatal("a final answer is not unresolved")
	}

	// A resend of the refused purchase's id answers the same refusal.
	f := buyFrame("dragon_skin", 3)
	f.RequestId = 77
	if _, err := c.Resend(ctx, f); client.Reason(err) != arena.ReasonInsufficientGold {
		t.Fatalf("first send: %v", err)
	}
	out, err := c.Resend(ctx, f)
	if client.Reason(err) != arena.ReasonInsufficientGold || !out.GetReplayed() {
		t.Fatalf("resend of a refused purchase = %v, %v; want the refusal replayed", out, err)
	}
}

// TestClassFromTheDeclaration: a call carries its action's declared
// class; without a declaration it is DEFAULT; WithCriticality lowers it.
func TestClassFromTheDeclaration(t *testing.T) {
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, scripted(got, func(_ int, f *leveev2.ClientFrame) *leveev2.ServerFrame { return bought(f) }))
	withGame := dial(t, g, "jo", client.Options{})
	ctx := ctx5s(t)
	for _, tc := range []struct {
		c      *client.Client
		action string
		want   leveev2.Criticality
	}{
		{withGame, arena.ActionBuyItem, leveev2.Criticality_CRITICALITY_CRITICAL},
		{withGame, arena.ActionGetProfile, leveev2.Criticality_CRITICALITY_DEFAULT},
		{withGame, "no_such_action", leveev2.Criticality_CRITICALITY_DEFAULT},
	} {
		if _, err := tc.c.Send(ctx, tc.action, nil); err != nil {
			t.Fatal(err)
		}
		if f := next(t, got); f.GetCriticality() != tc.want || f.GetAction() != tc.action || f.GetRequestId() == 0 || f.GetIssuedAtMs() == 0 {
			t.Fatalf("%s: frame %v, want class %v, an id and issued_at_ms", tc.action, f, tc.want)
		}
	}
	noGame, err := client.Dial(ctx, g.URL(), mint(t, "kai"), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer noGame.Close()
	if err := noGame.Call(ctx, arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: "potion", Quantity: 1}, &arenapb.BuyItemReply{}); err != nil {
		t.Fatal(err)
	}
	if f := next(t, got); f.GetCriticality() != leveev2.Criticality_CRITICALITY_DEFAULT {
		t.Fatalf("without a declaration: %v, want DEFAULT", f.GetCriticality())
	}
	lower := client.WithCriticality(ctx, leveev2.Criticality_CRITICALITY_SHEDDABLE)
	if _, err := withGame.Send(lower, arena.ActionBuyItem, nil); err != nil {
		t.Fatal(err)
	}
	if f := next(t, got); f.GetCriticality() != leveev2.Criticality_CRITICALITY_SHEDDABLE {
		t.Fatalf("WithCriticality: %v", f.GetCriticality())
	}
}

// TestJSONNeedsTheGame: the JSON subprotocol cannot encode a game's
// messages without the declaration.
func TestJSONNeedsTheGame(t *testing.T) {
	g := newGate(t, arenaPlay)
	if _, err := client.Dial(ctx5s(t), g.URL(), mint(t, "lou"), client.Options{JSON: true}); !errors.Is(err, client.ErrInvalidOptions) {
		t.Fatalf("JSON without Game: %v", err)
	}
}

// TestUnknownActionAndUnexpectedReply: the fake gate (like the real one)
// answers an unknown action UNKNOWN_MESSAGE; a reply that does not decode
// as the caller's message is ErrUnexpectedReply.
func TestUnknownActionAndUnexpectedReply(t *testing.T) {
	g := newGate(t, arenaPlay)
	c := dial(t, g, "max", client.Options{})
	ctx := ctx5s(t)
	if err := c.Call(ctx, "fly", &arenapb.GetProfileRequest{}, nil); client.Code(err) != leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE {
		t.Fatalf("unknown action: %v", err)
	}
	bad := newGate(t, scripted(nil, func(_ int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		return &leveev2.ServerFrame{RequestId: f.GetRequestId(), Payload: &leveev2.ServerFrame_Reply{Reply: []byte{0xff}}}
	}))
	c2 := dial(t, bad, "max", client.Options{})
	if err := c2.Call(ctx, arena.ActionGetProfile, &arenapb.GetProfileRequest{}, &arenapb.ProfileReply{}); !errors.Is(err, client.ErrUnexpectedReply) {
		t.Fatalf("a reply that does not decode: %v", err)
	}
	if err := c2.Call(ctx, arena.ActionGetProfile, &arenapb.GetProfileRequest{}, nil); err != nil {
		t.Fatalf("a reply not asked for is not decoded: %v", err)
	}
	if _, err := c.Send(ctx, "", nil); err == nil {
		t.Fatal("Send without an action")
	}
}
