package arenaledger

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/loadtest/audit"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The auditor reads arena's requests and replies off the engine's calls:
// the welcome's state and version start the player, a purchase and a
// battle are recorded with the reply's figures and the frame's replayed,
// an unresolved one keeps its frame, and a read of another player is not
// a snapshot.
func TestAuditorReadsCalls(t *testing.T) {
	g := arena.Game()
	act := func(name string) *gamedef.Action {
		a, ok := g.Def().Action(name)
		if !ok {
			t.Fatalf("no action %s", name)
		}
		return a
	}
	au := New(g).(*Auditor)
	st := arena.NewPlayer("p")
	au.Welcome("p", &leveev2.Welcome{State: encode(st), Version: 4, PlayerId: "p"})
	au.Call(Call0("p", act(arena.ActionGetProfile), 9, &arenapb.GetProfileRequest{PlayerId: "q"},
		replyFrame(&arenapb.ProfileReply{Player: &arenapb.Player{Gold: 1}}, false, 1), nil))
	au.Call(Call0("p", act(arena.ActionBuyItem), 1, &arenapb.BuyItemRequest{ItemId: "sword", Quantity: 2},
		replyFrame(&arenapb.BuyItemReply{GoldSpent: 200}, true, 5), nil))
	au.Call(Call0("p", act(arena.ActionStartBattle), 2, &arenapb.StartBattleRequest{BattleId: "p-b2"},
		replyFrame(&arenapb.BattleReply{Won: true, GoldGained: 50, XpGained: 100, RatingDelta: 10}, false, 6), nil))
	f := battleFrame(3, "p-b3")
	au.Call(Call0("p", act(arena.ActionStartBattle), 3, &arenapb.StartBattleRequest{BattleId: "p-b3"}, nil,
		&client.UnresolvedError{Request: f, Err: &client.Error{Code: leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE}}))
	pl := au.L.Player("p")
	if pl.Start.GetVersion() != 4 || pl.Start.GetGold() != arena.StartGold {
		t.Fatalf("start %+v: want the welcome's state at version 4", pl.Start)
	}
	if len(pl.Muts) != 3 {
		t.Fatalf("mutations %+v", pl.Muts)
	}
	if m := pl.Muts[0]; m.Kind != KindPurchase || m.Item != "sword" || m.Quantity != 2 || m.GoldSpent != 200 || !m.Replayed || m.Outcome != Acked {
		t.Errorf("purchase %+v", m)
	}
	if m := pl.Muts[1]; m.Kind != KindBattle || m.BattleID != "p-b2" || !m.Won || m.GoldGained != 50 || m.Replayed || m.Outcome != Acked {
		t.Errorf("battle %+v", m)
	}
	if m := pl.Muts[2]; m.Outcome != Unresolved || m.Frame != f {
		t.Errorf("unresolved battle %+v", m)
	}
	if p := au.L.Pending("p"); len(p) != 1 || p[0] != f {
		t.Errorf("pending %v", p)
	}
}

// Call0 is an audit.Call of one send.
func Call0(player string, a *gamedef.Action, id uint64, req proto.Message, f *leveev2.ServerFrame, err error) audit.Call {
	return audit.Call{Player: player, Action: a, RequestID: id, Request: req, Sends: 1, Frame: f, Err: err}
}
