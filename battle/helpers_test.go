package battle

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	arenapb "github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/examples/arena/sim"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The tests run arena's job, simulate (examples/arena/sim), through the
// generic Jobs service.

const jobSimulate = arena.JobSimulate

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

// sturdyRequest is a battle whose units survive all maxTicks ticks, so its
// cost is exactly units × 2 × maxTicks actions.
func sturdyRequest(units, maxTicks int, seed uint64) *arenapb.SimulateRequest {
	team := func(speed uint32) []*arenapb.Unit {
		us := make([]*arenapb.Unit, units)
		for i := range us {
			us[i] = &arenapb.Unit{Hp: sim.MaxHP, Attack: 10, Defense: 2, Speed: speed + uint32(i%3)}
		}
		return us
	}
	return &arenapb.SimulateRequest{
		BattleId: fmt.Sprintf("bench-%dx%d", units, maxTicks),
		Seed:     seed,
		TeamA:    team(10),
		TeamB:    team(11),
		MaxTicks: uint32(maxTicks),
	}
}

// jobRequest is the Jobs.Run request of arena's simulate job for req, keyed
// by its battle id.
func jobRequest(t testing.TB, req *arenapb.SimulateRequest) *leveev2.JobRequest {
	t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return &leveev2.JobRequest{Job: jobSimulate, Key: req.GetBattleId(), Request: b}
}

// simReply decodes a Jobs.Run reply as the simulate job's.
func simReply(t testing.TB, rep *leveev2.JobReply) *arenapb.SimulateReply {
	t.Helper()
	var out arenapb.SimulateReply
	if err := proto.Unmarshal(rep.GetReply(), &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// simulate calls the simulate job of a tier over gRPC.
func simulate(t testing.TB, ctx context.Context, c leveev2.JobsClient, req *arenapb.SimulateRequest, opts ...grpc.CallOption) (*arenapb.SimulateReply, error) {
	t.Helper()
	rep, err := c.Run(ctx, jobRequest(t, req), opts...)
	if err != nil {
		return nil, err
	}
	return simReply(t, rep), nil
}

// want is what the real job gives for req.
func want(t testing.TB, req *arenapb.SimulateRequest) *arenapb.SimulateReply {
	t.Helper()
	rep, err := sim.Simulate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// badCase is one bad battle: the field its error must name.
type badCase struct {
	name, field string
	mutate      func(*arenapb.SimulateRequest)
}

// badRequests is a bad input of each kind the job refuses.
func badRequests() []badCase {
	return []badCase{
		{"empty battle id", "battle_id", func(r *arenapb.SimulateRequest) { r.BattleId = "" }},
		{"long battle id", "battle_id", func(r *arenapb.SimulateRequest) { r.BattleId = strings.Repeat("x", sim.MaxBattleIDLen+1) }},
		{"no ticks", "max_ticks", func(r *arenapb.SimulateRequest) { r.MaxTicks = 0 }},
		{"too many ticks", "max_ticks", func(r *arenapb.SimulateRequest) { r.MaxTicks = sim.MaxTicks + 1 }},
		{"empty team a", "team_a", func(r *arenapb.SimulateRequest) { r.TeamA = nil }},
		{"zero hp", "team_a[0].hp", func(r *arenapb.SimulateRequest) { r.TeamA[0].Hp = 0 }},
		{"attack", "team_a[0].attack", func(r *arenapb.SimulateRequest) { r.TeamA[0].Attack = sim.MaxStat + 1 }},
	}
}
