package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/client/internal/codec"
	"github.com/leveehq/levee/client/pacer"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// maxAbandoned bounds how many timed-out request ids a client remembers so
// that their late replies are told apart from unexpected ones.
const maxAbandoned = 1 << 16

// Client is one player's connection to a gate. Its methods are safe for
// concurrent use.
type Client struct {
	conn    *websocket.Conn
	codec   codec.Codec
	msgType int
	opts    Options
	log     *slog.Logger
	welcome *leveev2.Welcome // set by Dial before the Client is returned
	clk     clock.Clock
	pacer   *pacer.Pacer    // nil when Options.NoPacing
	budget  *backoff.Budget // nil when Options.NoRetry

	nextID atomic.Uint64
	bp     atomic.Pointer[leveev2.Backpressure]
	queue  atomic.Pointer[leveev2.QueueStatus] // the last admission-line status

	// Before the Welcome the reader hands the pushes (queue, admitted,
	// welcome, refusal) to Dial through pre, in order; Dial closes
	// dialQuit when it gives up, so the reader never blocks on pre.
	pre      chan *leveev2.ServerFrame
	dialQuit chan struct{}
	quitOnce sync.Once
	admitted *leveev2.Admitted // set by Dial before the Client is returned; nil if it did not wait
	line     *LineError        // set by Dial before the Client is returned when it waited with a ticket; Err wraps it

	wmu sync.Mutex // serialises frame writes

	mu        sync.Mutex
	pending   map[uint64]pendingCall
	abandoned map[uint64]string // timed-out calls' actions, by request id
	closing   bool              // Close was called
	err       error             // why the connection ended; set before done is closed

	done      chan struct{}
	closeOnce sync.Once

	sent, replies, late, unexpected                 atomic.Uint64
	requests, retries, budgetRefused, retryDeadline atomic.Uint64
	dialAttempts                                    uint64       // set by DialRetry before the Client is returned
	noticeRetry                                     atomic.Int64 // retry_after of the latest push error, ns
}

// Stats are a client's counters. They only grow, so the load test may sum
// them over clients.
type Stats struct {
	Sent       uint64 // request frames written, retries included
	Replies    uint64 // replies matched to a waiting call
	Late       uint64 // replies that came after their call gave up (ctx ended)
	Unexpected uint64 // replies whose request id matched nothing (duplicates, strays)

	Requests      uint64 // calls made (Do and the typed calls), retries not counted
	Retries       uint64 // attempts after the first (same request id): after a busy or outcome-unknown answer, and Resends
	BudgetRefused uint64 // retries the retry budget did not allow (the refusal was returned)
	RetryDeadline uint64 // retries not made because the wait would pass the ctx deadline

	PacerWaits  uint64        // requests that had to wait in the local pacing queue
	PacerWaited time.Duration // total time the released ones among them waited
	Evicted     uint64        // requests failed locally: evicted by a higher-priority one
	QueueFull   uint64        // requests failed locally: the pacing queue was full

	DialAttempts uint64 // dials it took to get this connection (1 for Dial)
}

// pendingCall is a call waiting for its reply: where to hand it, and its
// action (the JSON codec reads the reply as the action's reply message).
type pendingCall struct {
	ch     chan *leveev2.ServerFrame
	action string
}

// actionOf is the action of the request with id id still waiting for its
// reply, or abandoned by its caller, for the JSON codec; "" for none.
func (c *Client) actionOf(id uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pc, ok := c.pending[id]; ok {
		return pc.action
	}
	return c.abandoned[id]
}

// newClient wraps conn; opts has its defaults and is valid.
func newClient(conn *websocket.Conn, opts Options) *Client {
	c := &Client{
		clk:          opts.Clock,
		dialAttempts: 1,
		conn:         conn,
		codec:        codec.Codec{JSON: opts.JSON, Def: opts.def()},
		msgType:      websocket.BinaryMessage,
		opts:         opts,
		log:          opts.Logger,
		pre:          make(chan *leveev2.ServerFrame, preBuffer),
		dialQuit:     make(chan struct{}),
		pending:      map[uint64]pendingCall{},
		abandoned:    map[uint64]string{},
		done:         make(chan struct{}),
	}
	if opts.JSON {
		c.msgType = websocket.TextMessage
	}
	if !opts.NoPacing {
		c.pacer = pacer.New(opts.Pacer, opts.Clock)
	}
	if !opts.NoRetry {
		c.budget = opts.Budget
		if c.budget == nil {
			c.budget = backoff.NewBudget(backoff.DefaultBudgetConfig())
		}
	}
	c.nextID.Store(firstRequestID() - 1)
	conn.SetReadLimit(maxServerFrame)
	conn.SetPingHandler(c.answerPing)
	return c
}

