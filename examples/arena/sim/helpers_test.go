package sim

import (
	"fmt"

	arenapb "github.com/leveehq/levee/examples/arena/arenapb"
)

// sturdyRequest is a battle whose units survive all maxTicks ticks, so its
// cost is exactly units × 2 × maxTicks actions.
func sturdyRequest(units, maxTicks int, seed uint64) *arenapb.SimulateRequest {
	team := func(speed uint32) []*arenapb.Unit {
		us := make([]*arenapb.Unit, units)
		for i := range us {
			us[i] = &arenapb.Unit{Hp: MaxHP, Attack: 10, Defense: 2, Speed: speed + uint32(i%3)}
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
