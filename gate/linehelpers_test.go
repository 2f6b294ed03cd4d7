package gate

import (
	"net/url"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
	"github.com/leveehq/levee/queue"
)

// lineGate starts a gate whose line is in mode, releasing rate players per
// interval, with the fake clock driving the walker.
func lineGate(t *testing.T, mode string, rate int, interval time.Duration, mod func(*Config), logics ...*fakeLogic) *testGate {
	t.Helper()
	if len(logics) == 0 {
		logics = []*fakeLogic{startFakeLogic(t)}
	}
	g := startGate(t, func(c *Config) {
		c.LineMode, c.LineRate, c.LineInterval = mode, rate, interval
		if mod != nil {
			mod(c)
		}
	}, logics...)
	testwait.Until(t, "the walker's ticker", g.line.ticking.Load)
	return g
}

// advance moves the fake clock by d, one walker tick at a time, and waits
// after each tick until the walker has finished its step: releases and
// pushes of that instant are written when it returns.
func (g *testGate) advance(t *testing.T, d time.Duration) {
	t.Helper()
	if d%lineTick != 0 {
		t.Fatalf("advance(%v): not a multiple of the walker's tick %v", d, lineTick)
	}
	for range d / lineTick {
		g.quiesce()
		g.clock.Advance(lineTick)
		now := g.clock.Now().UnixNano()
		testwait.Until(t, "the walker's step", func() bool { return g.line.stepped.Load() >= now })
	}
}

// quiesce waits until no write to any player is in progress. A reply the
// test has read may still hold its connection's write lock for a moment,
// and the walker skips a push to a connection being written to.
func (g *testGate) quiesce() {
	for _, c := range g.snapshot(nil) {
		c.wmu.Lock()
		//lint:ignore SA2001 an empty critical section: waiting for the writer is the point
		c.wmu.Unlock()
	}
}

// lineURL is the WebSocket URL with a player token and, if not empty, a
// ticket.
func (g *testGate) lineURL(t *testing.T, player, ticket string) string {
	t.Helper()
	u := url.URL{Scheme: "ws", Host: g.Addr().String(), Path: "/ws"}
	q := url.Values{"token": {g.tokenFor(t, player)}}
	if ticket != "" {
		q.Set("ticket", ticket)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// join dials as player (with ticket, if any) and returns the client and
// its first QueueStatus.
func (g *testGate) join(t *testing.T, player, ticket string) (*client, *leveev2.QueueStatus) {
	t.Helper()
	c := dialRaw(t, g.lineURL(t, player, ticket), wire.ProtoSubprotocol, nil)
	return c, c.recvStatus()
}

// recvStatus reads a frame that must be a QueueStatus push.
func (c *client) recvStatus() *leveev2.QueueStatus {
	c.t.Helper()
	f := c.recv()
	if f.GetRequestId() != 0 || f.GetQueue() == nil {
		c.t.Fatalf("want a QueueStatus push, got %v", f)
	}
	return f.GetQueue()
}

// recvAdmitted reads Admitted then the Welcome and returns the wait.
func (c *client) recvAdmitted(player string) time.Duration {
	c.t.Helper()
	f := c.recv()
	if f.GetAdmitted() == nil {
		c.t.Fatalf("%s: want Admitted, got %v", player, f)
	}
	if w := c.recv(); w.GetWelcome().GetPlayerId() != player {
		c.t.Fatalf("%s: want the welcome after Admitted, got %v", player, w)
	}
	return time.Duration(f.GetAdmitted().GetWaitedMs()) * time.Millisecond
}

// probe sends a request from a waiting player: the very next frame must be
// its NOT_ADMITTED reply, which proves no push was queued before it.
func (c *client) probe(id uint64) *leveev2.Error {
	c.t.Helper()
	c.send(profileFrame(id))
	return wantError(c.t, c.recv(), id, leveev2.ErrorCode_ERROR_CODE_NOT_ADMITTED)
}

// refused dials and expects a typed refusal with code, then close.
func (g *testGate) refused(t *testing.T, rawURL string, code leveev2.ErrorCode, closeCode int) *leveev2.Error {
	t.Helper()
	c := dialRaw(t, rawURL, wire.ProtoSubprotocol, nil)
	e := wantError(t, c.recv(), 0, code)
	if got := c.recvClose(); got != closeCode {
		t.Fatalf("close code %d, want %d (error %v)", got, closeCode, e)
	}
	return e
}

// setLine applies an operator's change as the admin API does.
func (g *testGate) setLine(t *testing.T, fields map[string]string) {
	t.Helper()
	g.quiesce()
	ch, err := parseLineChange(fields)
	if err == nil {
		_, _, err = g.line.apply(ch, g.clock.Now())
	}
	if err != nil {
		t.Fatal(err)
	}
	g.waitPoked(t)
}

// waitPoked waits until the walker has handled every poke sent so far (an
// operator's change is released and pushed by then).
func (g *testGate) waitPoked(t *testing.T) {
	t.Helper()
	testwait.Until(t, "the walker to handle the change", func() bool { return g.line.kicked.Load() >= g.line.pokes.Load() })
}

func (g *testGate) stats() queue.Stats { return g.line.q.Stats(g.clock.Now()) }

// closeClient closes a player's socket and waits until the gate has seen
// it (the line counts the player away).
func (g *testGate) closeClient(t *testing.T, c *client, away int) {
	t.Helper()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = c.ws.Close()
	testwait.Until(t, "the player to be away", func() bool { return g.stats().Away == away })
}
