package queue

import (
	"math"
	"math/bits"
	"time"
)

// pacer is the token accounting of the paced release, in exact integers:
// one nanosecond earns n units and one ticket costs unit units (the interval
// in nanoseconds), so no rounding ever accumulates.
type pacer struct {
	n      uint64 // tickets per interval
	unit   uint64 // interval in ns = units per ticket
	credit uint64 // units
	last   time.Time
}

func newPacer(r Rate, now time.Time) pacer {
	return pacer{n: uint64(r.N), unit: uint64(r.Interval), last: now}
}

// accrue adds the credit earned since the last accrual. A time before it is
// ignored (callers on several goroutines read the clock before the lock).
func (p *pacer) accrue(now time.Time) {
	if !now.After(p.last) {
		return
	}
	d := uint64(now.Sub(p.last))
	p.last = now
	hi, lo := bits.Mul64(d, p.n)
	sum, carry := bits.Add64(p.credit, lo, 0)
	if hi != 0 || carry != 0 {
		sum = math.MaxUint64
	}
	p.credit = sum
}

// skip moves the accounting to now without earning credit (frozen modes).
func (p *pacer) skip(now time.Time) {
	if now.After(p.last) {
		p.last = now
	}
}

// take spends the credit for up to max whole tickets and returns how many.
func (p *pacer) take(max int) int {
	k := p.credit / p.unit
	if k > uint64(max) {
		k = uint64(max)
	}
	p.credit -= k * p.unit
	return int(k)
}

// capOne keeps at most one ticket of credit.
func (p *pacer) capOne() {
	p.credit = min(p.credit, p.unit)
}

// setRate switches to r, converting the credit to the new units exactly
// (rounding down) so that credit earned at the old rate is not lost.
func (p *pacer) setRate(r Rate) {
	n, unit := uint64(r.N), uint64(r.Interval)
	// tickets = credit/p.unit, new credit = tickets*unit.
	hi, lo := bits.Mul64(p.credit, unit)
	if hi >= p.unit {
		p.credit = math.MaxUint64
	} else {
		p.credit, _ = bits.Div64(hi, lo, p.unit)
	}
	p.n, p.unit = n, unit
}
