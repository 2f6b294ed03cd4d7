package gate

import "sync/atomic"

// handshake is one connection's start in progress, as the handshake cap
// (MaxHandshakes) and gate_handshakes_in_progress count it: from the
// upgrade request until the player is welcomed, refused or waiting in the
// line, and again from a release from the line until logic has answered
// the login. It is a value with one owner at a time: handleWS takes it,
// hands it to the connection's start (enterLine), and whoever finishes the
// handshake calls End. End is idempotent, so an owner may end it where the
// handshake is over and also defer End as the safety net of every other
// path.
type handshake struct {
	s    *Server
	done atomic.Bool
}

// beginHandshake counts a connection starting into h; false (and h
// untouched) when the handshake cap is on and MaxHandshakes are in
// progress already. h is the handler's own, on its stack, so that a
// refused upgrade allocates nothing; handOff moves the handshake to the
// connection's start.
func (s *Server) beginHandshake(h *handshake) bool {
	if s.cfg.handshakeCapOn() {
		limit := int64(s.cfg.MaxHandshakes)
		for {
			n := s.handshakes.Load()
			if n >= limit {
				return false
			}
			if s.handshakes.CompareAndSwap(n, n+1) {
				break
			}
		}
	} else {
		s.handshakes.Add(1)
	}
	h.s = s
	return true
}

// handOff moves a handshake that h holds to a new owner, for the
// connection's start: h is done (ending it does nothing) and the value
// returned ends it.
func (h *handshake) handOff() *handshake {
	next := &handshake{s: h.s}
	if !h.done.CompareAndSwap(false, true) {
		next.done.Store(true) // h had ended already: so has its successor
	}
	return next
}

// releaseHandshake counts the login of a player released from the line.
// It is not checked against the cap: the walker releases no more players
// than room() has handshakes free for.
func (s *Server) releaseHandshake() *handshake {
	s.handshakes.Add(1)
	return &handshake{s: s}
}

// End ends the handshake; calls after the first do nothing.
func (h *handshake) End() {
	if h.done.CompareAndSwap(false, true) {
		h.s.handshakes.Add(-1)
	}
}
