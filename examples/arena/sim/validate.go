package sim

import (
	"fmt"

	"github.com/leveehq/levee/game"

	arenapb "github.com/leveehq/levee/examples/arena/arenapb"
)

// Request limits. Anything outside them is a bad request.
const (
	MaxBattleIDLen = 64
	MaxTeamSize    = 64
	MaxTicks       = 10000
	MaxHP          = 1_000_000
	MaxStat        = 100_000 // attack, defense and speed
)

// Validate reports whether req is a battle this tier will fight. Every error
// is a game.Invalid (BAD_REQUEST, reason "bad_battle") that names the offending field.
func Validate(req *arenapb.SimulateRequest) error {
	if req == nil {
		return bad("empty request")
	}
	if n := len(req.GetBattleId()); n < 1 || n > MaxBattleIDLen {
		return bad("battle_id must be 1..%d bytes, got %d", MaxBattleIDLen, n)
	}
	if t := req.GetMaxTicks(); t < 1 || t > MaxTicks {
		return bad("max_ticks must be 1..%d, got %d", MaxTicks, t)
	}
	if err := validateTeam("team_a", req.GetTeamA()); err != nil {
		return err
	}
	return validateTeam("team_b", req.GetTeamB())
}

func validateTeam(name string, team []*arenapb.Unit) error {
	if n := len(team); n < 1 || n > MaxTeamSize {
		return bad("%s must have 1..%d units, got %d", name, MaxTeamSize, n)
	}
	for i, u := range team {
		switch {
		case u == nil:
			return bad("%s[%d] is empty", name, i)
		case u.GetHp() < 1 || u.GetHp() > MaxHP:
			return bad("%s[%d].hp must be 1..%d, got %d", name, i, MaxHP, u.GetHp())
		case u.GetAttack() > MaxStat:
			return bad("%s[%d].attack must be <= %d, got %d", name, i, MaxStat, u.GetAttack())
		case u.GetDefense() > MaxStat:
			return bad("%s[%d].defense must be <= %d, got %d", name, i, MaxStat, u.GetDefense())
		case u.GetSpeed() > MaxStat:
			return bad("%s[%d].speed must be <= %d, got %d", name, i, MaxStat, u.GetSpeed())
		}
	}
	return nil
}

func bad(format string, args ...any) error {
	return game.Invalid("bad_battle", fmt.Sprintf(format, args...))
}
