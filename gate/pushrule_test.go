package gate

import (
	"math"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/lineapi"
	"github.com/leveehq/levee/queue"
)

func TestPushReason(t *testing.T) {
	const every = 2 * time.Second
	walk := uint16(every / lineTick) // ticks per walk
	at := func(walks uint16) uint16 { return 1000 + walks*walk }
	last := func(pos, eta uint32) pushMark { return pushMark{pos: pos, eta: eta, at: at(0), gen: 7} }
	for _, tc := range []struct {
		name      string
		last, cur pushMark
		want      int
	}{
		// The line's generation: everyone, whatever else.
		{"mode or rate changed", last(5000, 0), pushMark{pos: 5000, at: at(1), gen: 8}, reasonModeRate},
		{"generation wrapped", pushMark{pos: 3, gen: math.MaxUint16}, pushMark{pos: 3, gen: 0}, reasonModeRate},

		// Position: 10 % of the last one, at least one place.
		{"near the front, one place", last(5, 5000), pushMark{pos: 4, eta: 4900, at: at(1), gen: 7}, reasonMoved},
		{"at 19, one place", last(19, 0), pushMark{pos: 18, at: at(1), gen: 7}, reasonMoved},
		{"at 1000, 99 places", last(1000, 0), pushMark{pos: 901, at: at(1), gen: 7}, reasonNone},
		{"at 1000, 100 places", last(1000, 0), pushMark{pos: 900, at: at(1), gen: 7}, reasonMoved},
		{"moved back (cannot happen, but is seen)", last(10, 0), pushMark{pos: 11, at: at(1), gen: 7}, reasonMoved},

		// ETA: 10 % and at least 1 s, or known <-> unknown.
		{"eta became known", last(5000, 0), pushMark{pos: 5000, eta: 600_000, at: at(1), gen: 7}, reasonETA},
		{"eta became unknown", last(5000, 600_000), pushMark{pos: 5000, at: at(1), gen: 7}, reasonETA},
		{"eta 9.9 % less", last(5000, 100_000), pushMark{pos: 5000, eta: 90_001, at: at(1), gen: 7}, reasonNone},
		{"eta 10 % less", last(5000, 100_000), pushMark{pos: 5000, eta: 90_000, at: at(1), gen: 7}, reasonETA},
		{"eta 10 % more", last(5000, 100_000), pushMark{pos: 5000, eta: 110_000, at: at(1), gen: 7}, reasonETA},
		{"short eta, under 1 s", last(100, 5_000), pushMark{pos: 100, eta: 4_001, at: at(0), gen: 7}, reasonNone},
		{"short eta, 1 s", last(100, 5_000), pushMark{pos: 100, eta: 4_000, at: at(0), gen: 7}, reasonETA},

		// Heartbeat: every walk near the front, 30 walks (60 s) far back.
		{"front, a walk later", last(1, 0), pushMark{pos: 1, at: at(1), gen: 7}, reasonHeartbeat},
		{"front, half a walk later", last(1, 0), pushMark{pos: 1, at: at(0) + walk/2, gen: 7}, reasonHeartbeat},
		{"front, just under half a walk", last(1, 0), pushMark{pos: 1, at: at(0) + walk/2 - 1, gen: 7}, reasonNone},
		{"at 100, a walk later", last(100, 0), pushMark{pos: 100, at: at(1), gen: 7}, reasonHeartbeat},
		{"at 300, two walks", last(300, 0), pushMark{pos: 300, at: at(2), gen: 7}, reasonNone},
		{"at 300, three walks", last(300, 0), pushMark{pos: 300, at: at(3), gen: 7}, reasonHeartbeat},
		{"far back, 29 walks", last(50_000, 0), pushMark{pos: 50_000, at: at(29), gen: 7}, reasonNone},
		{"far back, 30 walks", last(50_000, 0), pushMark{pos: 50_000, at: at(30), gen: 7}, reasonHeartbeat},
		{"tick counter wrapped", pushMark{pos: 50_000, at: math.MaxUint16 - 10}, pushMark{pos: 50_000, at: 30*walk - 11}, reasonHeartbeat},
		{"tick counter wrapped, early", pushMark{pos: 50_000, at: math.MaxUint16 - 10}, pushMark{pos: 50_000, at: 29*walk - 11}, reasonNone},

		// A paced line far back: small steps of position and ETA are not pushed.
		{"paced, far back, a walk later", last(5000, 50_000), pushMark{pos: 4800, eta: 48_000, at: at(1), gen: 7}, reasonNone},
	} {
		if got := pushReason(tc.last, tc.cur, every); got != tc.want {
			t.Errorf("%s: pushReason(%+v, %+v) = %s, want %s", tc.name, tc.last, tc.cur, pushReasons[got], pushReasons[tc.want])
		}
	}
}

func TestHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		pos   uint32
		every time.Duration
		want  time.Duration
	}{
		{1, 2 * time.Second, 2 * time.Second},
		{100, 2 * time.Second, 2 * time.Second},
		{150, 2 * time.Second, 3 * time.Second},
		{1000, 2 * time.Second, 20 * time.Second},
		{1500, 2 * time.Second, 30 * time.Second},
		{3000, 2 * time.Second, 60 * time.Second},
		{math.MaxUint32, 2 * time.Second, 60 * time.Second},
		{1500, 500 * time.Millisecond, 7500 * time.Millisecond},
	} {
		if got := heartbeat(tc.pos, tc.every); got != tc.want {
			t.Errorf("heartbeat(%d, %v) = %v, want %v", tc.pos, tc.every, got, tc.want)
		}
	}
	// The contract tools judge gaps by: the longest heartbeat plus one walk.
	for _, every := range []time.Duration{500 * time.Millisecond, 2 * time.Second} {
		if got, want := lineapi.MaxStatusInterval(every), heartbeat(math.MaxUint32, every)+every; got != want {
			t.Errorf("lineapi.MaxStatusInterval(%v) = %v, want the longest heartbeat and a walk, %v", every, got, want)
		}
	}
}

func TestLineChanged(t *testing.T) {
	paced := pushInfo{rate: 100, length: 5000, graceMs: 60_000, mode: "paced"}
	with := func(f func(*pushInfo)) pushInfo { i := paced; f(&i); return i }
	for _, tc := range []struct {
		name string
		now  pushInfo
		want bool
	}{
		{"same", paced, false},
		{"length only", with(func(i *pushInfo) { i.length = 1 }), false},
		{"mode", with(func(i *pushInfo) { i.mode = "closed" }), true},
		{"rate 9 % up", with(func(i *pushInfo) { i.rate = 109 }), false},
		{"rate 10 % up", with(func(i *pushInfo) { i.rate = 110 }), true},
		{"rate 10 % down", with(func(i *pushInfo) { i.rate = 90 }), true},
		{"rate to zero", with(func(i *pushInfo) { i.rate = 0 }), true},
	} {
		if got := lineChanged(paced, tc.now); got != tc.want {
			t.Errorf("%s: lineChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
	stopped := pushInfo{mode: "queueing"}
	if lineChanged(stopped, stopped) || !lineChanged(stopped, pushInfo{mode: "queueing", rate: 0.01}) {
		t.Error("a line at rate 0: unchanged at 0, changed by any rate")
	}
}

// The first heartbeats of players who joined together are spread over the
// heartbeat interval, not one wave.
func TestHeartbeatPhaseSpreads(t *testing.T) {
	const every = 2 * time.Second
	const pos = 5000 // far back: a 60 s heartbeat, 600 walker ticks
	ticks := int(heartbeat(pos, every) / lineTick)
	var deciles [10]int
	for id := range queue.TicketID(3000) {
		ph := int(heartbeatPhase(id+1, pos, every))
		if ph < 0 || ph >= ticks {
			t.Fatalf("ticket %d: phase %d outside [0, %d)", id+1, ph, ticks)
		}
		deciles[ph*10/ticks]++
	}
	for i, n := range deciles {
		if n < 200 || n > 400 { // 300 each when even
			t.Fatalf("decile %d of the interval holds %d of 3000 first heartbeats: %v", i, n, deciles)
		}
	}
	if got := heartbeatPhase(7, 10, every); got >= uint16(every/lineTick) {
		t.Fatalf("near the front: phase %d, want under one push interval", got)
	}
}