// answerPing answers the gate's keepalive ping within the write timeout.
// gorilla's default handler allows 1 s, and a socket write that times out
// breaks the connection for good: a client starved of CPU for a second
// (launch day on a busy machine) would drop itself while the gate was
// willing to wait -pong-timeout. Like gorilla's handler it ignores a
// timeout (also the one of waiting for another write to finish): the
// reads go on, and a connection that is really broken fails its next write.
func (c *Client) answerPing(data string) error {
	err := c.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(c.opts.WriteTimeout))
	var ne net.Error
	if errors.Is(err, websocket.ErrCloseSent) || errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return err
}

// preBuffer is how many pushes before the Welcome the reader may be ahead
// of Dial.
const preBuffer = 16

// Welcome is what the gate said when the player was let in: the player's
// id, shard, state (the game's state message, encoded: decode it with
// State) and its version. Treat it as read-only.
func (c *Client) Welcome() *leveev2.Welcome { return c.welcome }

// Queue is the last QueueStatus the gate pushed (the player's place in its
// admission line), with the connection's ticket (the gate sends it in the
// first status only; the SDK keeps it in every later one), or nil if the
// player never waited. It is the status as pushed: the gate pushes when
// the place, the ETA, the mode or the rate changed noticeably, and
// otherwise seldom far back in the line (see Dial), so a caller that
// shows a live position may count it down at ReleaseRate players per
// second between pushes. Treat it as read-only.
func (c *Client) Queue() *leveev2.QueueStatus { return c.queue.Load() }

// Ticket is the latest ticket the gate gave this connection: the admission
// pass of its Admitted push once the player was let in from the line (a
// gate that has passes sends one), else the ticket of the last
// QueueStatus; "" if there was neither (let in at once). Present it as
// Options.Ticket to come back after the connection ends: a ticket keeps a
// place in line within the gate's grace period, a pass brings back a
// player who was in (the gate that let them in puts them in its priority
// lane within its grace; a restarted gate, or another gate of the
// deployment, lets them in at once during its return window). A ticket or
// pass the gate no longer honours joins the back of the line; one it
// refuses (expired, say), DialRetry and Reconnect drop and dial again
// without.
func (c *Client) Ticket() string {
	if p := c.admitted.GetTicket(); p != "" {
		return p
	}
	return c.queue.Load().GetTicket()
}

// Waited is how long the player waited in the gate's admission line, as
// the gate's Admitted push said; 0 if it did not wait.
func (c *Client) Waited() time.Duration {
	return time.Duration(c.admitted.GetWaitedMs()) * time.Millisecond
}

// PlayerID is the authenticated player's id.
func (c *Client) PlayerID() string { return c.welcome.GetPlayerId() }

// Backpressure returns the last backpressure hints the gate attached to a
// frame, or nil if none came yet. Treat it as read-only.
func (c *Client) Backpressure() *leveev2.Backpressure { return c.bp.Load() }

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	s := Stats{
		Sent: c.sent.Load(), Replies: c.replies.Load(), Late: c.late.Load(), Unexpected: c.unexpected.Load(),
		Requests: c.requests.Load(), Retries: c.retries.Load(),
		BudgetRefused: c.budgetRefused.Load(), RetryDeadline: c.retryDeadline.Load(),
		DialAttempts: c.dialAttempts,
	}
	if c.pacer != nil {
		ps := c.pacer.Stats()
		s.PacerWaits, s.PacerWaited, s.Evicted, s.QueueFull = ps.Queued, ps.Waited, ps.Evicted, ps.Full
	}
	return s
}

// PaceRate is the pacer's current drip rate in requests per second, which
// follows the server's backpressure; 0 when pacing is off.
func (c *Client) PaceRate() float64 {
	if c.pacer == nil {
		return 0
	}
	return c.pacer.Rate()
}

// Done is closed once the connection has ended and the reader goroutine
// has returned.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is nil while the connection is up; afterwards it says why it ended.
// It wraps ErrClosed and, when the server sent a close frame (or answered
// ours), a *CloseError with its code. When the player was let in from the
// gate's admission line it also wraps a *LineError (Admitted true) with
// the line ticket and the admission pass: Reconnect(…, c.Err()) presents
// the pass (else the ticket), and the gate lets a player who drops within
// its grace period after being let in (e.g. in the middle of a match) back
// in first, and a restarted gate lets them in at once.
func (c *Client) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err == nil || c.line == nil {
		return err
	}
	le := *c.line
	le.Err = err
	return &le
}

