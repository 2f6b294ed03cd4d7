package engine

import (
	mrand "math/rand/v2"
	"testing"

	"github.com/leveehq/levee/loadtest/scenario"
)

func TestDrawRanges(t *testing.T) {
	rnd := mrand.New(mrand.NewPCG(1, 2))
	buy := &act{do: doPurchase, qty: 1, qtyMax: 3, overspend: 0.1}
	fight := &act{do: doBattle, units: 4, unitsMax: 8, ticks: 50, ticksMax: 200}
	seenQty := map[int32]int{}
	seenUnits := map[uint32]bool{}
	minTicks, maxTicks := uint32(1<<31), uint32(0)
	const n = 20_000
	for range n {
		s := buy.draw(rnd)
		seenQty[s.qty]++
		b := fight.draw(rnd)
		if b.units < 4 || b.units > 8 || b.ticks < 50 || b.ticks > 200 {
			t.Fatalf("battle size %+v out of its ranges", b)
		}
		seenUnits[b.units] = true
		minTicks, maxTicks = min(minTicks, b.ticks), max(maxTicks, b.ticks)
	}
	for q := range seenQty {
		if q != scenario.OverspendQuantity && (q < 1 || q > 3) {
			t.Fatalf("quantity %d out of 1..3 and not the overspend", q)
		}
	}
	for _, q := range []int32{1, 2, 3} {
		if seenQty[q] == 0 {
			t.Errorf("quantity %d never drawn", q)
		}
	}
	// About 10 % overspend: 2,000 of 20,000, well within 1,600..2,400.
	if o := seenQty[scenario.OverspendQuantity]; o < 1600 || o > 2400 {
		t.Errorf("overspend drawn %d times of %d, want about 10 %%", o, n)
	}
	if len(seenUnits) != 5 || minTicks != 50 || maxTicks != 200 {
		t.Errorf("units drawn %v, ticks %d..%d; want all of 4..8 and 50..200", seenUnits, minTicks, maxTicks)
	}
}

// An action without ranges draws nothing: the players' other choices stay
// what they were before ranges existed.
func TestDrawFixedUsesNoRandom(t *testing.T) {
	a, b := mrand.New(mrand.NewPCG(7, 7)), mrand.New(mrand.NewPCG(7, 7))
	s := (&act{do: doBattle, units: 8, unitsMax: 8, ticks: 200, ticksMax: 200}).draw(a)
	p := (&act{do: doPurchase, qty: 2, qtyMax: 2}).draw(a)
	if s != (size{qty: 1, units: 8, ticks: 200}) || p.qty != 2 {
		t.Fatalf("fixed sizes drawn as %+v, %+v", s, p)
	}
	if a.Uint64() != b.Uint64() {
		t.Fatal("a fixed-size action drew from the player's random source")
	}
}
