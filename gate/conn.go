package gate

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
	"github.com/leveehq/levee/queue"
)

// conn is one player's WebSocket. It has one goroutine at a time: serve
// while the player logs in, then a fresh reader (readLoop); each request
// runs in a short-lived goroutine of its own. Writes are serialized by wmu.
type conn struct {
	// lastSeen is the last sign of life from the player (a pong, a frame);
	// pingedAt is when the first ping after it was sent, if one was. Both
	// are liveness times (Server.aliveNow); see keepalive.go.
	lastSeen, pingedAt atomic.Int64
	slot, slotIdx      int32 // where the connection is in Server.conns
	s                  *Server
	ws                 *websocket.Conn
	codec              *wire.Codec // one of the server's, by subprotocol
	msgType            int
	playerID           string      // from the token
	shard              int         // the player's logic shard
	bucket             tokenBucket // the request rate limit; used by the reader only
	addrKey            netip.Addr  // the address bucket counting this connection (limits.go); zero if none

	// ctx is cancelled when the connection ends, so work for a player who
	// has gone is dropped. It is made (by startContext) only when the
	// player starts logging in: a waiting player has none, which saves a
	// context and its entry in the parent's children per waiting player.
	ctx    context.Context
	cancel context.CancelFunc // under dmu
	ended  bool               // under dmu: finish has run

	wmu      sync.Mutex // serializes data frames
	dmu      sync.Mutex // guards closing, cancel and ended
	closing  bool       // under dmu: the server has sent or is sending a close frame
	inflight atomic.Int32
	// One player, one place (replace.go): pending counts the frames being
	// answered (read, not yet replied to) and the login in progress;
	// replaced is set when a newer connection of the player replaced this
	// one, and drained is closed when pending falls to 0 after that.
	pending  int32         // under dmu
	replaced atomic.Bool   // set under dmu
	drained  chan struct{} // under dmu

	// The admission line: lineState is lineIn once admitted; ticket is the
	// place in line (set before the reader starts); pushed, under wmu, is
	// what the last QueueStatus said, for the walker's push rule (the
	// ticket token goes out in the first status only, so it is not kept).
	// pushed is 12 bytes.
	lineState atomic.Uint32
	pushed    pushMark
	ticket    queue.TicketID
}

// startContext gives the connection its context, when the player starts
// logging in; false if the connection has ended already.
func (c *conn) startContext() bool {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.ended {
		return false
	}
	c.ctx, c.cancel = context.WithCancel(c.s.baseCtx)
	return true
}

