package report

import (
	"math"
	"testing"
	"time"

	"github.com/leveehq/levee/loadtest/record"
)

// The line's scalars: the longest status gap over every point's
// histogram; the order figures from the fairness; each missing when its
// source is (nobody waited, no fairness), also inside a window.
func TestLineFacts(t *testing.T) {
	gaps := func(ds ...time.Duration) *record.Hist {
		h := record.NewHist()
		for _, d := range ds {
			h.Record(d)
		}
		return h
	}
	r := &Run{Points: []record.Point{
		{T: 0, Hists: map[string]*record.Hist{HistStatusGap: gaps(500*time.Millisecond, 2*time.Second)}},
		{T: 1},
		{T: 2, Hists: map[string]*record.Hist{HistStatusGap: gaps(7 * time.Second)}},
	}, Fairness: &Fairness{SurePairs: 1200, SureInversions: 3, Inversions: 40}}
	f := r.Facts()
	for name, want := range map[string]float64{"max_status_gap": 7, "order_pairs": 1200, "order_inversions": 3} {
		got, ok := f.Value(name)
		if !ok || math.Abs(got-want) > want*0.002 {
			t.Errorf("%s = %v, %v; want %v", name, got, ok, want)
		}
	}
	empty := (&Run{Points: []record.Point{{T: 0}}}).Facts()
	for _, name := range lineScalars {
		if v, ok := empty.Value(name); ok {
			t.Errorf("%s = %v without a line; want missing", name, v)
		}
	}
}

// line_rate is the level the engine sets, NaN in the seconds without it.
func TestLineRateSeries(t *testing.T) {
	r := &Run{Points: []record.Point{
		{T: 0},
		{T: 1, Levels: map[string]float64{LevelLineRate: 100}},
		{T: 2, Levels: map[string]float64{LevelLineRate: 150}},
	}}
	s, ok := r.Facts().Series("line_rate")
	if !ok || len(s) != 3 || !math.IsNaN(s[0]) || s[1] != 100 || s[2] != 150 {
		t.Fatalf("line_rate = %v, %v", s, ok)
	}
}
