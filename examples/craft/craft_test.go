package craft_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"example.com/craft"
	"example.com/craft/craftpb"
	"github.com/leveehq/levee/gametest"
	"github.com/leveehq/levee/proto/leveev2"
)

const rejected = leveev2.ErrorCode_ERROR_CODE_REJECTED

func TestDeclarationIsValid(t *testing.T) {
	if err := craft.Game().Validate(); err != nil {
		t.Fatal(err)
	}
}

func crafter(p *gametest.Player) *craftpb.Crafter { return gametest.State[*craftpb.Crafter](p) }

func TestNewCrafter(t *testing.T) {
	s := gametest.New(t, craft.Game())
	p := s.Login("ann")
	st, v := gametest.StateVersion[*craftpb.Crafter](p)
	if v != 1 || st.GetId() != "ann" || st.GetCoins() != 50 || st.GetMaterials()["wood"] != 10 {
		t.Fatalf("new crafter at version %d: %v", v, st)
	}
}

func TestGatherCooldownOnTheShardsClock(t *testing.T) {
	s := gametest.New(t, craft.Game())
	p := s.Login("ann")
	first := p.Do(craft.ActionGather, &craftpb.GatherRequest{Material: "herb"})
	rep := gametest.Decode[*craftpb.GatherReply](first)
	if rep.GetAmount() < 1 || rep.GetAmount() > 3 || rep.GetTotal() != 4+rep.GetAmount() {
		t.Fatalf("gather: %v", rep)
	}
	// Within the cooldown: refused by the game's rule, and the refusal is
	// the request's final outcome even once the cooldown is over.
	s.Advance(craft.GatherCooldown - time.Millisecond)
	tired := p.Do(craft.ActionGather, &craftpb.GatherRequest{Material: "wood"}).MustReject(craft.ReasonCooldown)
	s.Advance(time.Hour)
	tired.Resend().MustReplay(tired)
	// A new request after the cooldown gathers again.
	p.Do(craft.ActionGather, &craftpb.GatherRequest{Material: "wood"})
	if st := crafter(p); st.GetMaterials()["herb"] != 4+rep.GetAmount() || st.GetMaterials()["wood"] <= 10 {
		t.Fatalf("after two gathers: %v", st.GetMaterials())
	}
	// The resend of the first gather replays: nothing gathered twice.
	first.Resend().MustReplay(first)
	if st := crafter(p); st.GetMaterials()["herb"] != 4+rep.GetAmount() {
		t.Fatalf("a replayed gather gathered again: %v", st.GetMaterials())
	}
	p.Do(craft.ActionGather, &craftpb.GatherRequest{Material: "gold_dust"}).
		MustFail(leveev2.ErrorCode_ERROR_CODE_NOT_FOUND, craft.ReasonUnknownMaterial)
}

// craftOne forges recipe under craftID and returns the pending item.
func craftOne(t *testing.T, p *gametest.Player, craftID, recipe string) *craftpb.Pending {
	t.Helper()
	r := p.Do(craft.ActionCraft, &craftpb.CraftRequest{CraftId: craftID, Recipe: recipe})
	return gametest.Decode[*craftpb.CraftReply](r).GetPending()
}

func TestCraftThenCollectWhenReady(t *testing.T) {
	s := gametest.New(t, craft.Game())
	p := s.Login("ann")
	start := s.Now()
	pend := craftOne(t, p, "c1", "plank")
	if want := start.Add(craft.Recipes["plank"].Time).UnixMilli(); pend.GetReadyAtMs() != want || pend.GetQuality() < 1 || pend.GetQuality() > 100 {
		t.Fatalf("pending %v, want ready at %d", pend, want)
	}
	st := crafter(p)
	if st.GetMaterials()["wood"] != 8 || len(st.GetPending()) != 1 || st.GetCrafted() != 1 {
		t.Fatalf("after a craft: %v", st)
	}
	// Before ready_at: not_ready, final for that request.
	s.Advance(craft.Recipes["plank"].Time - time.Millisecond)
	early := p.Do(craft.ActionCollect, &craftpb.CollectRequest{CraftId: "c1"}).MustReject(craft.ReasonNotReady)
	s.Advance(time.Millisecond)
	early.Resend().MustReplay(early)
	got := gametest.Decode[*craftpb.CollectReply](p.Do(craft.ActionCollect, &craftpb.CollectRequest{CraftId: "c1"}))
	if got.GetItem() != "plank" || got.GetCount() != 1 || got.GetQuality() != pend.GetQuality() {
		t.Fatalf("collect: %v", got)
	}
	p.Do(craft.ActionCollect, &craftpb.CollectRequest{CraftId: "c1"}).
		MustFail(leveev2.ErrorCode_ERROR_CODE_NOT_FOUND, craft.ReasonNoSuchCraft)
	if st := crafter(p); st.GetItems()["plank"] != 1 || len(st.GetPending()) != 0 || st.GetCollected() != 1 {
		t.Fatalf("after collect: %v", st)
	}
}

