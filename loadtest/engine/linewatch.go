package engine

import (
	"time"

	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
)

// statusGaps follows the QueueStatus pushes of one wait in line (one dial
// attempt); only the player's goroutine uses it (OnQueue runs on the
// dialing goroutine).
type statusGaps struct {
	first, last time.Time // zero: no status yet
	longest     time.Duration
}

// status notes a push at now.
func (g *statusGaps) status(now time.Time) {
	if g.first.IsZero() {
		g.first = now
	} else {
		g.longest = max(g.longest, now.Sub(g.last))
	}
	g.last = now
}

// end closes the wait at now (the connect returned: admitted and
// welcomed, or given up) and records its longest gap in rec
// (report.HistStatusGap; nothing when no status came: the player never
// waited).
func (g *statusGaps) end(now time.Time, rec *record.Recorder) {
	if g.first.IsZero() {
		return
	}
	rec.Observe(report.HistStatusGap, max(g.longest, now.Sub(g.last)))
}

// lineRate follows the release rate the timeline's line steps configure
// on the gates (report.LevelLineRate): the fields of the steps applied so
// far (a step keeps the ones it leaves out, as the gate does), and from
// when each value held.
type lineRate struct {
	mode     string        // "" unknown
	rate     int           // per gate per interval; 0 unknown
	interval time.Duration // 0 unknown
	changes  []rateChange  // in time order
}

// rateChange: from at (wall time since the start) the rate was v
// admissions per second over all gates, or unknown (ok false).
type rateChange struct {
	at time.Duration
	v  float64
	ok bool
}

// applied notes step s, finished at wall offset at on gates gates; ok
// false when it failed on some gate (the lines' rate is unknown until a
// later step sets mode, rate and interval again).
func (l *lineRate) applied(at time.Duration, s step, gates int, ok bool) {
	if !ok {
		*l = lineRate{changes: l.changes}
	} else {
		if s.mode != "" {
			l.mode = s.mode
		}
		if s.rate > 0 {
			l.rate = perGate(s.rate, gates)
		}
		if s.interval > 0 {
			l.interval = s.interval
		}
	}
	c := rateChange{at: at}
	switch l.mode {
	case "queueing", "closed":
		c.ok = true // nobody is released
	case "paced":
		if l.rate > 0 && l.interval > 0 {
			c.v, c.ok = float64(l.rate*max(gates, 1))/l.interval.Seconds(), true
		}
	}
	l.changes = append(l.changes, c)
}

// during is the rate's time-weighted mean over [from, to); ok false when
// it was unknown for some of it.
func (l *lineRate) during(from, to time.Duration) (float64, bool) {
	cur := rateChange{} // before the first step: unknown
	sum := 0.0
	at := from
	for _, c := range l.changes {
		if c.at > at {
			end := min(c.at, to)
			if end > at {
				if !cur.ok {
					return 0, false
				}
				sum += cur.v * (end - at).Seconds()
				at = end
			}
		}
		if c.at >= to {
			break
		}
		cur = c
	}
	if at < to {
		if !cur.ok {
			return 0, false
		}
		sum += cur.v * (to - at).Seconds()
	}
	return sum / (to - from).Seconds(), true
}
