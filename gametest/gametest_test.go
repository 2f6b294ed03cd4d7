package gametest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/gametest"
	"github.com/leveehq/levee/proto/leveev2"
)

// tiny is the kit's own test game, on arena's messages: "spend" takes gold
// and stamps Ctx.Now into xp; "peek" reads; "fight" runs job "double" keyed
// by the battle id and adds its ticks to the wins.
func tiny() *game.Game {
	g := game.New("tiny", func(id string) *arenapb.Player { return &arenapb.Player{Id: id, Gold: 10} })
	game.Mutation(g, "spend", game.Critical, func(c *game.Ctx, p *arenapb.Player, r *arenapb.BuyItemRequest) (*arenapb.BuyItemReply, *arenapb.Player, error) {
		if p.GetGold() < int64(r.GetQuantity()) {
			return nil, nil, game.Reject("broke", "not enough gold")
		}
		p.Gold -= int64(r.GetQuantity())
		p.Xp = uint64(c.Now().Unix())
		return &arenapb.BuyItemReply{GoldSpent: int64(r.GetQuantity()), Player: p}, p, nil
	})
	game.Query(g, "peek", game.Sheddable, func(c *game.Ctx, p *arenapb.Player, _ *arenapb.GetProfileRequest) (*arenapb.ProfileReply, error) {
		return &arenapb.ProfileReply{Player: p}, nil
	})
	game.Job(g, "double", func(_ context.Context, r *arenapb.SimulateRequest) (*arenapb.SimulateReply, error) {
		return &arenapb.SimulateReply{BattleId: r.GetBattleId(), Ticks: 2 * r.GetMaxTicks()}, nil
	})
	game.JobAction(g, "fight", game.Default, "double",
		func(r *arenapb.StartBattleRequest) string { return r.GetBattleId() },
		func(c *game.Ctx, p *arenapb.Player, r *arenapb.StartBattleRequest) (*arenapb.SimulateRequest, error) {
			return &arenapb.SimulateRequest{BattleId: r.GetBattleId(), MaxTicks: r.GetTicks()}, nil
		},
		func(c *game.Ctx, p *arenapb.Player, r *arenapb.StartBattleRequest, res *arenapb.SimulateReply) (*arenapb.BattleReply, *arenapb.Player, error) {
			p.Wins += res.GetTicks()
			return &arenapb.BattleReply{BattleId: r.GetBattleId(), Result: res, Player: p}, p, nil
		})
	return g
}

func TestAdvanceMovesTheHandlersClock(t *testing.T) {
	start := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	s := gametest.New(t, tiny(), gametest.Start(start))
	p := s.Login("ann")
	s.Advance(90 * time.Second)
	r := gametest.Decode[*arenapb.BuyItemReply](p.Do("spend", &arenapb.BuyItemRequest{Quantity: 1}))
	if got := time.Unix(int64(r.GetPlayer().GetXp()), 0); !got.Equal(start.Add(90 * time.Second)) {
		t.Fatalf("the handler saw %v, want %v", got.UTC(), start.Add(90*time.Second))
	}
	if !s.Now().Equal(start.Add(90 * time.Second)) {
		t.Fatalf("Now %v", s.Now())
	}
}

func TestVersionsAndState(t *testing.T) {
	s := gametest.New(t, tiny())
	p := s.Login("ann")
	if v := p.Welcome().GetVersion(); v != 1 {
		t.Fatalf("a new player at version %d", v)
	}
	r := p.Do("spend", &arenapb.BuyItemRequest{Quantity: 3})
	if r.Version != 2 || r.Replayed {
		t.Fatalf("spend: %v", r)
	}
	peek := p.Do("peek", &arenapb.GetProfileRequest{})
	if gametest.Decode[*arenapb.ProfileReply](peek).GetPlayer().GetGold() != 7 || peek.Version != 2 {
		t.Fatalf("peek: %v", peek)
	}
	st, v := gametest.StateVersion[*arenapb.Player](p)
	if st.GetGold() != 7 || v != 2 {
		t.Fatalf("state %v at version %d", st, v)
	}
}

