package report

import (
	"math"
	"slices"

	"github.com/leveehq/levee/loadtest/probe"
	"github.com/leveehq/levee/loadtest/record"
)

// The memory benchmark's figures (scalars), from a run whose server was
// probed by its pid (loadtest run -pid: the levels probe.ServerRSS each
// second and probe.ServerRSSBefore in the first point):
//
//	held           the most players connected or waiting in line at once
//	               (the levels connected + waiting, summed over the load
//	               processes); missing with no point
//	rss_before_mb  the server's resident memory before the first player
//	               arrived, MiB
//	rss_held_mb    the median of its resident memory over the second half
//	               of the hold: the seconds at which at least 99 % of held
//	               were up (the first half lets the memory settle), MiB
//	rss_per_conn   (rss_held_mb - rss_before_mb) / held, in bytes per
//	               connection
//
// The rss_* figures are missing without the pid's levels or when no
// second of the hold has a memory sample.
var MemoryFigures = []string{"held", "rss_before_mb", "rss_held_mb", "rss_per_conn"}

// heldShare is the share of the peak that counts as "all held".
const heldShare = 0.99

// heldAt is the players connected or waiting at the end of point p.
func heldAt(p record.Point) float64 { return p.Levels["connected"] + p.Levels["waiting"] }

// memoryFigure is one of MemoryFigures.
func (r *Run) memoryFigure(name string) (float64, bool) {
	if len(r.Points) == 0 {
		return 0, false
	}
	peak := 0.0
	for _, p := range r.Points {
		peak = max(peak, heldAt(p))
	}
	if name == "held" {
		return peak, true
	}
	before := math.NaN()
	for _, p := range r.Points {
		if v, ok := p.Levels[probe.ServerRSSBefore]; ok {
			before = v
			break
		}
	}
	if name == "rss_before_mb" {
		return before, !math.IsNaN(before)
	}
	// The hold: the seconds with (nearly) all up; its second half.
	var hold []float64
	for _, p := range r.Points {
		if v, ok := p.Levels[probe.ServerRSS]; ok && peak > 0 && heldAt(p) >= heldShare*peak {
			hold = append(hold, v)
		}
	}
	hold = hold[len(hold)/2:]
	if len(hold) == 0 {
		return 0, false
	}
	slices.Sort(hold)
	held := hold[len(hold)/2]
	if len(hold)%2 == 0 {
		held = (hold[len(hold)/2-1] + held) / 2
	}
	switch name {
	case "rss_held_mb":
		return held, true
	case "rss_per_conn":
		if math.IsNaN(before) {
			return 0, false
		}
		return (held - before) * (1 << 20) / peak, true
	}
	return 0, false
}

// writeMemory writes the memory benchmark's figures, when the run has
// them (a server probed by its pid).
func writeMemory(w *errWriter, r *Run) {
	before, ok := r.memoryFigure("rss_before_mb")
	if !ok {
		return
	}
	held, _ := r.memoryFigure("held")
	w.printf("\nserver memory (by pid): %.1f MiB before the first player", before)
	if v, ok := r.memoryFigure("rss_held_mb"); ok {
		per, _ := r.memoryFigure("rss_per_conn")
		w.printf(", %.1f MiB with %.0f held (median of the hold's second half): %.2f KiB per connection", v, held, per/1024)
	} else {
		w.printf("; no sample while the %.0f were held", held)
	}
	w.printf("\n")
}