// roundTrip sends f once with request id id and waits for the reply. The
// retry and pacing layer (call.go) wraps it; a retry calls it again with
// the same id. sent reports whether f may have reached the server (a
// write was attempted), so that an error without a reply leaves its
// outcome unknown.
func (c *Client) roundTrip(ctx context.Context, f *leveev2.ClientFrame, id uint64) (out *leveev2.ServerFrame, sent bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	f.RequestId = id
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return nil, false, context.DeadlineExceeded
		}
		// The server gets the budget less a margin for its reply's way
		// back, so that a request it cannot finish in time (a frozen node
		// behind it) is answered DEADLINE_EXCEEDED before this call gives
		// up: a failure by the deadline, not a lost reply after it.
		left -= ReplyMargin(left)
		ms := uint64(max(left+time.Millisecond-1, time.Millisecond) / time.Millisecond)
		if ms > math.MaxUint32 {
			ms = math.MaxUint32
		}
		if f.TimeoutMs == 0 || uint64(f.TimeoutMs) > ms {
			f.TimeoutMs = uint32(ms)
		}
	}
	data, err := c.codec.EncodeClient(f)
	if err != nil {
		return nil, false, fmt.Errorf("client: encode: %w", err)
	}
	if len(data) > codec.MaxFrame {
		return nil, false, fmt.Errorf("%w: %d bytes, the gate takes at most %d", ErrFrameTooLarge, len(data), codec.MaxFrame)
	}

	ch := make(chan *leveev2.ServerFrame, 1)
	c.mu.Lock()
	ended := c.err != nil
	switch {
	case ended:
		err = c.err
	case c.closing:
		err = ErrClosed
	default:
		if _, dup := c.pending[id]; dup {
			err = fmt.Errorf("client: request id %d already in flight", id)
		} else {
			c.pending[id] = pendingCall{ch: ch, action: f.GetAction()}
		}
	}
	c.mu.Unlock()
	if ended {
		// The gate closed the connection before this was sent: with 1012,
		// the same SHUTTING_DOWN answer as for the calls it left waiting.
		return nil, false, c.endedErr()
	}
	if err != nil {
		return nil, false, err
	}

	if err := c.write(data); err != nil {
		c.forget(id)
		// A failed write leaves the connection unusable: end it so that
		// every pending call fails the same way.
		c.conn.Close()
		<-c.done
		return nil, true, fmt.Errorf("%w (write: %v)", c.endedErr(), err)
	}
	c.sent.Add(1)
	out, err = c.wait(ctx, id, ch)
	return out, true, err
}

// ReplyMargin is how much of a call's remaining budget left the SDK keeps
// for the reply's way back: the request's timeout_ms is left less this,
// 1/20 of it, at least 50 ms and at most 250 ms (never more than half).
func ReplyMargin(left time.Duration) time.Duration {
	m := min(max(left/20, minReplyMargin), 250*time.Millisecond)
	return min(m, left/2)
}

// minReplyMargin is ReplyMargin's least (unless half the budget is less).
const minReplyMargin = 50 * time.Millisecond

// MinRetryBudget is the least of a call's deadline that must be left after
// a retry's delay for the SDK to make the retry (Do, Send, Call): twice the
// smallest ReplyMargin, so that the server gets at least as long as the
// reply's way back.
const MinRetryBudget = 2 * minReplyMargin

func (c *Client) write(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout)); err != nil {
		return err
	}
	return c.conn.WriteMessage(c.msgType, data)
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) wait(ctx context.Context, id uint64, ch chan *leveev2.ServerFrame) (*leveev2.ServerFrame, error) {
	select {
	case f := <-ch:
		return reply(f)
	case <-ctx.Done():
		c.mu.Lock()
		if pc, ok := c.pending[id]; ok && c.err == nil {
			delete(c.pending, id)
			if len(c.abandoned) < maxAbandoned {
				c.abandoned[id] = pc.action
			}
			c.mu.Unlock()
			return nil, ctx.Err()
		}
		ended := c.err != nil
		c.mu.Unlock()
		if !ended {
			// The reader took the entry and is handing the reply over.
			return reply(<-ch)
		}
		select {
		case f := <-ch:
			return reply(f)
		default:
			return nil, c.endedErr()
		}
	case <-c.done:
		select {
		case f := <-ch:
			return reply(f)
		default:
			return nil, c.endedErr()
		}
	}
}

// endedErr is the error of a call still waiting when the connection
// ended: the connection's, or, when the gate closed it with 1012 (Service
// Restart: a gate that stops answers every request it has read, then
// closes), a SHUTTING_DOWN answer in the gate's name, so that the request
// ends with a typed answer (outcome unknown, as SHUTTING_DOWN always is:
// resend it on the next connection) instead of none.
func (c *Client) endedErr() error {
	err := c.Err()
	var ce *CloseError
	if errors.As(err, &ce) && ce.Code == websocket.CloseServiceRestart {
		return fmt.Errorf("%w (%w)", &Error{Code: leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN,
			Message: "server restarting: not answered before the connection closed", RetryAfter: ce.RetryAfter}, err)
	}
	return err
}