func TestResendReplaysAndRejectionsStayFinal(t *testing.T) {
	s := gametest.New(t, tiny())
	p := s.Login("ann")
	broke := p.Do("spend", &arenapb.BuyItemRequest{Quantity: 11}).MustReject("broke")
	spent := p.Do("spend", &arenapb.BuyItemRequest{Quantity: 10})
	spent.Resend().MustReplay(spent)
	// The refusal is the request's final outcome; a fresh id for the same
	// request is a new request.
	broke.Resend().MustReplay(broke)
	p.Do("spend", &arenapb.BuyItemRequest{Quantity: 1}).MustReject("broke")
	if st := gametest.State[*arenapb.Player](p); st.GetGold() != 0 {
		t.Fatalf("gold %d after one spend of 10", st.GetGold())
	}
	// An id reused for another request is refused.
	p.DoID(spent.ID, "spend", &arenapb.BuyItemRequest{Quantity: 2}).MustFail(leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, "")
}

func TestHeldJobIsAppliedOncePerKey(t *testing.T) {
	s := gametest.New(t, tiny())
	p := s.Login("ann")
	h := s.Hold("double")
	first := p.Go("fight", &arenapb.StartBattleRequest{BattleId: "b1", Ticks: 5})
	h.Wait(1)
	second := p.Go("fight", &arenapb.StartBattleRequest{BattleId: "b1", Ticks: 5})
	if got := h.Held(); len(got) != 1 || got[0] != "b1" {
		t.Fatalf("held %v", got)
	}
	h.Release()
	a, b := first.Wait(), second.Wait()
	if a.Err != nil || b.Err != nil || string(a.Reply) != string(b.Reply) {
		t.Fatalf("two sends of b1: %v / %v", a, b)
	}
	if st := gametest.State[*arenapb.Player](p); st.GetWins() != 10 || s.JobRuns("double") != 1 {
		t.Fatalf("b1 applied: wins %d, job runs %d", st.GetWins(), s.JobRuns("double"))
	}
	// Another key is another job.
	p.Do("fight", &arenapb.StartBattleRequest{BattleId: "b2", Ticks: 1})
	if s.JobRuns("double") != 2 {
		t.Fatalf("job runs %d", s.JobRuns("double"))
	}
}

func TestFailedJobChangesNothing(t *testing.T) {
	s := gametest.New(t, tiny())
	p := s.Login("ann")
	h := s.Hold("double")
	pd := p.Go("fight", &arenapb.StartBattleRequest{BattleId: "b1", Ticks: 5})
	h.Wait(1)
	h.Fail(fmt.Errorf("job tier gone"))
	if r := pd.Wait(); r.Err == nil {
		t.Fatalf("a failed job answered %v", r)
	}
	if st := gametest.State[*arenapb.Player](p); st.GetWins() != 0 {
		t.Fatalf("wins %d after a failed job", st.GetWins())
	}
}

// fakeTB records the kit's failures, to check that its checks can fail.
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(f)
}

func fails(t *testing.T, tb *fakeTB, check func()) (msg string) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil && v != tb {
			panic(v)
		}
		msg = tb.fatal
	}()
	tb.fatal = ""
	check()
	return ""
}

func TestChecksFail(t *testing.T) {
	tb := &fakeTB{TB: t}
	s := gametest.New(tb, tiny())
	p := s.Login("ann")
	one := p.Do("spend", &arenapb.BuyItemRequest{Quantity: 1})
	two := p.Do("spend", &arenapb.BuyItemRequest{Quantity: 1})
	if msg := fails(t, tb, func() { two.MustReplay(one) }); !strings.Contains(msg, "not replayed") {
		t.Fatalf("MustReplay of a fresh outcome: %q", msg)
	}
	if msg := fails(t, tb, func() { one.MustReject("broke") }); !strings.Contains(msg, "want") {
		t.Fatalf("MustReject of a success: %q", msg)
	}
	if msg := fails(t, tb, func() { s.Hold("nope") }); !strings.Contains(msg, "no job") {
		t.Fatalf("Hold of an unknown job: %q", msg)
	}
	if msg := fails(t, tb, func() { gametest.New(tb, game.New("bad", func(string) *arenapb.Player { return nil })) }); !strings.Contains(msg, "declares no action") {
		t.Fatalf("New with an invalid game: %q", msg)
	}
}
