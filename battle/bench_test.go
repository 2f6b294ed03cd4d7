package battle

import (
	"context"
	"fmt"
	"testing"

	leveev1 "levee/proto/leveev1"
)

// sturdyRequest is a battle whose units survive all maxTicks ticks, so its
// cost is exactly units × 2 × maxTicks actions.
func sturdyRequest(units, maxTicks int, seed uint64) *leveev1.SimulateRequest {
	team := func(speed uint32) []*leveev1.Unit {
		us := make([]*leveev1.Unit, units)
		for i := range us {
			us[i] = &leveev1.Unit{Hp: MaxHP, Attack: 10, Defense: 2, Speed: speed + uint32(i%3)}
		}
		return us
	}
	return &leveev1.SimulateRequest{
		BattleId: fmt.Sprintf("bench-%dx%d", units, maxTicks),
		Seed:     seed,
		TeamA:    team(10),
		TeamB:    team(11),
		MaxTicks: uint32(maxTicks),
	}
}

// BenchmarkSimulate reports the cost of one battle (ns/op) and of one action
// (ns/action) for battles of units per team × ticks.
func BenchmarkSimulate(b *testing.B) {
	for _, c := range []struct {
		name         string
		units, ticks int
	}{
		{"small_4x50", 4, 50},
		{"medium_8x200", 8, 200},
		{"large_32x2000", 32, 2000},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := sturdyRequest(c.units, c.ticks, 42)
			var actions uint64
			for b.Loop() {
				_, st, err := simulate(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				actions = st.actions
			}
			b.ReportMetric(float64(actions), "actions/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(actions), "ns/action")
		})
	}
}
