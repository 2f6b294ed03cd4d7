package sim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	arenapb "github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/apperr"
)

func unit(hp, atk, def, spd uint32) *arenapb.Unit {
	return &arenapb.Unit{Hp: hp, Attack: atk, Defense: def, Speed: spd}
}

// skirmish is a small battle that ends before max_ticks.
func skirmish(seed uint64) *arenapb.SimulateRequest {
	return &arenapb.SimulateRequest{
		BattleId: "skirmish-1",
		Seed:     seed,
		TeamA:    []*arenapb.Unit{unit(300, 40, 10, 5), unit(250, 55, 5, 9), unit(400, 30, 20, 3)},
		TeamB:    []*arenapb.Unit{unit(350, 45, 12, 7), unit(200, 60, 0, 9), unit(300, 35, 15, 4)},
		MaxTicks: 500,
	}
}

func mustSimulate(t *testing.T, req *arenapb.SimulateRequest) (*arenapb.SimulateReply, stats) {
	t.Helper()
	if err := Validate(req); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	rep, st, err := simulate(context.Background(), req)
	if err != nil {
		t.Fatalf("simulate: %v", err)
	}
	return rep, st
}

func TestSimulateIsDeterministic(t *testing.T) {
	for _, req := range []*arenapb.SimulateRequest{skirmish(7), sturdyRequest(5, 40, 7)} {
		a, err := Simulate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Simulate(context.Background(), proto.Clone(req).(*arenapb.SimulateRequest))
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(a, b) {
			t.Fatalf("same request, different replies:\n%v\n%v", a, b)
		}
		if a.GetResultHash() == 0 {
			t.Fatal("result_hash is 0")
		}
	}
}

// TestSimulateGolden pins one result to the bit, so that a change to the
// rules, the PRNG or the hash (which would make replicas of different
// versions disagree) is noticed. Update the values only on purpose.
func TestSimulateGolden(t *testing.T) {
	rep, _ := mustSimulate(t, skirmish(42))
	want := &arenapb.SimulateReply{
		BattleId: "skirmish-1", Winner: TeamA, Ticks: 8, SurvivorsA: 1, SurvivorsB: 0,
		DamageA: 850, DamageB: 858, ResultHash: 4651429318384305941,
	}
	if !proto.Equal(rep, want) {
		t.Fatalf("skirmish(42) = %v\nwant %v", rep, want)
	}
}

func TestDifferentSeedsGiveDifferentHashes(t *testing.T) {
	for name, mk := range map[string]func(uint64) *arenapb.SimulateRequest{
		"skirmish": skirmish,
		// One unit each that always hits for 1: the hits are the same for
		// every seed, the planned paths are not.
		"duel": func(seed uint64) *arenapb.SimulateRequest {
			return &arenapb.SimulateRequest{BattleId: "duel", Seed: seed,
				TeamA: []*arenapb.Unit{unit(3, 0, 0, 1)}, TeamB: []*arenapb.Unit{unit(3, 0, 0, 1)}, MaxTicks: 10}
		},
	} {
		seen := map[uint64]uint64{}
		for seed := uint64(0); seed < 200; seed++ {
			rep, _ := mustSimulate(t, mk(seed))
			if prev, ok := seen[rep.GetResultHash()]; ok {
				t.Fatalf("%s: seeds %d and %d give the same hash %x", name, prev, seed, rep.GetResultHash())
			}
			seen[rep.GetResultHash()] = seed
		}
	}
}

func TestBiggerBattlesCostMore(t *testing.T) {
	var prev uint64
	for _, c := range []struct{ units, ticks int }{{1, 1}, {4, 50}, {8, 50}, {8, 200}, {16, 200}} {
		rep, st := mustSimulate(t, sturdyRequest(c.units, c.ticks, 1))
		if want := uint64(2 * c.units * c.ticks); st.actions != want {
			t.Fatalf("%d units x %d ticks: %d actions, want %d", c.units, c.ticks, st.actions, want)
		}
		if rep.GetTicks() != uint32(c.ticks) || rep.GetWinner() != Draw {
			t.Fatalf("%d units x %d ticks: sturdy battle ended early: %v", c.units, c.ticks, rep)
		}
		if st.actions <= prev {
			t.Fatalf("%d units x %d ticks: %d actions, not more than the smaller battle's %d", c.units, c.ticks, st.actions, prev)
		}
		prev = st.actions
	}
}

func TestSimulateOutcome(t *testing.T) {
	strong := []*arenapb.Unit{unit(1000, 500, 100, 10), unit(1000, 500, 100, 10)}
	weak := []*arenapb.Unit{unit(100, 10, 0, 1), unit(150, 10, 0, 1), unit(120, 10, 0, 1)}
	rep, st := mustSimulate(t, &arenapb.SimulateRequest{BattleId: "rout", Seed: 3, TeamA: weak, TeamB: strong, MaxTicks: 100})
	if rep.GetWinner() != TeamB || rep.GetSurvivorsA() != 0 || rep.GetSurvivorsB() != 2 {
		t.Fatalf("reply %v: want team B to win with both units standing", rep)
	}
	// Damage dealt counts only hp taken, so the loser's whole hp is dealt.
	if rep.GetDamageB() != 100+150+120 {
		t.Fatalf("damage_b = %d, want 370", rep.GetDamageB())
	}
	if rep.GetTicks() >= 100 || st.actions == 0 {
		t.Fatalf("ticks = %d, actions = %d: a rout ends early", rep.GetTicks(), st.actions)
	}
	if rep.GetBattleId() != "rout" {
		t.Fatalf("battle_id = %q", rep.GetBattleId())
	}
}