func reply(f *leveev2.ServerFrame) (*leveev2.ServerFrame, error) {
	if e := f.GetError(); e != nil {
		return f, fromProto(e)
	}
	return f, nil
}

// readLoop is the client's one reader. It ends when the connection does.
// Until the Welcome (or a refusal) it hands the pushes to Dial in order.
func (c *Client) readLoop() {
	var cause error
	welcomed := false
	for {
		_, data, err := c.conn.ReadMessage()
		if err != nil {
			cause = err
			break
		}
		f, err := c.codec.DecodeServer(data, c.actionOf)
		if err != nil {
			cause = fmt.Errorf("%w: %w", ErrProtocol, err)
			msg := websocket.FormatCloseMessage(websocket.CloseProtocolError, "malformed frame")
			_ = c.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			break
		}
		if bp := f.GetBackpressure(); bp != nil {
			c.bp.Store(bp)
		}
		c.feedPressure(f)
		if f.GetRequestId() == 0 {
			if q := f.GetQueue(); q != nil {
				c.keepTicket(q)
				c.queue.Store(q)
			}
			if !welcomed && (f.GetWelcome() != nil || f.GetError() != nil || f.GetQueue() != nil || f.GetAdmitted() != nil) {
				welcomed = f.GetWelcome() != nil || f.GetError() != nil
				select {
				case c.pre <- f:
				case <-c.dialQuit:
				}
			} else if e := f.GetError(); e != nil {
				c.noticeRetry.Store(int64(time.Duration(e.GetRetryAfterMs()) * time.Millisecond))
				c.log.Warn("gate notice", "code", CodeName(e.GetCode()), "message", e.GetMessage())
			}
			continue
		}
		c.deliver(f)
	}
	c.finish(cause)
}

// keepTicket gives q, a status just read (not yet shared), the ticket of
// the last one when it has none: the gate sends the ticket in a
// connection's first status and again only when it changes.
func (c *Client) keepTicket(q *leveev2.QueueStatus) {
	if q.GetTicket() == "" {
		q.Ticket = c.queue.Load().GetTicket()
	}
}

func (c *Client) deliver(f *leveev2.ServerFrame) {
	id := f.GetRequestId()
	c.mu.Lock()
	pc, ok := c.pending[id]
	ch := pc.ch
	if ok {
		delete(c.pending, id)
	} else if _, gone := c.abandoned[id]; gone {
		delete(c.abandoned, id)
		c.late.Add(1)
	} else {
		c.unexpected.Add(1)
	}
	c.mu.Unlock()
	if ok {
		c.replies.Add(1)
		ch <- f // buffered, and only this send ever happens on ch
	} else {
		c.log.Debug("reply dropped", "request_id", id)
	}
}

// finish records why the connection ended, releases it and wakes every
// waiting call.
func (c *Client) finish(cause error) {
	var err error
	var wce *websocket.CloseError
	switch {
	case errors.As(cause, &wce):
		ce := &CloseError{Code: wce.Code, Text: wce.Text, RetryAfter: time.Duration(c.noticeRetry.Load())}
		if ce.Code == apperr.CloseReplaced {
			err = fmt.Errorf("%w: %w: %w", ErrClosed, ErrReplaced, ce)
		} else {
			err = fmt.Errorf("%w: %w", ErrClosed, ce)
		}
	case errors.Is(cause, ErrProtocol):
		err = fmt.Errorf("%w: %w", ErrClosed, cause)
	default:
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if closing {
			err = ErrClosed
		} else {
			err = fmt.Errorf("%w: %w", ErrClosed, cause)
		}
	}
	c.conn.Close()
	c.mu.Lock()
	c.err = err
	n := len(c.pending)
	c.mu.Unlock()
	c.log.Debug("connection ended", "err", err, "pending", n)
	close(c.done)
}

// Close closes the connection cleanly: it sends a close frame (1000), waits
// a little for the server's answer, then releases the connection. Pending
// calls fail with an error wrapping ErrClosed. Close waits for the reader
// goroutine to end; calling it again does nothing.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		select {
		case <-c.done:
			return
		default:
		}
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
		if err := c.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(c.opts.CloseTimeout)); err == nil {
			t := time.NewTimer(c.opts.CloseTimeout)
			select {
			case <-c.done:
			case <-t.C:
			}
			t.Stop()
		}
		c.conn.Close()
		<-c.done
	})
	return nil
}

// quitDial tells the reader that Dial has given up (it may be called more
// than once).
func (c *Client) quitDial() { c.quitOnce.Do(func() { close(c.dialQuit) }) }

// abort drops the connection without a close handshake (used by Dial).
func (c *Client) abort() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.conn.Close()
	<-c.done
}
