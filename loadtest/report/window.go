package report

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/threshold"
)

// ErrNoPhase is returned by a window naming a phase the run does not have.
var ErrNoPhase = errors.New("report: no such phase")

var _ threshold.Windowed = (*facts)(nil)

// In is the facts of window w only: the points of the wall seconds it
// covers, totalled as for a whole run, with goodput per second of the
// window (the part of it the run covered). Windows are rounded to whole
// seconds: the point of second T (covering [T, T+1)) is in [FROM:TO) when
// FROM <= T and T+1 <= TO, rounded up; a phase [From, To) of the meta
// likewise.
func (f *facts) In(w threshold.Window) (threshold.Facts, error) {
	from, to, err := f.r.window(w)
	if err != nil {
		return nil, err
	}
	var pts []record.Point
	for _, p := range f.r.Points {
		if p.T >= from && p.T < to {
			pts = append(pts, p)
		}
	}
	sub := &Run{Meta: f.r.Meta, Events: f.r.Events, Points: pts, Workers: f.r.Workers}
	sum := Summarize(pts)
	end := min(float64(to), f.sum.Elapsed)
	sum.Elapsed = max(0, end-float64(from))
	sub.Summary = sum
	return &facts{r: sub, sum: sum}, nil
}

// window is w in whole wall seconds from the start: [from, to).
func (r *Run) window(w threshold.Window) (from, to int, err error) {
	secs := func(v float64) int { return int(math.Ceil(v - 1e-9)) }
	if w.Phase != "" {
		var names []string
		for _, ph := range r.Meta.Phases {
			if ph.Name == w.Phase {
				return secs(ph.From), secs(ph.To), nil
			}
			names = append(names, ph.Name)
		}
		if len(names) == 0 {
			return 0, 0, fmt.Errorf("%w %q: the run names no phases", ErrNoPhase, w.Phase)
		}
		return 0, 0, fmt.Errorf("%w %q; its phases are %s", ErrNoPhase, w.Phase, strings.Join(names, ", "))
	}
	from, to = secs(w.From.Seconds()), math.MaxInt
	if w.HasTo {
		to = secs(w.To.Seconds())
	}
	return from, to, nil
}
