package engine

import (
	"context"
	"math"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

// dueTime is when request i (0-based) of an open-loop phase that starts at
// start and offers rate requests per second falls due: start + i/rate. It is
// computed from start every time, so rounding never accumulates (no drift).
func dueTime(start time.Time, i int, rate float64) time.Time {
	return start.Add(time.Duration(math.Round(float64(i) / rate * float64(time.Second))))
}

// plannedCount is how many requests an open-loop phase of length d at rate
// schedules: those due strictly before the phase ends, ceil(rate*d).
func plannedCount(rate float64, d time.Duration) int {
	if rate <= 0 || d <= 0 {
		return 0
	}
	n := int(math.Ceil(rate*d.Seconds() - 1e-9))
	// Guard the float math: every planned request is due before the end.
	for n > 0 && !dueTime(time.Time{}, n-1, rate).Before(time.Time{}.Add(d)) {
		n--
	}
	return n
}

// dispatchStats is how well the dispatcher kept to its schedule.
type dispatchStats struct {
	Planned int           `json:"planned"` // requests the schedule holds
	Issued  int           `json:"issued"`  // handed over to be sent
	Unsent  int           `json:"unsent"`  // still not issued when the phase ended (the dispatcher fell behind) or was interrupted
	Late    int           `json:"late"`    // issued more than the tolerance after their due time
	MaxLag  time.Duration `json:"max_lag_ns"`
}

// dispatcher issues request i at dueTime(start, i, rate) for i < planned, on
// one goroutine, until the schedule is done, ctx ends or end + lateAfter
// passes (what is not issued by then is unsent). When it falls behind it
// issues what is overdue at once (open loop: the offered load does not bend
// to the server) and counts each request issued more than lateAfter past its
// due time as late.
type dispatcher struct {
	clk       clock.Clock
	start     time.Time
	end       time.Time
	rate      float64
	planned   int
	lateAfter time.Duration
	// issue hands request i over; it may block (a full semaphore) and
	// returns false to stop the dispatcher (ctx ended while blocked).
	issue func(i int) bool
}

func (d *dispatcher) run(ctx context.Context) dispatchStats {
	st := dispatchStats{Planned: d.planned}
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	cutoff := d.end.Add(d.lateAfter)
	i := 0
	for i < d.planned && ctx.Err() == nil {
		now := d.clk.Now()
		if !now.Before(cutoff) {
			break
		}
		for i < d.planned && now.Before(cutoff) {
			due := dueTime(d.start, i, d.rate)
			if due.After(now) {
				break
			}
			if lag := now.Sub(due); lag > d.lateAfter {
				st.Late++
				st.MaxLag = max(st.MaxLag, lag)
			}
			if !d.issue(i) {
				st.Unsent = d.planned - st.Issued
				return st
			}
			st.Issued++
			i++
			now = d.clk.Now()
		}
		if i >= d.planned || !now.Before(cutoff) {
			break
		}
		wait := dueTime(d.start, i, d.rate).Sub(now)
		if timer == nil {
			timer = d.clk.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C():
		case <-ctx.Done():
		}
	}
	st.Unsent = d.planned - st.Issued
	return st
}
