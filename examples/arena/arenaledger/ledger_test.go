package arenaledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

var (
	errBusy    = &client.Error{Code: leveev2.ErrorCode_ERROR_CODE_BUSY}
	errGold    = &client.Error{Code: leveev2.ErrorCode_ERROR_CODE_REJECTED, Reason: arena.ReasonInsufficientGold}
	errExpired = &client.Error{Code: leveev2.ErrorCode_ERROR_CODE_REQUEST_EXPIRED}
)

func unresolvedErr(f *leveev2.ClientFrame) error {
	return &client.UnresolvedError{Request: f, Err: &client.Error{Code: leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE}}
}

func buyFrame(id uint64, item string) *leveev2.ClientFrame {
	return &leveev2.ClientFrame{RequestId: id, Action: arena.ActionBuyItem, Request: encode(&arenapb.BuyItemRequest{ItemId: item, Quantity: 1})}
}

func encode(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func replyFrame(m proto.Message, replayed bool, version uint64) *leveev2.ServerFrame {
	return &leveev2.ServerFrame{Replayed: replayed, Version: version, Payload: &leveev2.ServerFrame_Reply{Reply: encode(m)}}
}

func battleFrame(id uint64, battle string) *leveev2.ClientFrame {
	return &leveev2.ClientFrame{RequestId: id, Action: arena.ActionStartBattle, Request: encode(&arenapb.StartBattleRequest{BattleId: battle, Units: 2, Ticks: 10})}
}

func start() *Profile {
	return &Profile{Player: &arenapb.Player{Id: "p", Level: 1, Gold: 1000, Rating: 1000, Inventory: map[string]uint32{}}, Version: 1}
}

// sim is a stand-in for logic: it applies purchases and battles to a
// profile exactly as logic/actions.go does.
type sim struct{ p *Profile }

func (s *sim) buy(item string, price int64) *arenapb.BuyItemReply {
	s.p.Player.Gold -= price
	s.p.Player.Inventory[item]++
	s.p.Version++
	return &arenapb.BuyItemReply{GoldSpent: price}
}

func (s *sim) battle(id string, won bool) *arenapb.BattleReply {
	r := &arenapb.BattleReply{BattleId: id, Won: won}
	if won {
		r.GoldGained, r.XpGained, r.RatingDelta = 50, 100, 10
		s.p.Player.Wins++
	} else {
		r.XpGained, r.RatingDelta = 25, -10
		s.p.Player.Losses++
	}
	s.p.Player.Gold += r.GoldGained
	s.p.Player.Xp += r.XpGained
	s.p.Player.Rating += r.RatingDelta
	s.p.Version++
	return r
}

// A run the server got right: acked purchases and battles, a refusal for
// load, a business refusal, one unresolved that was applied and one that
// was not: the profile matches, nothing is a failure.
func TestCompareMatches(t *testing.T) {
	l := NewLedger()
	s := &sim{p: start()}
	l.Snapshot("p", s.p.Player, s.p.Version)
	l.Purchase("p", 1, "potion", 1, 1, s.buy("potion", 10), false, nil)
	l.Battle("p", 2, "p-b2", 1, s.battle("p-b2", true), false, nil)
	l.Battle("p", 3, "p-b3", 2, s.battle("p-b3", false), false, nil)
	l.Purchase("p", 4, "potion", 1, 3, nil, false, errBusy)
	l.Purchase("p", 5, "sword", 1, 1, nil, false, errGold)
	s.buy("potion", 10) // applied, but the answer was lost
	l.Purchase("p", 6, "potion", 1, 1, nil, false, unresolvedErr(buyFrame(6, "potion")))
	l.Battle("p", 7, "p-b7", 1, nil, false, unresolvedErr(battleFrame(7, "p-b7")))
	l.Snapshot("p", &arenapb.Player{Gold: 1}, 2)                        // after a mutation: not the start
	l.Purchase("p", 8, "potion", 1, 0, nil, false, errors.New("local")) // never sent: not recorded
	pl := l.Player("p")
	if len(pl.Muts) != 7 || pl.Start.GetGold() != 1000 {
		t.Fatalf("record: %d mutations, start %v", len(pl.Muts), pl.Start)
	}
	r := Compare(pl, s.p, l.Values())
	if !r.OK() || r.Acked != 3 || r.Refused != 2 || r.Unresolved != 2 {
		t.Fatalf("result %+v, want a match with 3 acked, 2 refused, 2 unresolved", r)
	}
}

// Each failure kind, planted in a profile, is found and named.
func TestCompareFindsEachFailure(t *testing.T) {
	type setup func(l *Ledger, s *sim)
	cases := []struct {
		name  string
		plant setup
		want  func(r Result) bool
	}{
		{"lost purchase", func(l *Ledger, s *sim) {
			l.Purchase("p", 10, "potion", 1, 1, &arenapb.BuyItemReply{GoldSpent: 10}, false, nil) // acked, never applied
		}, func(r Result) bool { return r.Lost == 1 && r.Doubled+r.Phantom == 0 && !r.Mismatch }},
		{"lost battle", func(l *Ledger, s *sim) {
			l.Battle("p", 10, "p-b10", 1, &arenapb.BattleReply{Won: true, GoldGained: 50, XpGained: 100, RatingDelta: 10}, false, nil)
		}, func(r Result) bool { return r.Lost == 1 && r.Doubled+r.Phantom == 0 && !r.Mismatch }},
		{"doubled purchase", func(l *Ledger, s *sim) {
			l.Purchase("p", 10, "potion", 1, 1, s.buy("potion", 10), false, nil)
			s.buy("potion", 10) // the same id applied again
		}, func(r Result) bool { return r.Doubled == 1 && r.Lost+r.Phantom == 0 && !r.Mismatch }},
		{"doubled battle", func(l *Ledger, s *sim) {
			l.Battle("p", 10, "p-b10", 1, s.battle("p-b10", true), false, nil)
			s.battle("p-b10", true)
		}, func(r Result) bool { return r.Doubled == 1 && r.Lost+r.Phantom == 0 && !r.Mismatch }},
		{"phantom purchase", func(l *Ledger, s *sim) {
			s.buy("shield", 30) // applied, though the answer said BUSY
			l.Purchase("p", 10, "shield", 1, 1, nil, false, errBusy)
		}, func(r Result) bool { return r.Phantom == 1 && r.Lost+r.Doubled == 0 && !r.Mismatch }},
		{"phantom battle", func(l *Ledger, s *sim) {
			s.battle("p-b10", false)
			l.Battle("p", 10, "p-b10", 1, nil, false, errBusy)
		}, func(r Result) bool { return r.Phantom == 1 && r.Lost+r.Doubled == 0 && !r.Mismatch }},
		{"wrong charge", func(l *Ledger, s *sim) {
			l.Purchase("p", 10, "potion", 1, 1, s.buy("potion", 10), false, nil)
			s.p.Player.Gold -= 5 // charged 15 for a potion the reply said cost 10
		}, func(r Result) bool {
			return r.OK() == false && r.Mismatch && r.Lost+r.Doubled+r.Phantom == 0 && has(r.Why, "gold")
		}},
		{"version not bumped", func(l *Ledger, s *sim) {
			l.Purchase("p", 10, "potion", 1, 1, s.buy("potion", 10), false, nil)
			s.p.Version--
		}, func(r Result) bool { return r.Mismatch && has(r.Why, "version") }},
		{"item never bought", func(l *Ledger, s *sim) {
			l.Purchase("p", 10, "potion", 1, 1, s.buy("potion", 10), false, nil)
			s.p.Player.Inventory["crown"] = 1
		}, func(r Result) bool { return r.Mismatch && has(r.Why, "crown") }},
		{"more applied than unresolved explain", func(l *Ledger, s *sim) {
			s.buy("boots", 20)
			s.buy("boots", 20)
			l.Purchase("p", 10, "boots", 1, 1, nil, false, unresolvedErr(buyFrame(10, "boots")))
		}, func(r Result) bool { return r.Mismatch && r.Unresolved == 1 && has(r.Why, "never sent") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := NewLedger()
			s := &sim{p: start()}
			l.Snapshot("p", s.p.Player, s.p.Version)
			// Some honest traffic around the planted fault, and replies
			// that show the prices and rewards.
			l.Purchase("p", 1, "potion", 1, 1, s.buy("potion", 10), false, nil)
			l.Purchase("p", 2, "shield", 1, 1, s.buy("shield", 30), false, nil)
			l.Battle("p", 3, "p-b3", 1, s.battle("p-b3", true), false, nil)
			l.Battle("p", 4, "p-b4", 1, s.battle("p-b4", false), false, nil)
			c.plant(l, s)
			r := Compare(l.Player("p"), s.p, l.Values())
			if !c.want(r) {
				t.Fatalf("result %+v", r)
			}
		})
	}
}

func has(why []string, word string) bool {
	for _, w := range why {
		if strings.Contains(w, word) {
			return true
		}
	}
	return false
}

// fakeConn is a player's connection to a stand-in server holding its
// profile and its applied request ids.
type fakeConn struct {
	srv    *fakeServer
	player string
}

type fakeServer struct {
	mu      sync.Mutex
	p       map[string]*sim
	applied map[uint64]*leveev2.ServerFrame
	busy    int // the next resends answered BUSY
	expired map[uint64]bool
}

func (c *fakeConn) Resend(ctx context.Context, f *leveev2.ClientFrame) (*leveev2.ServerFrame, error) {
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy > 0 {
		s.busy--
		return nil, errBusy
	}
	if s.expired[f.GetRequestId()] {
		return nil, errExpired
	}
	if out := s.applied[f.GetRequestId()]; out != nil {
		replay := proto.CloneOf(out)
		replay.Replayed = true
		return replay, nil
	}
	req := &arenapb.BuyItemRequest{}
	if err := proto.Unmarshal(f.GetRequest(), req); err != nil || f.GetAction() != arena.ActionBuyItem {
		return nil, fmt.Errorf("not a purchase: %v", err)
	}
	pl := s.p[c.player]
	out := replyFrame(pl.buy(req.GetItemId(), 10), false, pl.p.Version)
	s.applied[f.GetRequestId()] = out
	return out, nil
}

func (c *fakeConn) Send(ctx context.Context, action string, _ []byte) (*leveev2.ServerFrame, error) {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	if action != arena.ActionGetProfile {
		return nil, fmt.Errorf("unexpected action %s", action)
	}
	p := c.srv.p[c.player].p
	return replyFrame(&arenapb.ProfileReply{Player: proto.CloneOf(p.Player)}, false, p.Version), nil
}

func (c *fakeConn) Close() error { return nil }

// Check resends the unresolved (through a BUSY), reads the profiles and
// sums the figures: one unresolved was applied (its resend replays), one
// was not (applied now), one is refused (expired), and a planted double
// apply on another player is found.
func TestCheck(t *testing.T) {
	srv := &fakeServer{p: map[string]*sim{"a": {p: start()}, "b": {p: start()}, "c": {p: start()}},
		applied: map[uint64]*leveev2.ServerFrame{}, busy: 2, expired: map[uint64]bool{3: true}}
	l := NewLedger()
	for _, id := range []string{"a", "b"} {
		l.Snapshot(id, srv.p[id].p.Player, srv.p[id].p.Version)
	}
	// a: one acked, three unresolved.
	l.Purchase("a", 1, "potion", 1, 1, srv.p["a"].buy("potion", 10), false, nil)
	srv.applied[2] = replyFrame(srv.p["a"].buy("potion", 10), false, srv.p["a"].p.Version)
	for _, id := range []uint64{2, 3, 4} {
		l.Purchase("a", id, "potion", 1, 1, nil, false, unresolvedErr(buyFrame(id, "potion")))
	}
	// b: acked once, applied twice.
	l.Purchase("b", 1, "potion", 1, 1, srv.p["b"].buy("potion", 10), false, nil)
	srv.p["b"].buy("potion", 10)
	// c: no start: unchecked.
	l.Purchase("c", 1, "potion", 1, 1, srv.p["c"].buy("potion", 10), false, nil)

	clk := clock.NewFake(time.Now())
	results := map[string]Result{}
	var mu sync.Mutex
	done := make(chan Figures, 1)
	go func() {
		done <- l.Check(context.Background(), CheckConfig{
			Dial: func(ctx context.Context, player string) (Conn, error) {
				return &fakeConn{srv: srv, player: player}, nil
			},
			Clock: clk, Parallel: 1,
			Report: func(p string, r Result) { mu.Lock(); results[p] = r; mu.Unlock() },
		})
	}()
	// The two BUSY answers make one pause before the second pass.
	testwait.Until(t, "the pause after BUSY", func() bool { return clk.Waiters() == 1 })
	clk.Advance(199 * time.Millisecond)
	select {
	case f := <-done:
		t.Fatalf("the check ended before its pause: %+v", f)
	default:
	}
	clk.Advance(time.Millisecond)
	var f Figures
	select {
	case f = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the check did not end")
	}
	want := Figures{Players: 2, Acked: 1 + 2 + 1 + 1, Doubled: 1, Unchecked: 1}
	if f != want {
		t.Fatalf("figures %+v, want %+v; results %+v", f, want, results)
	}
	if a := results["a"]; !a.OK() || a.Refused != 1 {
		t.Fatalf("a: %+v", a)
	}
	if c := f.Counters(); c["ledger_doubled"] != 1 || c["ledger_lost"] != 0 || len(c) != len(Names) {
		t.Fatalf("counters %v", c)
	}
}

// The naive client's three requests for one battle (two refused or
// unresolved, one acked replayed) are one battle applied once.
func TestCompareBattleIDOnce(t *testing.T) {
	l := NewLedger()
	s := &sim{p: start()}
	l.Snapshot("p", s.p.Player, s.p.Version)
	r := s.battle("p-b1", true)
	l.Battle("p", 1, "p-b1", 1, nil, false, unresolvedErr(battleFrame(1, "p-b1")))
	l.Battle("p", 2, "p-b1", 1, nil, false, errBusy)
	replay := r
	l.Battle("p", 3, "p-b1", 1, replay, false, nil)
	if res := Compare(l.Player("p"), s.p, l.Values()); !res.OK() || res.Acked != 1 || res.Unresolved != 0 {
		t.Fatalf("result %+v, want one acked battle and a match", res)
	}
}
