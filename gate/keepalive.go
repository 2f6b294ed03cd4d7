package gate

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The keepalive decides which players are gone. The rule:
//
//   - anything that arrives from a player (a pong, a frame) is a sign of
//     life, whenever its reader gets to it: a pong read late still counts;
//   - a player is pinged once per -ping-interval; the first ping sent after
//     its last sign of life starts its clock, from when the gate actually
//     sent it (not from when the ping was due);
//   - a player that has sent nothing for -ping-interval + -pong-timeout
//     after that ping is dropped (its socket is closed).
//
// Before dropping a player the keepalive asks the kernel whether bytes from
// it wait unread on the socket (the gate's readers are behind): if so, that
// is a sign of life too.
//
// So a player that goes silent at S is dropped at most 2 x -ping-interval +
// -pong-timeout + 2 steps after S, and never sooner than -ping-interval +
// -pong-timeout after the first ping it did not answer.
//
// Time here is the gate's liveness time: the clock minus every moment the
// keepalive itself ran late (a round that started later than its step
// after the previous one: the process was starved of CPU, stopped, or
// its own ping writes lagged). Each such delay is added to
// gate_keepalive_excused_seconds_total and moves every player's deadline
// by as much, so the gate never blames players for its own lateness.
//
// The work is spread: connections sit in fixed slots (connSet), and each
// step (about keepaliveStep) the keepalive pings one slot and checks the
// slot whose pings fall due then, so each player is pinged once per
// interval at the same point of it, and the pongs come back spread too.

// keepaliveStep is the target length of one keepalive round; the ping
// interval is cut into at most maxKeepaliveSlots such rounds.
const (
	keepaliveStep     = 100 * time.Millisecond
	maxKeepaliveSlots = 600
)

// keepalive is the keepalive's schedule and its record of lateness.
type keepalive struct {
	slots int           // rounds per ping interval
	step  time.Duration // PingInterval / slots
	limit time.Duration // PingInterval + PongTimeout
	// check is how many rounds after a slot's pings the same slot is
	// checked again, the first round at or past their deadline (one more
	// for the ticker's jitter), modulo slots; 0 when that is the ping
	// round itself.
	check int

	excused atomic.Int64 // ns of lateness excused so far
	// For tests: whether the ticker exists, and rounds finished.
	ticking atomic.Bool
	rounds  atomic.Int64
}

func newKeepalive(pingInterval, pongTimeout time.Duration) *keepalive {
	slots := int(min(max(pingInterval/keepaliveStep, 1), maxKeepaliveSlots))
	step := pingInterval / time.Duration(slots)
	limit := pingInterval + pongTimeout
	rounds := int((limit+step-1)/step) + 1
	return &keepalive{slots: slots, step: step, limit: limit, check: rounds % slots}
}

// aliveNow is the liveness time now (Unix ns): the clock minus the
// lateness excused so far. No more is excused than the time that passed,
// so it moves forward unless the wall clock itself steps back; visit
// clamps a connection's times to now when it does.
func (s *Server) aliveNow() int64 {
	return s.clock.Now().UnixNano() - s.ka.excused.Load()
}

// silent reports whether a player has to be dropped: pinged at pingedAt
// and heard from last at lastSeen (liveness times), now is past the first
// unanswered ping's deadline.
func silent(lastSeen, pingedAt, now int64, limit time.Duration) bool {
	return pingedAt > lastSeen && now-pingedAt > int64(limit)
}

// keepalive is the one goroutine that pings the connections and drops the
// silent ones, a slot per round.
func (s *Server) keepalive(ctx context.Context) {
	k := s.ka
	t := s.clock.NewTicker(k.step)
	defer t.Stop()
	prev := s.clock.Now()
	k.ticking.Store(true)
	var batch []*conn
	for round := 0; ; round++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		now := s.clock.Now()
		s.excuse(now.Sub(prev) - k.step)
		prev = now
		slot := round % k.slots
		batch = s.slotConns(batch[:0], slot)
		for _, c := range batch {
			if ctx.Err() != nil {
				return
			}
			c.visit(true)
		}
		clear(batch) // do not keep closed connections reachable until the next round
		if k.check != 0 {
			batch = s.slotConns(batch[:0], slot-k.check+k.slots)
			for _, c := range batch {
				c.visit(false)
			}
			clear(batch)
		}
		k.rounds.Add(1)
	}
}

// excuse records a round's lateness: late by lag beyond its step, which
// moves every deadline by as much.
func (s *Server) excuse(lag time.Duration) {
	lag = max(lag, 0)
	s.m.keepalive.lag.Observe(lag.Seconds())
	if lag > 0 {
		s.ka.excused.Add(int64(lag))
		s.m.keepalive.excused.Add(lag.Seconds())
	}
}

// slotConns appends the connections of keepalive slot i to buf.
func (s *Server) slotConns(buf []*conn, i int) []*conn {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.conns.appendSlot(buf, i)
}

// visit drops c if it has been silent too long, else pings it when ping
// is set. A closing connection is left to its close deadline.
func (c *conn) visit(ping bool) {
	if c.isClosing() {
		return
	}
	now := c.s.aliveNow()
	// After the wall clock stepped back, times noted before the step lie
	// ahead of now: bring them back to now (it costs the player at most one
	// deadline), so a ping sent now is not taken as answered by them.
	if c.lastSeen.Load() > now {
		c.lastSeen.Store(now)
	}
	if c.pingedAt.Load() > now {
		c.pingedAt.Store(now)
	}
	if silent(c.lastSeen.Load(), c.pingedAt.Load(), now, c.s.ka.limit) {
		if unreadBytes(c.ws.NetConn()) > 0 {
			// The player did answer: its bytes wait in the socket for a
			// reader the gate has not run yet. That is a sign of life.
			c.s.m.keepalive.unread.Inc()
			c.lastSeen.Store(now)
			return
		}
		if !c.markClosing() {
			return // closing already: counted once, left to its close
		}
		c.s.m.keepalive.drops.Inc()
		c.s.log.Debug("dropping a silent player", "player", c.playerID,
			"silent_for", time.Duration(now-c.lastSeen.Load()).String())
		_ = c.ws.NetConn().Close()
		return
	}
	if ping {
		c.ping(now)
	}
}

// ping sends a keepalive ping; a socket that cannot take one is closed. A
// ping sent after the player's last sign of life starts its deadline, from
// now (just before the write: nothing can answer it sooner). A player
// being written to (a reply, a status) is skipped this round rather than
// waited for, so one slow socket does not hold up the round: it is pinged
// at its next turn, and a write that cannot finish closes it anyway.
func (c *conn) ping(now int64) {
	if !c.wmu.TryLock() {
		c.s.m.keepalive.pings[pingSkipped].Inc()
		return
	}
	defer c.wmu.Unlock()
	if c.pingedAt.Load() <= c.lastSeen.Load() {
		c.pingedAt.Store(now)
	}
	err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.s.cfg.WriteTimeout))
	switch {
	case err == nil:
		c.s.m.keepalive.pings[pingSent].Inc()
	case !errors.Is(err, websocket.ErrCloseSent):
		c.s.m.keepalive.pings[pingFailed].Inc()
		_ = c.ws.NetConn().Close()
	}
}

// heard records a sign of life from the player (a frame; the pong
// handler does the same in place, see prepareReads).
func (c *conn) heard() { c.lastSeen.Store(c.s.aliveNow()) }
