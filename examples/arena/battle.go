package arena

import (
	"fmt"
	"hash/fnv"

	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/game"
)

// Bounds on a battle request.
const (
	MaxBattleIDLen = 64
	MaxUnits       = 64
	MaxTicks       = 10000
)

// Rewards. A draw counts as a loss.
const (
	winXP      = 50
	winGold    = 30
	winRating  = 15
	lossXP     = 10
	lossRating = -10
	xpPerLevel = 500
)

// ValidateBattle checks a battle request: Invalid (reason "bad_battle")
// unless the battle id, units and ticks are in bounds.
func ValidateBattle(b *arenapb.StartBattleRequest) error {
	if !validBattleID(b.GetBattleId()) {
		return badBattle("battle_id must be 1..%d characters of [A-Za-z0-9_-]", MaxBattleIDLen)
	}
	if u := b.GetUnits(); u < 1 || u > MaxUnits {
		return badBattle("units must be 1..%d, got %d", MaxUnits, u)
	}
	if t := b.GetTicks(); t < 1 || t > MaxTicks {
		return badBattle("ticks must be 1..%d, got %d", MaxTicks, t)
	}
	return nil
}

func validBattleID(id string) bool {
	if len(id) == 0 || len(id) > MaxBattleIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// battleSeed is FNV-1a 64 of "<player id>/<battle id>": the same battle id of
// the same player always fights the same enemies.
func battleSeed(playerID, battleID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(playerID))
	h.Write([]byte{'/'})
	h.Write([]byte(battleID))
	return h.Sum64()
}

// SimulateRequest builds the deterministic battle for p: team A from the
// player's level and rating, team B from the seed.
func SimulateRequest(p *arenapb.Player, b *arenapb.StartBattleRequest) *arenapb.SimulateRequest {
	seed := battleSeed(p.GetId(), b.GetBattleId())
	// Hit points grow with the requested ticks so that a fight lasts about
	// that long: a unit deals roughly 10-15 damage a tick, so without the
	// scale every fight would end within a dozen ticks and "ticks" would
	// not make a battle more expensive.
	scale := max(uint32(1), b.GetTicks()/10)
	lvl := min(p.GetLevel(), 1000)
	rating := uint32(max(p.GetRating(), 0))
	a := make([]*arenapb.Unit, b.GetUnits())
	for i := range a {
		a[i] = &arenapb.Unit{
			Hp:      min((100+10*lvl)*scale, maxUnitHP),
			Attack:  12 + 2*lvl + min(rating/200, 100),
			Defense: 4 + lvl,
			Speed:   10 + min(rating/250, 100),
		}
	}
	rng := splitmix64(seed)
	bt := make([]*arenapb.Unit, b.GetUnits())
	for i := range bt {
		bt[i] = &arenapb.Unit{
			Hp:      min(uint32(100+rng.next()%60)*scale, maxUnitHP),
			Attack:  uint32(12 + rng.next()%8),
			Defense: uint32(3 + rng.next()%5),
			Speed:   uint32(8 + rng.next()%6),
		}
	}
	return &arenapb.SimulateRequest{
		BattleId: b.GetBattleId(),
		Seed:     seed,
		TeamA:    a,
		TeamB:    bt,
		MaxTicks: b.GetTicks(),
	}
}

// maxUnitHP is the most hit points battle accepts for a unit.
const maxUnitHP = 1_000_000

// splitmix64 is a tiny deterministic generator for team B.
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// ApplyReward applies a battle's outcome to p (a working copy) and returns
// the reply. Team A is the player's.
func ApplyReward(p *arenapb.Player, battleID string, res *arenapb.SimulateReply) *arenapb.BattleReply {
	won := res.GetWinner() == 1
	var xp uint64
	var gold int64
	var dr int32
	if won {
		xp, gold, dr = winXP, winGold, winRating
		p.Wins++
	} else {
		xp, dr = lossXP, lossRating
		p.Losses++
	}
	before := p.Rating
	p.Xp += xp
	p.Gold += gold
	p.Rating = max(p.Rating+dr, 0)
	p.Level = uint32(min(1+p.Xp/xpPerLevel, 1<<31))
	return &arenapb.BattleReply{
		BattleId:    battleID,
		Won:         won,
		XpGained:    xp,
		GoldGained:  gold,
		RatingDelta: p.Rating - before,
		Result:      res,
	}
}

func badBattle(format string, args ...any) error {
	return game.Invalid(ReasonBadBattle, fmt.Sprintf(format, args...))
}