func TestCraftIsAppliedOncePerCraftID(t *testing.T) {
	s := gametest.New(t, craft.Game())
	p := s.Login("ann")
	hold := s.Hold(craft.JobForge)
	first := p.Go(craft.ActionCraft, &craftpb.CraftRequest{CraftId: "c1", Recipe: "ingot"})
	hold.Wait(1)
	// While the forge runs, the same craft id under a new request id waits
	// for the same result instead of forging again.
	again := p.Go(craft.ActionCraft, &craftpb.CraftRequest{CraftId: "c1", Recipe: "ingot"})
	hold.Release()
	r1, r2 := first.Wait(), again.Wait()
	if r1.Err != nil || r2.Err != nil || string(r1.Reply) != string(r2.Reply) {
		t.Fatalf("the two sends of craft c1: %v / %v", r1, r2)
	}
	if !r2.Replayed && !r1.Replayed {
		t.Fatalf("neither send of craft c1 was a replay: %v / %v", r1, r2)
	}
	r1.Resend().MustReplay(r1)
	p.Do(craft.ActionCraft, &craftpb.CraftRequest{CraftId: "c1", Recipe: "ingot"}).MustReplay(r1)
	st := crafter(p)
	if st.GetMaterials()["ore"] != 4 || len(st.GetPending()) != 1 || st.GetCrafted() != 1 {
		t.Fatalf("craft c1 applied more than once: %v", st)
	}
	if n := s.JobRuns(craft.JobForge); n != 1 {
		t.Fatalf("forge ran %d times for one craft id", n)
	}
}

func TestCraftRefusals(t *testing.T) {
	s := gametest.New(t, craft.Game())
	p := s.Login("ann")
	p.Do(craft.ActionCraft, &craftpb.CraftRequest{CraftId: "c1", Recipe: "anvil"}).
		MustFail(leveev2.ErrorCode_ERROR_CODE_NOT_FOUND, craft.ReasonUnknownRecipe)
	p.Do(craft.ActionCraft, &craftpb.CraftRequest{CraftId: "no spaces", Recipe: "plank"}).
		MustFail(leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, craft.ReasonBadCraftID)
	// herb 4: two tonics, then no herbs left.
	craftOne(t, p, "t1", "tonic")
	craftOne(t, p, "t2", "tonic")
	none := p.Do(craft.ActionCraft, &craftpb.CraftRequest{CraftId: "t3", Recipe: "tonic"}).MustReject(craft.ReasonNoMaterials)
	none.Resend().MustReplay(none)
	craftOne(t, p, "p1", "plank")
	craftOne(t, p, "p2", "plank")
	p.Do(craft.ActionCraft, &craftpb.CraftRequest{CraftId: "p3", Recipe: "plank"}).MustReject(craft.ReasonWorkshopFull)
	if n := s.JobRuns(craft.JobForge); n != 4 {
		t.Fatalf("forge ran %d times, want 4 (a refused craft forges nothing)", n)
	}
}

func TestForgeFailureChangesNothing(t *testing.T) {
	s := gametest.New(t, craft.Game())
	p := s.Login("ann")
	hold := s.Hold(craft.JobForge)
	pd := p.Go(craft.ActionCraft, &craftpb.CraftRequest{CraftId: "c1", Recipe: "plank"})
	hold.Wait(1)
	hold.Fail(errors.New("forge tier lost"))
	if r := pd.Wait(); r.Err == nil {
		t.Fatalf("a failed forge answered %v", r)
	}
	if st := crafter(p); st.GetMaterials()["wood"] != 10 || len(st.GetPending()) != 0 {
		t.Fatalf("a failed forge changed the state: %v", st)
	}
	// The craft can be made again under the same craft id once the tier is back.
	craftOne(t, p, "c1", "plank")
}

