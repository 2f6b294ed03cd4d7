package report

import "github.com/leveehq/levee/loadtest/record"

// The line's figures (threshold names max_status_gap, order_inversions,
// order_pairs and the series line_rate), from what the players saw.

// HistStatusGap is the histogram the players engine observes once per
// wait in line that got at least one QueueStatus: the longest time
// between two of them, or from the last one to the end of the wait (the
// player admitted and welcomed, or its dial given up).
const HistStatusGap = "status_gap"

// LevelLineRate is the level the players engine sets each second: the
// release rate the timeline's line steps configured (admissions per wall
// second over all gates, time-weighted over the second; 0 in queueing
// or closed mode), absent while it is not known (before the first line
// step, in open or auto mode, after a step failed on a gate).
const LevelLineRate = "line_rate"

// lineScalars are the line's scalar figures.
var lineScalars = []string{"max_status_gap", "order_inversions", "order_pairs"}

// lineFigure is the line's scalar name (known false when the run lacks
// it); ok false when name is not one of lineScalars.
func (f *facts) lineFigure(name string) (v float64, known, ok bool) {
	switch name {
	case "max_status_gap":
		h := record.NewHist()
		for _, p := range f.r.Points {
			h.Merge(p.Hists[HistStatusGap])
		}
		if h.Count() == 0 {
			return 0, false, true
		}
		return h.Max().Seconds(), true, true
	case "order_inversions", "order_pairs":
		fa := f.r.Fairness
		if fa == nil {
			return 0, false, true
		}
		if name == "order_pairs" {
			return float64(fa.SurePairs), true, true
		}
		return float64(fa.SureInversions), true, true
	}
	return 0, false, false
}