// endContext cancels the connection's context, if it has one, and keeps
// any from being made.
func (c *conn) endContext() {
	c.dmu.Lock()
	c.ended = true
	cancel := c.cancel
	c.dmu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// serve owns a connection let in at once (or on reconnecting, with
// admitted to push first) until the player is logged in, then hands it to
// a fresh reader goroutine: the login's gRPC call grows a goroutine's
// stack, and an idle connection should not keep that stack. No reader runs
// during the login, so a refused player's close frame is read here.
func (c *conn) serve(hs *handshake, admitted *leveev2.ServerFrame) {
	c.prepareReads()
	if !c.login(hs, admitted, false) {
		c.awaitClose()
		c.finish()
		return
	}
	go func() {
		defer c.finish()
		c.readLoop()
	}()
}

// prepareReads sets the read limit and the pong handler; it is called
// once, before the first read. Not inlined: in its caller's frame, which
// stays on a waiting reader's stack for good, it would push that stack past
// 2 KiB (measured: 4 KiB per waiting player).
//
//go:noinline
func (c *conn) prepareReads() {
	c.ws.SetReadLimit(int64(c.s.cfg.MaxFrame))
	// No read deadline: the keepalive drops a silent player (keepalive.go).
	// The pong handler runs deep inside gorilla's read, so it only notes
	// the liveness time (Server.aliveNow), written out here: one more call
	// frame down there doubles every waiting reader's stack to 4 KiB.
	c.ws.SetPongHandler(func(string) error {
		c.lastSeen.Store(c.s.clock.Now().UnixNano() - c.s.ka.excused.Load())
		return nil
	})
}

// login is the one login flow, for a player let in at once (serve) and
// for one released from the line (admitFromLine): it pushes admitted if
// not nil, asks the player's logic instance for the player and pushes the
// welcome. It owns hs and ends it on every path, at the latest when logic
// has answered. A refusal (the gate stopping, logic refusing) is the typed
// error and a close frame; the connection's reader sees the player's close.
// It reports whether the player is in. inFlight says the caller has
// counted the login as a request in flight already (beginRequest), which
// login then ends.
func (c *conn) login(hs *handshake, admitted *leveev2.ServerFrame, inFlight bool) bool {
	defer hs.End()
	if !c.startContext() {
		if inFlight {
			c.s.endRequest()
		}
		return false // the player has gone
	}
	if !c.beginPending() {
		if inFlight {
			c.s.endRequest()
		}
		return false // replaced, or closing
	}
	defer c.endPending()
	if !inFlight && !c.s.beginRequest() {
		hs.End()
		c.s.m.connections.WithLabelValues(resultShuttingDown).Inc()
		c.closeWith(apperr.Reply(apperr.ErrShuttingDown, shuttingDownRetryAfter),
			apperr.LoginCloseCode(leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN), "server restarting")
		return false
	}
	defer c.s.endRequest()
	if admitted != nil && c.send(admitted) != nil {
		return false
	}
	f, ok := c.callLogin(hs)
	if !ok {
		c.closeWith(f.GetError(), apperr.LoginCloseCode(f.GetError().GetCode()), "login failed")
		return false
	}
	// In before the welcome goes out, so a request the player sends on
	// seeing it is never answered NOT_ADMITTED.
	c.lineState.Store(lineIn)
	return c.send(f) == nil
}

// callLogin calls logic's login and ends the handshake. It returns the
// welcome frame, or (ok false) the refusal to send before closing.
func (c *conn) callLogin(hs *handshake) (f *leveev2.ServerFrame, ok bool) {
	start := time.Now()
	req := &leveev2.LogicRequest{PlayerId: c.playerID, Kind: &leveev2.LogicRequest_Login{Login: &leveev2.LoginRequest{}}}
	f = c.s.do(c.ctx, c.shard, req, loginCriticality, kindOther, c.s.cfg.RequestTimeout)
	hs.End() // the handshake ends with logic's answer, whatever it is
	c.s.observe(actionLogin, start, f)
	if e := f.GetError(); e != nil || f.GetWelcome() == nil {
		if e == nil {
			f.Payload = &leveev2.ServerFrame_Error{Error: apperr.Reply(errNoWelcome, 0)}
		}
		c.s.m.connections.WithLabelValues(resultLogicRefused).Inc()
		c.s.log.Debug("login refused", "player", c.playerID, "code", f.GetError().GetCode().String())
		return f, false
	}
	c.s.m.connections.WithLabelValues(resultAccepted).Inc()
	return f, true
}

var errNoWelcome = errors.New("internal error: logic answered login without a welcome")

// readLoop reads frames until the socket fails or closes.
func (c *conn) readLoop() {
	for {
		// ReadMessage, split so that the wait stays shallow (see readFrame).
		_, r, err := c.ws.NextReader()
		var data []byte
		if err == nil {
			data, err = readFrame(r)
		}
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				// gorilla has sent 1009 (Message Too Big); take the rest of
				// the player's frame and close frame off the wire before
				// closing, so the close frame is not lost to a reset.
				c.markClosing()
				c.drainRaw()
			}
			return
		}
		if !c.beginPending() {
			continue // the server is closing; wait for the player's close frame
		}
		if !c.handleFrame(data) {
			c.endPending()
		}
	}
}

// readFrame copies a frame's payload. It is websocket.Conn.ReadMessage's
// second half, kept out of readLoop's frame: measured, a waiting player's
// reader blocks in NextReader with its stack at just under 2 KiB, and one
// more frame on the way down (ReadMessage's, or a helper's) doubles every
// waiting player's stack to 4 KiB for good.
//
//go:noinline
func readFrame(r io.Reader) ([]byte, error) { return io.ReadAll(r) }