func TestTradeIsCriticalAndExactlyOnce(t *testing.T) {
	s := gametest.New(t, craft.Game())
	p := s.Login("ann")
	craftOne(t, p, "c1", "plank")
	craftOne(t, p, "c2", "plank")
	s.Advance(craft.Recipes["plank"].Time)
	p.Do(craft.ActionCollect, &craftpb.CollectRequest{CraftId: "c1"})
	p.Do(craft.ActionCollect, &craftpb.CollectRequest{}) // the soonest ready: c2

	sell := p.Do(craft.ActionTrade, &craftpb.TradeRequest{Item: "plank", Quantity: 2})
	rep := gametest.Decode[*craftpb.TradeReply](sell)
	if rep.GetEarned() != 12 || rep.GetCoins() != 62 || rep.GetLeft() != 0 {
		t.Fatalf("trade: %v", rep)
	}
	sell.Resend().MustReplay(sell)
	if st := crafter(p); st.GetCoins() != 62 {
		t.Fatalf("a resent trade paid twice: %d coins", st.GetCoins())
	}
	broke := p.Do(craft.ActionTrade, &craftpb.TradeRequest{Item: "plank", Quantity: 1}).MustReject(craft.ReasonNotEnoughItems)
	broke.Resend().MustReplay(broke)
	p.Do(craft.ActionTrade, &craftpb.TradeRequest{Item: "plank", Quantity: 0}).
		MustFail(leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, craft.ReasonBadQuantity)
	p.Do(craft.ActionTrade, &craftpb.TradeRequest{Item: "diamond", Quantity: 1}).
		MustFail(leveev2.ErrorCode_ERROR_CODE_NOT_FOUND, craft.ReasonUnknownItem)
}

func TestResendAfterTheWindowIsExpired(t *testing.T) {
	s := gametest.New(t, craft.Game(), gametest.Window(time.Minute))
	p := s.Login("ann")
	g := p.Do(craft.ActionGather, &craftpb.GatherRequest{Material: "ore"})
	s.Advance(2 * time.Hour)
	g.Resend().MustFail(leveev2.ErrorCode_ERROR_CODE_REQUEST_EXPIRED, "")
}

func TestEmoteAndInspect(t *testing.T) {
	s := gametest.New(t, craft.Game())
	ann, bob := s.Login("ann"), s.Login("bob")
	e := gametest.Decode[*craftpb.EmoteReply](ann.Do(craft.ActionEmote, &craftpb.EmoteRequest{Emote: "wave"}))
	if e.GetPlayerId() != "ann" || e.GetTitle() != "novice" {
		t.Fatalf("emote: %v", e)
	}
	ann.Do(craft.ActionEmote, &craftpb.EmoteRequest{Emote: "moonwalk"}).
		MustFail(leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, craft.ReasonUnknownEmote)

	craftOne(t, bob, "b1", "plank")
	s.Advance(craft.Recipes["plank"].Time)
	bob.Do(craft.ActionCollect, &craftpb.CollectRequest{CraftId: "b1"})
	// Ann reads Bob's public workshop: his items, not his coins.
	in := gametest.Decode[*craftpb.InspectReply](ann.Do(craft.ActionInspect, &craftpb.InspectRequest{PlayerId: "bob"}))
	if in.GetPlayerId() != "bob" || in.GetItems()["plank"] != 1 || in.GetCrafted() != 1 {
		t.Fatalf("inspect bob: %v", in)
	}
	self := gametest.Decode[*craftpb.InspectReply](ann.Do(craft.ActionInspect, &craftpb.InspectRequest{}))
	if self.GetPlayerId() != "ann" || len(self.GetItems()) != 0 {
		t.Fatalf("inspect self: %v", self)
	}
}

func TestForgeIsDeterministicAndBounded(t *testing.T) {
	req := &craftpb.ForgeRequest{PlayerId: "ann", CraftId: "c1", Recipe: "hammer", Rounds: 3000}
	a, err := craft.Forge(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := craft.Forge(context.Background(), proto.Clone(req).(*craftpb.ForgeRequest))
	if err != nil || !proto.Equal(a, b) || a.GetQuality() < 1 || a.GetQuality() > 100 {
		t.Fatalf("forge twice: %v / %v (%v)", a, b, err)
	}
	for _, rounds := range []uint32{0, craft.MaxRounds + 1} {
		if _, err := craft.Forge(context.Background(), &craftpb.ForgeRequest{Rounds: rounds}); err == nil {
			t.Fatalf("forge of %d rounds: no error", rounds)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := craft.Forge(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("forge after its deadline: %v", err)
	}
}

// ExampleGame shows what craft declares.
func ExampleGame() {
	g := craft.Game()
	for _, a := range g.Def().Actions() {
		line := fmt.Sprintf("%-8s %-9s mutates=%v", a.Name, a.Class, a.Mutates)
		if a.Job != "" {
			line += " job=" + a.Job
		}
		fmt.Println(line)
	}
	fmt.Println(g.Validate())
	// Output:
	// gather   default   mutates=true
	// craft    default   mutates=true job=forge
	// collect  default   mutates=true
	// trade    critical  mutates=true
	// emote    sheddable mutates=false
	// inspect  default   mutates=false
	// <nil>
}
