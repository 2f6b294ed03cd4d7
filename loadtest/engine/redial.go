package engine

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// redialWatch follows one player's connections for the gate-restart
// figures (report.RedialFigures): when the server ended one of them (a
// close such as 1012, or any other end the player did not ask for), how
// long after it the player's first redial went, and whether a player who
// was waiting in line came back no further back than it was.
//
// It sees every dial attempt and every connection's end through the
// player's Dialer (watchDialer), the line positions through OnQueue, and
// the rest from the connect loop: a playing connection lost (lost), a
// connect that gave up (settled), the player admitted (admitted), its
// life over (finish). A waiting player's connection ended by the server
// is noticed when the SDK dials again after it, inside DialRetry or
// Reconnect: the player's own ends (a drop, its life over) stop the SDK's
// redials instead.
type redialWatch struct {
	clk clock.Clock
	rec *record.Recorder

	mu      sync.Mutex
	connEnd time.Time // when the last connection ended; zero: open, or none yet
	inLine  bool      // the last connection was told a place and not admitted
	pos     uint64    // that place
	closed  time.Time // a server close whose first redial has not gone yet; zero: none
	judge   bool      // a close in line whose new place is not known yet
	oldPos  uint64    // the place it had
	dials   int       // dial attempts so far
}

func newRedialWatch(clk clock.Clock, rec *record.Recorder) *redialWatch {
	return &redialWatch{clk: clk, rec: rec}
}

// dialed notes a dial attempt: the first after a server close is its
// first redial.
func (w *redialWatch) dialed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clk.Now()
	w.dials++
	if w.inLine && !w.connEnd.IsZero() {
		// The SDK dials again after the server ended a waiting
		// connection.
		w.serverClose(w.connEnd, true)
	}
	if !w.closed.IsZero() {
		off := max(now.Sub(w.closed), 0)
		w.rec.Add(report.CounterRedialAfter+strconv.Itoa(int(off/time.Second)), 1)
		w.rec.Observe(report.HistRedialAfter, off)
		w.closed = time.Time{}
	}
	w.inLine, w.connEnd = false, time.Time{}
}

// dialCount is the dial attempts so far.
func (w *redialWatch) dialCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dials
}

// connClosed notes that the connection the last dial made has ended.
func (w *redialWatch) connClosed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.connEnd = w.clk.Now()
}

// status notes a QueueStatus: the player's place in line. The first after
// a close in line says whether it got its place back.
func (w *redialWatch) status(q *leveev2.QueueStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inLine, w.pos = true, q.GetPosition()
	if w.judge {
		w.judge = false
		if w.pos <= w.oldPos {
			w.rec.Add(report.CounterPlaceKept, 1)
		} else {
			w.rec.Add(report.CounterPlaceLost, 1)
		}
	}
}

// admitted notes that a connect got the player in; one closed in line
// and let in without a new place kept its place.
func (w *redialWatch) admitted() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inLine = false
	if w.judge {
		w.judge = false
		w.rec.Add(report.CounterPlaceKept, 1)
	}
}

// lost notes that the server ended the player's connection while it
// played (it did not close it itself).
func (w *redialWatch) lost() {
	w.mu.Lock()
	defer w.mu.Unlock()
	at := w.connEnd
	if at.IsZero() {
		at = w.clk.Now()
	}
	w.serverClose(at, false)
	w.inLine = false
}

// settled notes that a connect returned an error: the SDK dials no more.
// own says the player ended it (a drop, its life over); otherwise a
// waiting connection that ended was ended by the server, and no redial
// followed it.
func (w *redialWatch) settled(own bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !own && w.inLine && !w.connEnd.IsZero() {
		w.serverClose(w.connEnd, true)
	}
	w.inLine = false
}

// finish notes the end of the player's life: a close not redialed after,
// a place in line not told again.
func (w *redialWatch) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed.IsZero() {
		w.rec.Add(report.CounterNoRedial, 1)
		w.closed = time.Time{}
	}
	if w.judge {
		w.judge = false
		w.rec.Add(report.CounterPlaceUnknown, 1)
	}
}

// serverClose counts a connection the server ended at at; w.mu is held.
func (w *redialWatch) serverClose(at time.Time, inLine bool) {
	w.rec.Add(report.CounterServerCloses, 1)
	if !w.closed.IsZero() {
		// An earlier close was never redialed after.
		w.rec.Add(report.CounterNoRedial, 1)
	}
	w.closed = at
	if inLine {
		w.rec.Add(report.CounterClosesInLine, 1)
		if w.judge { // closed again before it was told a place
			w.rec.Add(report.CounterPlaceUnknown, 1)
		}
		w.judge, w.oldPos = true, w.pos
	}
	w.inLine = false
}

// watchDialer is base (nil: websocket.DefaultDialer) with its network
// dial wrapped so that w sees every dial attempt and every connection's
// end.
func (w *redialWatch) watchDialer(base *websocket.Dialer) *websocket.Dialer {
	if base == nil {
		base = websocket.DefaultDialer
	}
	d := *base
	next := d.NetDialContext
	if next == nil && d.NetDial != nil {
		nd := d.NetDial
		next = func(_ context.Context, network, addr string) (net.Conn, error) { return nd(network, addr) }
	}
	if next == nil {
		var nd net.Dialer
		next = nd.DialContext
	}
	d.NetDial = nil
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		w.dialed()
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &watchedConn{Conn: c, w: w}, nil
	}
	return &d
}

// watchedConn tells its watch when it is closed (the SDK closes it when
// the connection ends, whoever ended it).
type watchedConn struct {
	net.Conn
	w    *redialWatch
	once sync.Once
}

func (c *watchedConn) Close() error {
	c.once.Do(c.w.connClosed)
	return c.Conn.Close()
}