// finish releases everything the connection holds.
func (c *conn) finish() {
	_ = c.ws.Close()
	c.endContext()
	c.s.line.leave(c, c.s.clock.Now())
	c.s.untrack(c)
}

// send writes one frame, serialized with the connection's other writes and
// bounded by the write timeout. A frame that cannot be encoded is replaced
// by an INTERNAL error for the same request id, so the reply still goes out.
func (c *conn) send(f *leveev2.ServerFrame) error { return c.sendReply(f, "") }

// sendReply is send for a frame that answers a request for action (whose
// reply message, on JSON, is converted with the action's reply type).
func (c *conn) sendReply(f *leveev2.ServerFrame, action string) error {
	data, err := c.encode(f, action)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(data, c.s.cfg.WriteTimeout)
}

// encode encodes f in the connection's codec; a frame that cannot be
// encoded becomes an INTERNAL error for the same request id.
func (c *conn) encode(f *leveev2.ServerFrame, action string) ([]byte, error) {
	data, err := c.codec.EncodeServer(f, action)
	if err != nil {
		c.s.log.Error("encoding a reply", "err", err, "request_id", f.GetRequestId(), "action", action)
		data, err = c.codec.EncodeServer(&leveev2.ServerFrame{
			RequestId: f.GetRequestId(),
			Payload:   &leveev2.ServerFrame_Error{Error: apperr.Reply(apperr.ErrInternal, 0)},
		}, "")
	}
	return data, err
}

// writeLocked writes one data frame within timeout; wmu must be held.
func (c *conn) writeLocked(data []byte, timeout time.Duration) error {
	_ = c.ws.SetWriteDeadline(time.Now().Add(timeout))
	err := c.ws.WriteMessage(c.msgType, data)
	if err != nil && !errors.Is(err, websocket.ErrCloseSent) {
		// A failed or timed-out write leaves the socket unusable: close it
		// so the reader ends the connection.
		_ = c.ws.NetConn().Close()
	}
	return err
}

// refuse sends a typed error frame, then closes the socket with code and
// waits briefly for the player's close frame; for the goroutine that owns
// the connection's reads.
func (c *conn) refuse(e *leveev2.Error, code int, reason string) {
	c.closeWith(e, code, reason)
	c.awaitClose()
}

// closeWith sends a typed error frame (request id 0) and a close frame
// with code, from any goroutine; the reader ends when the player's close
// frame arrives or after closeWait.
func (c *conn) closeWith(e *leveev2.Error, code int, reason string) {
	_ = c.send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: e}})
	c.closeFromServer(code, reason)
}

// awaitClose reads and discards until the socket fails: the player's close
// frame, or the deadline a close frame sent set (closeWait), or a socket a
// failed write closed.
func (c *conn) awaitClose() {
	for {
		if _, _, err := c.ws.NextReader(); err != nil {
			return
		}
	}
}

// closeFromServer sends a close frame from outside the reader goroutine (at
// shutdown); the reader ends when the player's close frame arrives or after
// closeWait.
func (c *conn) closeFromServer(code int, reason string) {
	if !c.markClosing() {
		return
	}
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(c.s.cfg.WriteTimeout))
	_ = c.ws.SetReadDeadline(time.Now().Add(closeWait))
}

// markClosing claims the right to close; false if it was already claimed.
func (c *conn) markClosing() bool {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.closing {
		return false
	}
	c.closing = true
	return true
}

func (c *conn) isClosing() bool {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	return c.closing
}

// lingerLimit bounds what drainRaw discards.
const lingerLimit = 64 << 10

// drainRaw discards what the player still sends, up to lingerLimit bytes or
// closeWait, once gorilla's reader can no longer be used.
func (c *conn) drainRaw() {
	nc := c.ws.NetConn()
	_ = nc.SetReadDeadline(time.Now().Add(closeWait))
	_, _ = io.Copy(io.Discard, io.LimitReader(nc, lingerLimit))
}
