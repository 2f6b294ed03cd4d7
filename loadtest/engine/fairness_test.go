package engine

import (
	"math/rand/v2"
	"testing"
)

// bruteInversions is the definition, pair by pair.
func bruteInversions(es []entry) int64 {
	var n int64
	for i := range es {
		for j := range es {
			if es[i].Arrived+inversionSlack.Milliseconds() < es[j].Arrived && es[i].Admitted > es[j].Admitted {
				n++
			}
		}
	}
	return n
}

func TestInversionsMatchDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		n := 2 + r.IntN(200)
		es := make([]entry, n)
		for i := range es {
			a := r.Int64N(20_000)
			es[i] = entry{Gate: r.IntN(3), Arrived: a, Admitted: a + r.Int64N(5_000)}
		}
		if got, want := inversions(es), bruteInversions(es); got != want {
			t.Fatalf("trial %d: %d inversions, want %d", trial, got, want)
		}
	}
}

func TestFairnessInOrder(t *testing.T) {
	// Two gates, each admitting in arrival order, one slower: no
	// inversion within a gate, some across them.
	var es []entry
	for i := range 100 {
		a := int64(i) * 100
		es = append(es, entry{Gate: 0, Arrived: a, Admitted: a + 1000}, entry{Gate: 1, Arrived: a, Admitted: a + 9000})
	}
	f := fairness(es, 2)
	if f.InversionsWithinGates != 0 {
		t.Errorf("within gates: %d inversions, want 0", f.InversionsWithinGates)
	}
	if f.Inversions == 0 {
		t.Error("across gates: no inversion, though gate 1 admits 8 s later")
	}
	if f.SpreadP50Ms != 8000 || f.SpreadWithinGateP50Ms != 0 {
		t.Errorf("spread across %d ms within %d ms, want 8000 and 0", f.SpreadP50Ms, f.SpreadWithinGateP50Ms)
	}
}
