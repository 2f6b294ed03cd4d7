package arena_test

import (
	"testing"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/gametest"
	"github.com/leveehq/levee/proto/leveev2"
)

func TestDeclarationIsValid(t *testing.T) {
	if err := arena.Game().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestBuyItemIsExactlyOnce(t *testing.T) {
	s := gametest.New(t, arena.Game())
	p := s.Login("alice")
	buy := p.Do(arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: "sword", Quantity: 3})
	if rep := gametest.Decode[*arenapb.BuyItemReply](buy); rep.GetGoldSpent() != 300 || rep.GetPlayer().GetGold() != arena.StartGold-300 {
		t.Fatalf("buy: %v", rep)
	}
	buy.Resend().MustReplay(buy)
	if st := gametest.State[*arenapb.Player](p); st.GetGold() != arena.StartGold-300 || st.GetInventory()["sword"] != 3 {
		t.Fatalf("a resent purchase was applied again: %v", st)
	}
}

func TestInsufficientGoldStaysFinal(t *testing.T) {
	s := gametest.New(t, arena.Game())
	p := s.Login("alice")
	broke := p.Do(arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: "dragon_skin", Quantity: 3}).MustReject(arena.ReasonInsufficientGold)
	// Battles won bring gold; the refused purchase stays refused.
	for _, id := range []string{"b1", "b2", "b3"} {
		p.Do(arena.ActionStartBattle, &arenapb.StartBattleRequest{BattleId: id, Units: 2, Ticks: 20})
	}
	broke.Resend().MustReplay(broke)
	p.Do(arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: "potion", Quantity: 0}).
		MustFail(leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, arena.ReasonBadQuantity)
	p.Do(arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: "cake", Quantity: 1}).
		MustFail(leveev2.ErrorCode_ERROR_CODE_NOT_FOUND, arena.ReasonUnknownItem)
}

func TestBattleRewardAppliedOncePerBattleID(t *testing.T) {
	s := gametest.New(t, arena.Game())
	p := s.Login("alice")
	hold := s.Hold(arena.JobSimulate)
	first := p.Go(arena.ActionStartBattle, &arenapb.StartBattleRequest{BattleId: "b1", Units: 4, Ticks: 50})
	hold.Wait(1)
	second := p.Go(arena.ActionStartBattle, &arenapb.StartBattleRequest{BattleId: "b1", Units: 4, Ticks: 50})
	hold.Release()
	a, b := first.Wait(), second.Wait()
	if a.Err != nil || b.Err != nil || string(a.Reply) != string(b.Reply) {
		t.Fatalf("two sends of battle b1: %v / %v", a, b)
	}
	a.Resend().MustReplay(a)
	st := gametest.State[*arenapb.Player](p)
	if st.GetWins()+st.GetLosses() != 1 || s.JobRuns(arena.JobSimulate) != 1 {
		t.Fatalf("battle b1 applied %d times, simulated %d times", st.GetWins()+st.GetLosses(), s.JobRuns(arena.JobSimulate))
	}
}

func TestProfileOfAnotherPlayerIsForbidden(t *testing.T) {
	s := gametest.New(t, arena.Game())
	alice := s.Login("alice")
	s.Login("bob")
	alice.Do(arena.ActionGetProfile, &arenapb.GetProfileRequest{PlayerId: "bob"}).
		MustFail(leveev2.ErrorCode_ERROR_CODE_FORBIDDEN, "not_yours")
	own := gametest.Decode[*arenapb.ProfileReply](alice.Do(arena.ActionGetProfile, &arenapb.GetProfileRequest{}))
	if own.GetPlayer().GetId() != "alice" || own.GetPlayer().GetGold() != arena.StartGold {
		t.Fatalf("own profile: %v", own)
	}
}
