package engine

import (
	mrand "math/rand/v2"

	"github.com/leveehq/levee/loadtest/scenario"
)

// size is one request's size: a purchase's quantity, a battle's units and
// ticks.
type size struct {
	qty          int32
	units, ticks uint32
}

// draw picks the size of one request of a: uniform in each of its ranges
// (scenario.Act's quantity..quantity_max, units..units_max,
// ticks..ticks_max), and for a purchase the overspend share asks for
// scenario.OverspendQuantity. An action without ranges or overspend draws
// nothing from rnd, so that a scenario without them plays the same
// players' choices as before they existed.
func (a *act) draw(rnd *mrand.Rand) size {
	s := size{qty: max(a.qty, 1), units: a.units, ticks: a.ticks}
	switch a.do {
	case doPurchase:
		if a.qtyMax > s.qty {
			s.qty += rnd.Int32N(a.qtyMax - s.qty + 1)
		}
		if a.overspend > 0 && rnd.Float64() < a.overspend {
			s.qty = scenario.OverspendQuantity
		}
	case doBattle:
		if a.unitsMax > s.units {
			s.units += rnd.Uint32N(a.unitsMax - s.units + 1)
		}
		if a.ticksMax > s.ticks {
			s.ticks += rnd.Uint32N(a.ticksMax - s.ticks + 1)
		}
	}
	return s
}
