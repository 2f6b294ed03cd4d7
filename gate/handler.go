package gate

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/apperr"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
	"github.com/leveehq/levee/queue"
)

// handleWS admits or refuses a player. In order: over the handshake cap,
// HTTP 503 with Retry-After before any upgrade; while stopping, HTTP 503;
// at the connection cap, the pre-encoded SERVER_FULL frame and a 1013 close
// (checked before the token, as it is the cheaper check); a bad token, an
// UNAUTHORIZED frame and a 1008 close; a player the admission line turns
// away, its typed error and close. Every refusal is answered from this handler, with
// no goroutine and nothing kept. An admitted player's connection is tracked
// and handed to its own goroutine, and the handler returns, so no HTTP
// handler goroutine or HTTP buffers stay with it.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	if !s.requireSubprotocol(w, r) {
		return
	}
	// The limits per source address come first: they cost no more than a
	// map look-up, and a flood from one network must not make the gate
	// check tokens.
	addrKey, ok := s.admitAddr(w, r)
	if !ok {
		return
	}
	var hs handshake
	if !s.beginHandshake(&hs) {
		s.addrs.release(addrKey)
		s.m.rejectHandshakes.Inc()
		refuseHandshake(w)
		return
	}
	handedOff, slot := false, false
	defer func() {
		if !handedOff {
			s.addrs.release(addrKey)
			if slot {
				s.releaseSlot()
			}
			hs.End()
		}
	}()
	if s.isDraining() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "gate shutting down", http.StatusServiceUnavailable)
		return
	}
	if slot = s.takeSlot(); !slot {
		s.m.rejectFull.Inc()
		s.m.fullConns.Inc()
		s.refuseUpgraded(w, r, s.fullFn)
		return
	}

	s.tokenChecks.Add(1)
	playerID, reason, err := s.authenticate(r)
	if err != nil {
		s.m.connections.WithLabelValues(resultUnauthorized).Inc()
		s.m.auth.refusals[reason].Inc()
		s.log.Debug("unauthorized connection", "reason", reason, "err", err, "remote", r.RemoteAddr)
		s.refuseUpgraded(w, r, s.errorFrames(apperr.Reply(err, 0), websocket.ClosePolicyViolation, "unauthorized"))
		return
	}
	now := s.clock.Now()
	claims, err := s.ticketOf(r, playerID, now)
	if err == nil {
		err = s.line.precheck(playerID, claims, now)
	}
	if err != nil {
		s.refuseLine(w, r, err)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil { // Upgrade has answered with an HTTP error
		s.log.Debug("websocket upgrade failed", "err", err, "remote", r.RemoteAddr)
		return
	}
	codec := s.codecFor(ws.Subprotocol())
	c := &conn{
		s:        s,
		ws:       ws,
		codec:    codec,
		msgType:  messageType(*codec),
		playerID: playerID,
		addrKey:  addrKey,
	}
	c.shard = s.logic.shardOf(playerID)
	if s.cfg.connRateLimitOn() {
		c.bucket = newTokenBucket(s.cfg.ConnRate, s.cfg.ConnBurst, s.clock.Now())
	}
	if !s.track(c) {
		// The gate began to stop between the check above and now.
		s.m.connections.WithLabelValues(resultShuttingDown).Inc()
		_ = ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseServiceRestart, "server restarting"),
			time.Now().Add(s.cfg.WriteTimeout))
		_ = ws.Close()
		return
	}
	// From here the connection owns the slot (untrack gives it back) and
	// the handshake (ended once the login is answered, the player is in
	// line or refused).
	handedOff = true
	s.enterLine(c, hs.handOff(), claims)
}

