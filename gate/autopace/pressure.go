package autopace

import (
	"math"
	"sync/atomic"
)

// Pressure collects the backpressure ratio logic puts on its replies (and
// on its refusals). The gate's request path calls Observe, from any
// goroutine; once per interval the Loop folds the interval's mean into an
// EWMA. The zero value is ready to use.
type Pressure struct {
	sum atomic.Uint64 // ratios × pressureScale
	n   atomic.Uint64

	ewma  float64 // Fold only (the Loop's goroutine)
	known bool
}

const (
	pressureScale = 1e6
	pressureAlpha = 0.5 // weight of the newest interval
)

// Observe adds one reply's ratio (clamped to 0..1; NaN counts as 0).
func (p *Pressure) Observe(ratio float64) {
	if !(ratio >= 0) { // NaN too
		ratio = 0
	}
	p.sum.Add(uint64(math.Min(ratio, 1) * pressureScale))
	p.n.Add(1)
}

// Fold folds the mean since the previous Fold into the EWMA and returns
// it; false when no reply carried a ratio in the interval (the signal is
// then left out, rather than judged on stale data). One goroutine folds.
func (p *Pressure) Fold() (float64, bool) {
	n := p.n.Swap(0)
	sum := p.sum.Swap(0)
	if n == 0 {
		return p.ewma, false
	}
	mean := float64(sum) / pressureScale / float64(n)
	if !p.known {
		p.ewma, p.known = mean, true
	} else {
		p.ewma = pressureAlpha*mean + (1-pressureAlpha)*p.ewma
	}
	return p.ewma, true
}
