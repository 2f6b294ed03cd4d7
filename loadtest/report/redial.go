package report

import (
	"strconv"
	"strings"
	"time"

	"github.com/leveehq/levee/loadtest/record"
)

// The gate-restart figures (scalars; see RedialFigures) come from what
// the load tool's players note when the server ends their connection (a
// close such as 1012 on a gate's SIGTERM, or any other end they did not
// ask for, waiting in line or playing):
//
//	reconnect_peak_ratio  over the offset seconds 0..L after the close (L the
//	                      last second with a first redial): the busiest
//	                      second's first redials / the mean per second (1 when
//	                      they are spread evenly; missing with no first redial)
//	reconnect_spread      seconds from a close to the player's first redial
//	                      after it, the longest over the players (missing with
//	                      no first redial)
//	line_place_kept       of the players who were waiting in line when closed,
//	                      the share who came back to a position no later than
//	                      their old one (their first QueueStatus after the close)
//	                      or were admitted at once; a player whose life ended
//	                      before it was told a place counts against it (missing
//	                      when no waiting player was closed)
//	line_place_lost       how many came back behind their old position (missing
//	                      when no waiting player was closed)
var RedialFigures = []string{"reconnect_peak_ratio", "reconnect_spread", "line_place_kept", "line_place_lost"}

// The counters and the histogram the players record them with (summed
// over the points and the load processes).
const (
	CounterServerCloses = "server_closes"         // connections the server ended
	CounterClosesInLine = "server_closes_in_line" // of them, of players waiting in line
	// CounterRedialAfter + N counts first redials N to N+1 whole seconds
	// after their close.
	CounterRedialAfter  = "redial_after/"
	CounterNoRedial     = "redial_none"   // closes the player did not redial after (its life ended)
	CounterPlaceKept    = "place_kept"    // back in line no later than before, or admitted at once
	CounterPlaceLost    = "place_lost"    // back in line behind its old position
	CounterPlaceUnknown = "place_unknown" // its life ended before it was told a place
	// HistRedialAfter is the time from a close to the first redial.
	HistRedialAfter = "redial_after"
)

// maxRedialSecond bounds the offset seconds read from a run file.
const maxRedialSecond = 24 * 60 * 60

// Redials are a run's first redials after server closes.
type Redials struct {
	Closes, InLine      int64
	After               []int64       // After[s]: first redials s to s+1 seconds after their close; up to the last non-zero
	Spread              time.Duration // the longest time from a close to its first redial
	NoRedial            int64
	Kept, Lost, Unknown int64
}

// RedialsOf reads the redials from a run's counter totals and the merged
// HistRedialAfter (nil: none recorded; Spread is then the end of the last
// offset second with a first redial, an upper bound).
func RedialsOf(counters map[string]int64, after *record.Hist) Redials {
	r := Redials{
		Closes: counters[CounterServerCloses], InLine: counters[CounterClosesInLine], NoRedial: counters[CounterNoRedial],
		Kept: counters[CounterPlaceKept], Lost: counters[CounterPlaceLost], Unknown: counters[CounterPlaceUnknown],
	}
	for k, n := range counters {
		rest, ok := strings.CutPrefix(k, CounterRedialAfter)
		if !ok || n <= 0 {
			continue
		}
		s, err := strconv.Atoi(rest)
		if err != nil || s < 0 || s > maxRedialSecond {
			continue
		}
		for len(r.After) <= s {
			r.After = append(r.After, 0)
		}
		r.After[s] += n
	}
	switch {
	case after.Count() > 0:
		r.Spread = after.Max()
	case len(r.After) > 0:
		r.Spread = time.Duration(len(r.After)) * time.Second
	}
	return r
}

// First is how many closes had a first redial.
func (r Redials) First() int64 {
	var n int64
	for _, c := range r.After {
		n += c
	}
	return n
}

// Figure is one of RedialFigures; ok false when it is missing (see there).
func (r Redials) Figure(name string) (float64, bool) {
	switch name {
	case "reconnect_peak_ratio":
		n := r.First()
		if n == 0 {
			return 0, false
		}
		peak := int64(0)
		for _, c := range r.After {
			peak = max(peak, c)
		}
		return float64(peak) / (float64(n) / float64(len(r.After))), true
	case "reconnect_spread":
		return r.Spread.Seconds(), r.First() > 0
	case "line_place_kept":
		judged := r.Kept + r.Lost + r.Unknown
		if judged == 0 {
			return 0, false
		}
		return float64(r.Kept) / float64(judged), true
	case "line_place_lost":
		return float64(r.Lost), r.Kept+r.Lost+r.Unknown > 0
	}
	return 0, false
}

// redials is the run's Redials, the histogram merged over its points.
func (r *Run) redials(sum Summary) Redials {
	h := record.NewHist()
	for _, p := range r.Points {
		h.Merge(p.Hists[HistRedialAfter])
	}
	return RedialsOf(sum.Counters, h)
}
