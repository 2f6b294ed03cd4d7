package gate

import (
	"math"
	"time"

	"github.com/leveehq/levee/internal/lineapi"
	"github.com/leveehq/levee/queue"
)

// The push rule: the walker looks at every waiting player every -line-push
// (the push interval, "every" below), but writes a player a QueueStatus
// only when something they would notice changed since the last one they
// were sent, or when their heartbeat is due:
//
//   - mode_rate: the line's mode changed, or its release rate by
//     1/rateShare (10 %) or more, or between zero and not zero (the
//     line's generation moved on; see lineChanged);
//   - moved: their position moved by 1/moveShare (10 %) of the position
//     they were last sent, and by at least one place;
//   - eta: their ETA changed by 1/etaShare (10 %) of the ETA they were
//     last sent, and by at least minETAChange (1 s), or became known or
//     unknown;
//   - heartbeat: nothing else for heartbeat(position): every push interval
//     within the first heartbeatNear (100) places, then in proportion to
//     the position, up to heartbeatMaxFactor (30) push intervals (60 s at
//     the default 2 s) from place 3,000 on. A connection's first
//     heartbeat comes at a point of its interval that depends on its
//     ticket (heartbeatPhase), so a surge's players do not beat together.
//
// So a player near the front of a moving line is pushed at every walk,
// one far back in a standing line every 60 s, and an operator's change of
// mode or rate reaches everyone at once. In a paced line a player's
// position and ETA both fall by about 10 % in a tenth of their remaining
// wait, so a player is pushed about ten times on the way to the front, and
// at every walk over the last 10 s.
const (
	moveShare          = 10
	etaShare           = 10
	minETAChange       = time.Second
	rateShare          = 10
	heartbeatNear      = 100
	heartbeatMaxFactor = lineapi.HeartbeatMaxFactor
)

// Why a waiting player is pushed a status, counted (for the pushes
// written) by gate_line_push_reasons_total.
const (
	reasonNone      = iota // nothing to push
	reasonFirst            // the first status of a connection, with the ticket
	reasonModeRate         // the line's mode or release rate changed
	reasonMoved            // the position moved
	reasonETA              // the ETA changed
	reasonHeartbeat        // nothing changed for heartbeat(position)
	numPushReasons
)

var pushReasons = [numPushReasons]string{"", "first", "mode_rate", "moved", "eta", "heartbeat"}

// pushMark is what a waiting player was last pushed, packed small: it is
// kept on every waiting connection (conn.pushed), in 12 bytes. at and gen
// wrap around; the rule compares them by difference and equality, which
// holds as long as a player is pushed at least every 109 minutes (the
// heartbeat is at most 30 × the push interval, at most 30 min) and misses
// fewer than 65,536 changes of the line between two pushes.
type pushMark struct {
	pos uint32 // position (saturated)
	eta uint32 // eta_ms (saturated); 0: no ETA
	at  uint16 // when, in walker ticks (lineTick) since the line started, modulo 2^16
	gen uint16 // the line's generation (mode and release rate, see lineChanged), modulo 2^16
}

// markOf packs a status: position, eta_ms, the walker tick and the line's
// generation.
func markOf(pos int, etaMs uint64, at, gen uint16) pushMark {
	return pushMark{pos: positionMark(pos), eta: uint32(min(etaMs, math.MaxUint32)), at: at, gen: gen}
}

// positionMark is a position as a pushMark keeps it: saturated to uint32.
func positionMark(pos int) uint32 { return uint32(min(max(pos, 0), math.MaxUint32)) }

// pushReason is the push rule: why a player who was last pushed last, and
// whose status is now cur (cur.at the walk's tick, cur.gen the line's
// generation), is to be pushed at this walk; reasonNone if not. every is
// the push interval, the time between walks.
func pushReason(last, cur pushMark, every time.Duration) int {
	switch {
	case cur.gen != last.gen:
		return reasonModeRate
	case absDiff(cur.pos, last.pos) >= max(1, last.pos/moveShare):
		return reasonMoved
	case (cur.eta == 0) != (last.eta == 0),
		absDiff(cur.eta, last.eta) >= max(uint32(minETAChange/time.Millisecond), last.eta/etaShare):
		return reasonETA
	}
	// Due at the first walk at least heartbeat - every/2 after the last
	// push: walks come every push interval, give or take the ticker's
	// jitter, so the heartbeat keeps its period on average.
	since := time.Duration(cur.at-last.at) * lineTick // uint16: modulo 2^16 ticks
	if since >= heartbeat(cur.pos, every)-every/2 {
		return reasonHeartbeat
	}
	return reasonNone
}

// heartbeat is how long a player at pos goes without a status when
// nothing they would notice changes: every near the front, growing in
// proportion to the position past heartbeatNear, at most
// heartbeatMaxFactor × every.
func heartbeat(pos uint32, every time.Duration) time.Duration {
	p := min(max(pos, heartbeatNear), heartbeatNear*heartbeatMaxFactor)
	return every * time.Duration(p) / heartbeatNear
}

// heartbeatPhase is how many walker ticks a new player's first status is
// back-dated by, in [0, heartbeat(pos, every)), spread evenly over the
// tickets (a multiplicative hash of the ticket id): the first heartbeat
// comes anywhere in its interval, so the heartbeats of a surge's players
// are spread over the interval instead of coming as one wave.
func heartbeatPhase(id queue.TicketID, pos int, every time.Duration) uint16 {
	ticks := uint64(heartbeat(positionMark(pos), every) / lineTick)
	if ticks == 0 {
		return 0
	}
	h := uint64(id) * 0x9E3779B97F4A7C15 // Fibonacci hashing: consecutive ids land far apart
	return uint16((h >> 32) * ticks >> 32)
}

// lineChanged reports whether the part of the status that is the same for
// everyone changed enough since was for every waiting player to be pushed
// at once: the mode, or the release rate by 1/rateShare or between zero and
// not zero. The line's length is not a reason (it changes with every
// arrival); it goes out with whatever is pushed.
func lineChanged(was, now pushInfo) bool {
	switch {
	case was.mode != now.mode, (was.rate == 0) != (now.rate == 0):
		return true
	case was.rate == 0:
		return false
	}
	return math.Abs(now.rate-was.rate) >= was.rate/rateShare
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
