package probe

import (
	"time"

	"github.com/leveehq/levee/internal/promtext"
)

// Gate counters read as per-second rates (summed over the gates), for the
// line's cost: the status pushes and keepalive pings the gates sent.
const (
	GatePushes = "gate_pushes_per_s" // gate_line_pushes_total{result="sent"}
	GatePings  = "gate_pings_per_s"  // gate_keepalive_pings_total{result="sent"}
)

// gateRates are the counters behind GatePushes and GatePings.
var gateRates = []struct{ level, family string }{
	{GatePushes, "gate_line_pushes_total"},
	{GatePings, "gate_keepalive_pings_total"},
}

// counterReading is a counter's last value on one target.
type counterReading struct {
	at time.Time
	v  float64
}

// addGateRates adds to out the per-second increase, since this target's
// last reading, of each of gateRates' counters with result="sent" (none
// the first time, or when the counter went down: a restarted gate).
func (p *Probe) addGateRates(out map[string]float64, target int, pg promtext.Families, now time.Time) {
	if p.counters == nil {
		p.counters = map[[2]int]counterReading{}
	}
	for k, r := range gateRates {
		v, ok := sumSent(pg, r.family)
		if !ok {
			continue
		}
		key := [2]int{target, k}
		if prev, ok := p.counters[key]; ok && now.After(prev.at) && v >= prev.v {
			out[r.level] += (v - prev.v) / now.Sub(prev.at).Seconds()
		}
		p.counters[key] = counterReading{at: now, v: v}
	}
}

// sumSent is the counter family's series with the label result="sent"
// summed; false when the page has none.
func sumSent(pg promtext.Families, name string) (float64, bool) {
	mf := pg[name]
	if mf == nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, m := range mf.GetMetric() {
		if m.GetCounter() == nil {
			continue
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == "result" && l.GetValue() == "sent" {
				sum += m.GetCounter().GetValue()
				found = true
			}
		}
	}
	return sum, found
}
