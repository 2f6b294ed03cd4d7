package gate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
	"github.com/leveehq/levee/queue"
)

// A waiting connection is an idle one that is pushed a QueueStatus when
// something it would notice changes (the push rule, pushrule.go): it has
// its reader goroutine (which answers requests with NOT_ADMITTED) and no
// other; the walker writes its pushes, through the connection's write
// path, and a released player's login runs in a goroutine of its own, as a
// request does. The first status of a connection carries the signed
// ticket; later ones leave it empty (unchanged), so the ticket is signed
// once per connection, and the walker encodes the part of a status that
// is the same for everyone once per walk and codec (statusEnc).

// maxPushWrite bounds how long the walker waits on one waiting player's
// socket. A push that cannot be written in time closes the socket (the
// player keeps their place for the grace period), so a stalled player costs
// the walk this much once.
const maxPushWrite = 500 * time.Millisecond

// Results of one status push, counted by gate_line_pushes_total. A player
// the push rule has nothing for is not counted.
const (
	pushSent    = iota // written
	pushSkipped        // another write to this player was in progress (looked at again next walk), or it is closing
	pushFailed         // the write failed; the socket is closed
	numPushResults
	pushNotDue = -1 // the push rule has nothing to push
)

var pushResults = [numPushResults]string{"sent", "skipped", "failed"}

// pushStatus writes a waiting player, now at pos with eta, its
// QueueStatus if the push rule (cur: this walk's tick and the line's
// generation) says so. A player another write is in progress to is
// skipped; the next walk looks at it again. It returns the result
// (pushNotDue or a push result) and, for a push, its reason.
func (c *conn) pushStatus(pos int, eta time.Duration, cur pushMark, enc *statusEnc) (result, reason int) {
	if !c.wmu.TryLock() {
		return pushSkipped, reasonNone
	}
	defer c.wmu.Unlock()
	etaMs := etaMillis(eta)
	mark := markOf(pos, etaMs, cur.at, cur.gen)
	why := pushReason(c.pushed, mark, c.s.line.push)
	if why == reasonNone {
		return pushNotDue, reasonNone
	}
	if c.lineState.Load() != lineWaiting || c.isClosing() {
		return pushSkipped, why
	}
	data, err := enc.frame(*c.codec, pos, etaMs)
	if err != nil { // cannot happen: the shared part is a valid message
		c.s.log.Error("encoding a status template", "err", err)
		data, err = c.encode(statusFrame(pos, time.Duration(etaMs)*time.Millisecond, &enc.info, ""), "")
	}
	if err != nil {
		return pushFailed, why
	}
	if c.writeLocked(data, min(c.s.cfg.WriteTimeout, maxPushWrite)) != nil {
		return pushFailed, why
	}
	c.pushed = mark
	return pushSent, why
}

// etaMillis is a QueueStatus's eta_ms: the ETA rounded up to the
// millisecond, 0 when unknown.
func etaMillis(eta time.Duration) uint64 {
	if eta <= 0 {
		return 0
	}
	return uint64(ceilMillis(eta) / time.Millisecond)
}

// statusFrame is a waiting player's QueueStatus; ticket is empty after
// the connection's first status (an empty ticket means unchanged).
func statusFrame(pos int, eta time.Duration, info *pushInfo, ticket string) *leveev2.ServerFrame {
	return &leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Queue{Queue: &leveev2.QueueStatus{
		Position:    uint64(pos),
		EtaMs:       etaMillis(eta),
		ReleaseRate: info.rate,
		LineLength:  info.length,
		Ticket:      ticket,
		GraceMs:     info.graceMs,
		Mode:        info.mode,
	}}}
}

// sharedStatus is the part of statusFrame that is the same for every
// player of a walk: everything but position, eta_ms and the ticket.
func sharedStatus(info *pushInfo) *leveev2.QueueStatus {
	return statusFrame(0, 0, info, "").GetQueue()
}

// statusEnc encodes the pushes of one walk: the shared part once per
// codec (on its first use in the walk), then per player only position and
// eta_ms, into one buffer the walker reuses (a write copies it out before
// the next push).
type statusEnc struct {
	info  pushInfo
	tmpl  [2]wire.StatusTemplate // by codec: protobuf, JSON
	ready [2]bool
	buf   []byte
}

// reset starts a walk whose shared part is info.
func (e *statusEnc) reset(info pushInfo) {
	e.info = info
	e.ready = [2]bool{}
}

// frame is the status at pos with etaMs in codec, valid until the next
// call: the same frame, once decoded, as statusFrame without a ticket.
func (e *statusEnc) frame(codec wire.Codec, pos int, etaMs uint64) ([]byte, error) {
	i := 0
	if codec.JSON {
		i = 1
	}
	if !e.ready[i] {
		t, err := codec.StatusTemplate(sharedStatus(&e.info))
		if err != nil {
			return nil, err
		}
		e.tmpl[i], e.ready[i] = t, true
	}
	e.buf = e.tmpl[i].Append(e.buf[:0], uint64(pos), etaMs)
	return e.buf, nil
}

