package gate

import (
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/apperr"
)

// One player, one place. A gate holds at most one live connection per
// player id: the line keeps the player's connections by id (line.players),
// and a connection that enters for a player who already has one replaces
// it (line.enter): it takes over the older one's place in the line, or, if
// the older one was let in, it is let in at once. The older connection is
// then closed with apperr.CloseReplaced (4001, "replaced by a newer
// session") once every request it had read is answered (bounded by
// replaceDrain): frames it reads meanwhile are answered FORBIDDEN
// (apperr.ErrReplaced), frames after the close frame are not read.

// beginPending counts a frame (or the login) being answered; false once the
// connection is closing, when nothing more is answered on it.
func (c *conn) beginPending() bool {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.closing {
		return false
	}
	c.pending++
	return true
}

// endPending ends what beginPending counted, after its reply was written.
// The last one of a replaced connection claims its close (closing) and
// wakes the replacer, so no reply can follow the close frame.
func (c *conn) endPending() {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.pending--
	if c.pending == 0 && c.drained != nil {
		c.closing = true
		close(c.drained)
		c.drained = nil
	}
}

// replaceDrain bounds how long a replaced connection's requests in flight
// have to be answered before it is closed anyway: the request timeout
// (every logic call ends by then) and a write.
func (s *Server) replaceDrain() time.Duration { return s.cfg.RequestTimeout + s.cfg.WriteTimeout }

// replace closes old, which a newer connection of the same player
// replaced, off the caller's goroutine: at once if nothing is pending, else
// once the pending replies are written or replaceDrain has passed.
func (s *Server) replace(old *conn) {
	s.m.replaced.Inc()
	old.dmu.Lock()
	if old.replaced.Load() || old.closing {
		old.dmu.Unlock()
		return // replaced or closing already: its close is on its way
	}
	old.replaced.Store(true)
	var drained chan struct{}
	if old.pending == 0 {
		old.closing = true
	} else {
		drained = make(chan struct{})
		old.drained = drained
	}
	old.dmu.Unlock()
	if drained == nil {
		old.sendReplacedClose()
		return
	}
	s.replaceWG.Go(func() { // ends within replaceDrain, at the latest
		t := s.clock.NewTimer(s.replaceDrain())
		defer t.Stop()
		select {
		case <-drained: // the last reply claimed the close
		case <-t.C():
			if !old.markClosing() {
				return
			}
			s.log.Warn("replaced connection's requests did not finish in time; closing it", "player", old.playerID)
		}
		old.sendReplacedClose()
	})
}

// sendReplacedClose writes the 4001 close frame (closing is claimed) and
// lets the reader end on the player's answer or after closeWait.
func (c *conn) sendReplacedClose() {
	_ = c.ws.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(apperr.CloseReplaced, apperr.CloseReplacedText), time.Now().Add(c.s.cfg.WriteTimeout))
	_ = c.ws.SetReadDeadline(time.Now().Add(closeWait))
}