// countdownCtx reports Canceled from the n-th call of Err on.
type countdownCtx struct {
	context.Context
	n, calls int
}

func (c *countdownCtx) Err() error {
	c.calls++
	if c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

func TestSimulateStopsWhenCallerIsGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Simulate(ctx, sturdyRequest(2, 100, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before start: err = %v, want context.Canceled", err)
	}

	req := sturdyRequest(2, 1000, 1)
	cctx := &countdownCtx{Context: context.Background(), n: 3}
	rep, st, err := simulate(cctx, req)
	if !errors.Is(err, context.Canceled) || rep != nil {
		t.Fatalf("cancelled mid-battle: rep = %v, err = %v, want context.Canceled", rep, err)
	}
	// The context is looked at every ctxCheckTicks ticks, so the fight
	// stopped after two checks' worth of ticks of its 1000.
	if want := uint64(2 * 2 * 2 * ctxCheckTicks); st.actions != want {
		t.Fatalf("cancelled mid-battle after %d actions, want %d", st.actions, want)
	}
}

func TestValidate(t *testing.T) {
	valid := func() *arenapb.SimulateRequest {
		return &arenapb.SimulateRequest{BattleId: "b", Seed: 1, MaxTicks: 1,
			TeamA: []*arenapb.Unit{unit(1, 0, 0, 0)}, TeamB: []*arenapb.Unit{unit(MaxHP, MaxStat, MaxStat, MaxStat)}}
	}
	if err := Validate(valid()); err != nil {
		t.Fatalf("valid request: %v", err)
	}
	edge := valid()
	edge.BattleId = strings.Repeat("x", MaxBattleIDLen)
	edge.MaxTicks = MaxTicks
	edge.TeamA = make([]*arenapb.Unit, MaxTeamSize)
	for i := range edge.TeamA {
		edge.TeamA[i] = unit(1, 1, 1, 1)
	}
	if err := Validate(edge); err != nil {
		t.Fatalf("request at every limit: %v", err)
	}
	for _, c := range badRequests() {
		err := Validate(c.mutate(valid()))
		if !errors.Is(err, apperr.ErrBadRequest) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: err = %v, want a bad request naming %q", c.name, err, c.field)
		}
	}
	if err := Validate(nil); !errors.Is(err, apperr.ErrBadRequest) {
		t.Errorf("nil request: err = %v", err)
	}
	req := valid()
	req.TeamB = append(req.TeamB, nil)
	if err := Validate(req); !errors.Is(err, apperr.ErrBadRequest) || !strings.Contains(err.Error(), "team_b[1]") {
		t.Errorf("nil unit: err = %v", err)
	}
}

type badCase struct {
	name, field string
	mutate      func(*arenapb.SimulateRequest) *arenapb.SimulateRequest
}

// badRequests is every class of bad input, each one field off its limit.
func badRequests() []badCase {
	units := func(n int) []*arenapb.Unit {
		us := make([]*arenapb.Unit, n)
		for i := range us {
			us[i] = unit(10, 1, 1, 1)
		}
		return us
	}
	return []badCase{
		{"empty battle id", "battle_id", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest { r.BattleId = ""; return r }},
		{"long battle id", "battle_id", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest {
			r.BattleId = strings.Repeat("x", MaxBattleIDLen+1)
			return r
		}},
		{"no ticks", "max_ticks", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest { r.MaxTicks = 0; return r }},
		{"too many ticks", "max_ticks", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest { r.MaxTicks = MaxTicks + 1; return r }},
		{"empty team a", "team_a", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest { r.TeamA = nil; return r }},
		{"empty team b", "team_b", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest { r.TeamB = nil; return r }},
		{"team too big", "team_b", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest { r.TeamB = units(MaxTeamSize + 1); return r }},
		{"zero hp", "team_a[0].hp", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest { r.TeamA[0].Hp = 0; return r }},
		{"too much hp", "team_b[0].hp", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest { r.TeamB[0].Hp = MaxHP + 1; return r }},
		{"attack", "team_a[0].attack", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest { r.TeamA[0].Attack = MaxStat + 1; return r }},
		{"defense", "team_b[0].defense", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest {
			r.TeamB[0].Defense = MaxStat + 1
			return r
		}},
		{"speed", "team_a[0].speed", func(r *arenapb.SimulateRequest) *arenapb.SimulateRequest { r.TeamA[0].Speed = 1 << 31; return r }},
	}
}