// startWaiting finishes the start of a player who joined the line: the
// first QueueStatus, with the ticket token (signed here, once: exp is its
// expiry, unix seconds), written while the handler still holds wmu, so
// that nothing, an Admitted or a push included, goes out before it; then
// the reader. The handshake hs ends here: a waiting player is not starting
// any more, and the handshake cap must not count the line.
func (c *conn) startWaiting(st queue.Status, exp int64, hs *handshake) {
	l := c.s.line
	now := c.s.clock.Now()
	gen := l.generation() // before the stats: a change after it is pushed again
	info := l.pushInfo(l.q.Stats(now))
	tok := signTicket(c.s.signingKey(), l.id, c.ticket, c.playerID, st.Ticket.Joined, time.Unix(exp, 0))
	data, err := c.encode(statusFrame(st.Position, st.ETA, &info, tok), "")
	if err == nil {
		err = c.writeLocked(data, c.s.cfg.WriteTimeout)
	}
	// Back-dated by a share of the heartbeat that depends on the ticket,
	// so players who joined together in a surge do not all get their
	// heartbeats in the same walk ever after.
	c.pushed = markOf(st.Position, etaMillis(st.ETA), l.tick(now)-heartbeatPhase(c.ticket, st.Position, l.push), gen)
	c.wmu.Unlock()
	hs.End()
	if err != nil {
		// The player never got the ticket: free the place at once.
		c.s.line.cancel(c, c.s.clock.Now())
		c.finish()
		return
	}
	c.s.m.line.pushed(pushSent, reasonFirst)
	go func() {
		defer c.finish()
		c.prepareReads()
		c.readLoop()
	}()
}

// admitFromLine starts the login of a player the walker released: a new
// handshake (logging in is starting again), then the one login flow
// (conn.login), off the walker, like any request, with an Admitted frame
// carrying the pass of ticket id (signed there). The walker releases no
// more players than the handshake cap has room for, which bounds these.
// The connection's reader runs meanwhile (answering NOT_ADMITTED), so a
// refused login's close frame is read there.
//
// The login counts as a request in flight from here, on the walker's
// goroutine: the gate's stop sets draining only once the walker has ended
// (drain), so a released player is never refused SHUTTING_DOWN by a
// login whose goroutine ran late, and the stop lets the login finish
// before it closes the sockets with 1012. The player leaves with its pass.
// Refused, it kept only its line ticket, and a restarted gate put it back
// in line by its join time, ahead of the players who had been told it was
// gone (their places went backwards).
func (s *Server) admitFromLine(c *conn, id queue.TicketID, waited time.Duration, now time.Time) {
	hs := s.releaseHandshake()
	s.m.line.admitted.Inc()
	s.m.line.wait.Observe(waited.Seconds())
	inFlight := s.beginRequest() // false only if the walker outlived the drain's start: login refuses then
	s.admitWG.Go(func() { c.login(hs, s.admittedFrame(c.playerID, id, waited, now), inFlight) })
}

// Refusal reasons counted by gate_line_refusals_total.
const (
	refuseFull        = "full"
	refuseClosed      = "closed"
	refuseBadTicket   = "bad_ticket"
	refuseTicketInUse = "ticket_in_use"
)

var lineRefusalReasons = []string{refuseFull, refuseClosed, refuseBadTicket, refuseTicketInUse}

// lineRefusal is what a player refused by the line is told: the reason
// counted, the typed error, and the close code (1008 for a ticket the
// player must not use, 1013 to come back later).
func lineRefusal(err error) (reason string, e *leveev2.Error, code int, closeReason string) {
	if retry, ok := queue.RetryAfter(err); ok {
		if errors.Is(err, queue.ErrClosed) {
			return refuseClosed, apperr.Reply(fmt.Errorf("%w: the game is closed for maintenance; please come back in %s",
				apperr.ErrUnavailable, humanDuration(retry)), retry), websocket.CloseTryAgainLater, "closed for maintenance"
		}
		retry = jitter(retry)
		return refuseFull, apperr.Reply(fmt.Errorf("%w: the line is full right now; please try again in %s",
			apperr.ErrServerFull, humanDuration(retry)), retry), websocket.CloseTryAgainLater, "line full"
	}
	if errors.Is(err, apperr.ErrTicketInUse) {
		return refuseTicketInUse, apperr.Reply(err, 0), websocket.ClosePolicyViolation, "ticket in use"
	}
	if !errors.Is(err, apperr.ErrForbidden) && !errors.Is(err, apperr.ErrUnauthorized) {
		err = fmt.Errorf("%w: your line ticket is not valid (%w); connect without it to join the line", apperr.ErrUnauthorized, err)
	}
	return refuseBadTicket, apperr.Reply(err, 0), websocket.ClosePolicyViolation, "bad ticket"
}

// ticketError is the player-facing error of a ticket that failed
// verification.
func ticketError(err error) error {
	if errors.Is(err, ErrTicketPlayer) {
		return errTicketPlayer
	}
	return fmt.Errorf("%w: your line ticket is not valid (%w); connect without it to join the line", apperr.ErrUnauthorized, err)
}

// jitter spreads a retry delay over ±20 %, so refused players do not come
// back together.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64())).Round(time.Millisecond)
}

// humanDuration is "about N seconds/minutes" for a player.
func humanDuration(d time.Duration) string {
	switch {
	case d < 90*time.Second:
		s := max(int(d.Round(time.Second)/time.Second), 1)
		if s == 1 {
			return "about 1 second"
		}
		return fmt.Sprintf("about %d seconds", s)
	case d < 90*time.Minute:
		return fmt.Sprintf("about %d minutes", int(d.Round(time.Minute)/time.Minute))
	}
	return fmt.Sprintf("about %d hours", int(d.Round(time.Hour)/time.Hour))
}
