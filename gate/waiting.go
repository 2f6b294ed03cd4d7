package gate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gorilla/websocket"

	"levee/internal/apperr"
	leveev1 "levee/proto/leveev1"
	"levee/queue"
)

// A waiting connection is an idle one that is pushed a QueueStatus every
// push interval: it has its reader goroutine (which answers requests with
// NOT_ADMITTED) and no other; the walker writes its pushes, through the
// connection's write path, and a released player's login runs in a
// goroutine of its own, as a request does.

// maxPushWrite bounds how long the walker waits on one waiting player's
// socket. A push that cannot be written in time closes the socket (the
// player keeps their place for the grace period), so a stalled player costs
// the walk this much once.
const maxPushWrite = 500 * time.Millisecond

// Results of one status push, counted by gate_line_pushes_total.
const (
	pushSent    = iota // written
	pushSkipped        // another write to this player was in progress, or it is closing
	pushFailed         // the write failed; the socket is closed
	numPushResults
)

var pushResults = [numPushResults]string{"sent", "skipped", "failed"}

// pushStatus writes a waiting player's QueueStatus, unless a write to it is
// in progress (the push is skipped: the next one comes a push interval
// later).
func (c *conn) pushStatus(pos int, eta time.Duration, info *pushInfo) int {
	if !c.wmu.TryLock() {
		return pushSkipped
	}
	defer c.wmu.Unlock()
	if c.lineState.Load() != lineWaiting || c.isClosing() {
		return pushSkipped
	}
	data, err := c.encode(statusFrame(pos, eta, info, c.ticketToken()))
	if err != nil {
		return pushFailed
	}
	if c.writeLocked(data, min(c.s.cfg.WriteTimeout, maxPushWrite)) != nil {
		return pushFailed
	}
	return pushSent
}

// ticketToken signs the waiting player's ticket token (the same token each
// time: same claims, same expiry); wmu must be held.
func (c *conn) ticketToken() string {
	return signTicket(c.s.secret, c.s.line.id, c.ticket, c.playerID, time.Unix(c.ticketExp, 0))
}

func statusFrame(pos int, eta time.Duration, info *pushInfo, ticket string) *leveev1.ServerFrame {
	etaMs := uint64(0)
	if eta > 0 {
		etaMs = uint64(ceilMillis(eta) / time.Millisecond)
	}
	return &leveev1.ServerFrame{Payload: &leveev1.ServerFrame_Queue{Queue: &leveev1.QueueStatus{
		Position:    uint64(pos),
		EtaMs:       etaMs,
		ReleaseRate: info.rate,
		LineLength:  info.length,
		Ticket:      ticket,
		GraceMs:     info.graceMs,
		Mode:        info.mode,
	}}}
}

func admittedFrame(waited time.Duration) *leveev1.ServerFrame {
	return &leveev1.ServerFrame{Payload: &leveev1.ServerFrame_Admitted{Admitted: &leveev1.Admitted{WaitedMs: uint64(max(waited, 0).Milliseconds())}}}
}

// startWaiting finishes the start of a player who joined the line: the
// first QueueStatus (written while the handler still holds wmu, so that
// nothing, an Admitted included, goes out before it), then the reader.
// The handshake hs ends here: a waiting player is not starting any more,
// and the handshake cap must not count the line.
func (c *conn) startWaiting(st queue.Status, exp int64, hs *handshake) {
	c.ticketExp = exp
	info := c.s.line.pushInfo(c.s.line.q.Stats(c.s.clock.Now()))
	data, err := c.encode(statusFrame(st.Position, st.ETA, &info, c.ticketToken()))
	if err == nil {
		err = c.writeLocked(data, c.s.cfg.WriteTimeout)
	}
	c.wmu.Unlock()
	hs.End()
	if err != nil {
		// The player never got the ticket: free the place at once.
		c.s.line.cancel(c, c.s.clock.Now())
		c.finish()
		return
	}
	c.s.m.line.pushes[pushSent].Inc()
	go func() {
		defer c.finish()
		c.prepareReads()
		c.readLoop()
	}()
}

// admitFromLine starts the login of a player the walker released: a new
// handshake (logging in is starting again), then the one login flow
// (conn.login), off the walker, like any request. The walker releases no
// more players than the handshake cap has room for, which bounds these.
// The connection's reader runs meanwhile (answering NOT_ADMITTED), so a
// refused login's close frame is read there.
func (s *Server) admitFromLine(c *conn, waited time.Duration) {
	hs := s.releaseHandshake()
	s.m.line.admitted.Inc()
	s.m.line.wait.Observe(waited.Seconds())
	s.admitWG.Go(func() { c.login(hs, admittedFrame(waited)) })
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
func lineRefusal(err error) (reason string, e *leveev1.Error, code int, closeReason string) {
	if retry, ok := queue.RetryAfter(err); ok {
		if errors.Is(err, queue.ErrClosed) {
			return refuseClosed, apperr.Reply(fmt.Errorf("%w: the game is closed for maintenance; please come back in %s",
				apperr.ErrUnavailable, humanDuration(retry)), retry), websocket.CloseTryAgainLater, "closed for maintenance"
		}
		retry = jitter(retry)
		return refuseFull, apperr.Reply(fmt.Errorf("%w: the line is full right now; please try again in %s",
			apperr.ErrServerFull, humanDuration(retry)), retry), websocket.CloseTryAgainLater, "line full"
	}
	if errors.Is(err, ErrTicketInUse) {
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