// ticketOf reads and verifies the ticket query parameter. No ticket gives
// nil claims: the player joins the back of the line. A ticket of another
// line (another gate's, or an earlier run of this gate's) is given to the
// line as such (foreign), which puts it back by its join time while it
// takes returning players, or else at the back (an admission pass: let in
// at once then, see pass.go); a t1 ticket of another
// line, which has no join time, gives nil claims. A ticket that fails
// verification is an error, and the player is refused.
func (s *Server) ticketOf(r *http.Request, playerID string, now time.Time) (*ticketClaims, error) {
	tok := r.URL.Query().Get("ticket")
	if tok == "" {
		return nil, nil
	}
	cl, err := verifyTicket(s.ring(), tok, playerID, now)
	if err != nil {
		return nil, ticketError(err)
	}
	if cl.Line != s.line.id {
		if cl.Joined.IsZero() && !cl.Pass {
			s.log.Debug("t1 ticket of another line; joining at the back", "player", playerID)
			return nil, nil
		}
		cl.foreign = true
	}
	return &cl, nil
}

// refuseLine refuses, before the upgrade, a player the line turns away.
func (s *Server) refuseLine(w http.ResponseWriter, r *http.Request, err error) {
	reason, e, code, text := lineRefusal(err)
	s.m.line.refusals[reason].Inc()
	s.m.connections.WithLabelValues(resultRefused).Inc()
	s.log.Debug("refused by the admission line", "reason", reason, "err", err, "remote", r.RemoteAddr)
	s.refuseUpgraded(w, r, s.errorFrames(e, code, text))
}

// enterLine puts a tracked connection in the admission line and starts it
// accordingly: waiting (first QueueStatus, then its reader), admitted at
// once (the login, see serve), admitted on reconnecting (Admitted, then
// the login), or refused (a race with an operator's change since
// precheck). It takes over hs and hands it to whichever of these runs.
func (s *Server) enterLine(c *conn, hs *handshake, claims *ticketClaims) {
	now := s.clock.Now()
	c.wmu.Lock() // nothing is written to c before its first frame below
	st, how, old, err := s.line.enter(c, claims, now)
	if old != nil {
		s.replace(old) // one player, one place: c took over old's
	}
	if err != nil {
		c.wmu.Unlock()
		reason, e, code, text := lineRefusal(err)
		s.m.line.refusals[reason].Inc()
		s.m.connections.WithLabelValues(resultRefused).Inc()
		go func() {
			defer c.finish()
			hs.End()
			c.refuse(e, code, text)
		}()
		return
	}
	if st.State == queue.Waiting {
		exp := now.Add(ticketTTL).Unix()
		if how == entryResumed && !claims.foreign {
			exp = claims.Expiry.Unix() // the same token as presented
		}
		c.startWaiting(st, exp, hs)
		return
	}
	c.wmu.Unlock()
	var admitted *leveev2.ServerFrame
	switch how {
	case entryResumed: // released while the player was away
		waited := now.Sub(st.Ticket.Joined)
		s.m.line.wait.Observe(waited.Seconds())
		admitted = s.admittedFrame(c.playerID, st.Ticket.ID, waited, now)
	case entryPass: // was playing: no wait, and a pass of this line
		admitted = s.admittedFrame(c.playerID, st.Ticket.ID, 0, now)
	}
	go c.serve(hs, admitted)
}

// authenticate reads the token from "Authorization: Bearer <tok>" or the
// token query parameter and verifies it (verifyToken): a Levee token
// against the key ring, refusing one whose expiry lies further ahead than
// -token-max-lifetime, or a studio JWT against the JWKS. A refusal gives
// the reason counted in gate_token_refusals_total.
func (s *Server) authenticate(r *http.Request) (id, reason string, err error) {
	tok := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", tokenMissing, fmt.Errorf("%w: Authorization is not a Bearer token", apperr.ErrUnauthorized)
		}
		tok = strings.TrimSpace(rest)
	} else {
		tok = r.URL.Query().Get("token")
	}
	if tok == "" {
		return "", tokenMissing, fmt.Errorf("%w: missing token", apperr.ErrUnauthorized)
	}
	return s.verifyToken(tok)
}
