package arena_test

import (
	"hash/fnv"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
)

// seed is FNV-1a 64 of "<player>/<battle>", as arena seeds a battle.
func seed(player, battle string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(player + "/" + battle))
	return h.Sum64()
}

func TestSimulateRequestDeterministic(t *testing.T) {
	p := arena.NewPlayer("alice")
	req := &arenapb.StartBattleRequest{BattleId: "b1", Units: 3, Ticks: 50}
	a, b := arena.SimulateRequest(p, req), arena.SimulateRequest(proto.Clone(p).(*arenapb.Player), req)
	if !proto.Equal(a, b) {
		t.Fatal("same input, different battles")
	}
	if a.GetSeed() != seed("alice", "b1") || len(a.GetTeamA()) != 3 || len(a.GetTeamB()) != 3 || a.GetMaxTicks() != 50 {
		t.Fatalf("request = %v", a)
	}
	if c := arena.SimulateRequest(p, &arenapb.StartBattleRequest{BattleId: "b2", Units: 3, Ticks: 50}); proto.Equal(c.GetTeamB()[0], a.GetTeamB()[0]) && c.GetSeed() == a.GetSeed() {
		t.Fatal("another battle id gives the same battle")
	}
}

func TestApplyReward(t *testing.T) {
	p := arena.NewPlayer("alice")
	p.Xp = 490
	br := arena.ApplyReward(p, "b", &arenapb.SimulateReply{Winner: 1})
	if !br.GetWon() || p.GetXp() != 540 || p.GetLevel() != 2 || p.GetGold() != 1030 || p.GetRating() != 1015 || p.GetWins() != 1 {
		t.Fatalf("after a win: %v", p)
	}
	p.Rating = 4
	br = arena.ApplyReward(p, "c", &arenapb.SimulateReply{Winner: 0}) // a draw is a loss
	if br.GetWon() || br.GetRatingDelta() != -4 || p.GetRating() != 0 || p.GetLosses() != 1 || p.GetXp() != 550 || p.GetGold() != 1030 {
		t.Fatalf("after a draw: %v (reply %v)", p, br)
	}
}
