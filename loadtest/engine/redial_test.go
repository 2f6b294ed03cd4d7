package engine

import (
	"maps"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/loadtest/record"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// totals flushes rec and sums its counters.
func totals(rec *record.Recorder, now time.Time) map[string]int64 {
	out := map[string]int64{}
	for _, p := range rec.Close(now) {
		for k, v := range p.Counters {
			out[k] += v
		}
	}
	return out
}

// What the watch makes of one player's connections, in fake time: the
// server closes (playing and waiting), the offset of the first redial
// after each, the places of the waiting ones; the player's own ends are
// not closes.
func TestRedialWatch(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pos := func(n uint64) *leveev2.QueueStatus { return &leveev2.QueueStatus{Position: n} }
	for _, tc := range []struct {
		name string
		life func(w *redialWatch, clk *clock.Fake)
		want map[string]int64
	}{
		{
			name: "playing, closed by the server, redials 2.5 s later (and again: only the first counts)",
			life: func(w *redialWatch, clk *clock.Fake) {
				w.dialed()
				w.admitted()
				clk.Advance(10 * time.Second)
				w.connClosed()
				clk.Advance(100 * time.Millisecond) // the session notices
				w.lost()
				clk.Advance(2400 * time.Millisecond)
				w.dialed() // refused: the gate is down
				clk.Advance(time.Second)
				w.dialed()
				w.admitted()
			},
			want: map[string]int64{"server_closes": 1, "redial_after/2": 1},
		},
		{
			name: "waiting at 7, closed; the SDK redials 0.3 s later and is told 5: kept",
			life: func(w *redialWatch, clk *clock.Fake) {
				w.dialed()
				w.status(pos(9))
				w.status(pos(7))
				clk.Advance(time.Second)
				w.connClosed()
				clk.Advance(300 * time.Millisecond)
				w.dialed()
				w.status(pos(5))
				w.status(pos(9)) // later statuses do not count
			},
			want: map[string]int64{"server_closes": 1, "server_closes_in_line": 1, "redial_after/0": 1, "place_kept": 1},
		},
		{
			name: "waiting at 3, closed, back at 4: lost",
			life: func(w *redialWatch, clk *clock.Fake) {
				w.dialed()
				w.status(pos(3))
				w.connClosed()
				clk.Advance(4 * time.Second)
				w.dialed()
				w.connClosed() // the gate was not back yet
				clk.Advance(time.Second)
				w.dialed()
				w.status(pos(4))
			},
			want: map[string]int64{"server_closes": 1, "server_closes_in_line": 1, "redial_after/4": 1, "place_lost": 1},
		},
		{
			name: "waiting, closed, admitted at once on the redial: kept",
			life: func(w *redialWatch, clk *clock.Fake) {
				w.dialed()
				w.status(pos(2))
				w.connClosed()
				clk.Advance(1500 * time.Millisecond)
				w.dialed()
				w.admitted()
			},
			want: map[string]int64{"server_closes": 1, "server_closes_in_line": 1, "redial_after/1": 1, "place_kept": 1},
		},
		{
			name: "its own ends: a drop in line, the session over; not closes",
			life: func(w *redialWatch, clk *clock.Fake) {
				w.dialed()
				w.status(pos(2))
				w.connClosed()
				w.settled(true) // it dropped
				clk.Advance(time.Second)
				w.dialed()
				w.status(pos(2))
				w.admitted()
				clk.Advance(time.Minute)
				w.connClosed() // it closed the connection itself
			},
			want: map[string]int64{},
		},
		{
			name: "waiting, closed, the SDK gives up, the life ends: no redial, no place",
			life: func(w *redialWatch, clk *clock.Fake) {
				w.dialed()
				w.status(pos(6))
				w.connClosed()
				w.settled(false)
			},
			want: map[string]int64{"server_closes": 1, "server_closes_in_line": 1, "redial_none": 1, "place_unknown": 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(start)
			rec := record.New(start)
			w := newRedialWatch(clk, rec)
			tc.life(w, clk)
			w.finish()
			got := totals(rec, clk.Now().Add(time.Second))
			for k := range got {
				if got[k] == 0 {
					delete(got, k)
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("counters %v, want %v", got, tc.want)
			}
		})
	}
}
