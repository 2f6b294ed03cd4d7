package sim

import (
	"context"
	"testing"
)

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
