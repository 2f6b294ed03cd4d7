package battle

import (
	"fmt"

	"github.com/leveehq/levee/internal/apperr"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
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
// wraps apperr.ErrBadRequest and names the offending field.
func Validate(req *leveev2.SimulateRequest) error {
	if req == nil {
		return fmt.Errorf("%w: empty request", apperr.ErrBadRequest)
	}
	if n := len(req.GetBattleId()); n < 1 || n > MaxBattleIDLen {
		return fmt.Errorf("%w: battle_id must be 1..%d bytes, got %d", apperr.ErrBadRequest, MaxBattleIDLen, n)
	}
	if t := req.GetMaxTicks(); t < 1 || t > MaxTicks {
		return fmt.Errorf("%w: max_ticks must be 1..%d, got %d", apperr.ErrBadRequest, MaxTicks, t)
	}
	if err := validateTeam("team_a", req.GetTeamA()); err != nil {
		return err
	}
	return validateTeam("team_b", req.GetTeamB())
}

func validateTeam(name string, team []*leveev2.Unit) error {
	if n := len(team); n < 1 || n > MaxTeamSize {
		return fmt.Errorf("%w: %s must have 1..%d units, got %d", apperr.ErrBadRequest, name, MaxTeamSize, n)
	}
	for i, u := range team {
		switch {
		case u == nil:
			return fmt.Errorf("%w: %s[%d] is empty", apperr.ErrBadRequest, name, i)
		case u.GetHp() < 1 || u.GetHp() > MaxHP:
			return fmt.Errorf("%w: %s[%d].hp must be 1..%d, got %d", apperr.ErrBadRequest, name, i, MaxHP, u.GetHp())
		case u.GetAttack() > MaxStat:
			return fmt.Errorf("%w: %s[%d].attack must be <= %d, got %d", apperr.ErrBadRequest, name, i, MaxStat, u.GetAttack())
		case u.GetDefense() > MaxStat:
			return fmt.Errorf("%w: %s[%d].defense must be <= %d, got %d", apperr.ErrBadRequest, name, i, MaxStat, u.GetDefense())
		case u.GetSpeed() > MaxStat:
			return fmt.Errorf("%w: %s[%d].speed must be <= %d, got %d", apperr.ErrBadRequest, name, i, MaxStat, u.GetSpeed())
		}
	}
	return nil
}
