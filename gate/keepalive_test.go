package gate

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func TestSilentRule(t *testing.T) {
	const limit = 30 * time.Second
	s := int64(time.Second)
	for _, tc := range []struct {
		name                    string
		lastSeen, pingedAt, now int64
		want                    bool
	}{
		{"never pinged", 5 * s, 0, 1000 * s, false},
		{"answered its ping", 10 * s, 10 * s, 1000 * s, false},
		{"heard after the ping", 11 * s, 10 * s, 1000 * s, false},
		{"unanswered, within the limit", 5 * s, 10 * s, 40 * s, false},
		{"unanswered, past the limit", 5 * s, 10 * s, 40*s + 1, true},
	} {
		if got := silent(tc.lastSeen, tc.pingedAt, tc.now, limit); got != tc.want {
			t.Errorf("%s: silent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestKeepaliveSchedule(t *testing.T) {
	k := newKeepalive(20*time.Second, 10*time.Second) // the defaults
	if k.slots != 200 || k.step != 100*time.Millisecond || k.limit != 30*time.Second {
		t.Fatalf("slots %d step %v limit %v", k.slots, k.step, k.limit)
	}
	// A slot's deadline falls 300 rounds after its pings: checked one
	// round later, 301 rounds on, which is 101 slots further round.
	if k.check != 101 {
		t.Fatalf("check %d, want 101", k.check)
	}
	if k := newKeepalive(50*time.Millisecond, time.Second); k.slots != 1 || k.step != 50*time.Millisecond || k.check != 0 {
		t.Fatalf("short interval: slots %d step %v check %d", k.slots, k.step, k.check)
	}
	if k := newKeepalive(10*time.Minute, time.Second); k.slots != maxKeepaliveSlots || k.step != time.Second {
		t.Fatalf("long interval: slots %d step %v", k.slots, k.step)
	}
}

func TestConnSet(t *testing.T) {
	s := newConnSet(3)
	cs := make([]*conn, 7)
	for i := range cs {
		cs[i] = &conn{}
		s.add(cs[i])
	}
	for i, want := range []int{3, 2, 2} {
		if got := len(s.appendSlot(nil, i)); got != want {
			t.Fatalf("slot %d holds %d, want %d", i, got, want)
		}
	}
	s.remove(cs[0])
	s.remove(cs[0]) // twice: no effect
	s.remove(&conn{slotIdx: 5})
	s.remove(cs[6])
	if s.len() != 5 || len(s.appendAll(nil)) != 5 {
		t.Fatalf("len %d, all %d", s.len(), len(s.appendAll(nil)))
	}
	for _, c := range s.appendAll(nil) {
		if c == cs[0] || c == cs[6] {
			t.Fatal("a removed connection is still in the set")
		}
		if s.slots[c.slot][c.slotIdx] != c {
			t.Fatal("a connection's position is stale")
		}
	}
}

// kaGate starts a gate with the given keepalive settings and waits for its
// keepalive to tick.
func kaGate(t *testing.T, pingInterval, pongTimeout time.Duration) *testGate {
	t.Helper()
	g := startGate(t, func(c *Config) { c.PingInterval, c.PongTimeout = pingInterval, pongTimeout }, startFakeLogic(t))
	testwait.Until(t, "the keepalive ticker", g.ka.ticking.Load)
	return g
}

// kaRound advances the fake clock by d, which must reach the keepalive's
// next tick and not the one after, and waits for the round to finish.
func (g *testGate) kaRound(t *testing.T, d time.Duration) {
	t.Helper()
	n := g.ka.rounds.Load()
	g.clock.Advance(d)
	testwait.Until(t, "a keepalive round", func() bool { return g.ka.rounds.Load() > n })
}

func (g *testGate) kaDrops() float64 { return testutil.ToFloat64(g.m.keepalive.drops) }

// onlyConn is the gate's one connection, once the gate has finished
// writing to it: the client can read the welcome before the gate's login
// lets go of the connection's write lock, and a keepalive round then
// skips its ping (pings{skipped}), which would shift every deadline a
// test counts in rounds.
func (g *testGate) onlyConn(t *testing.T) *conn {
	t.Helper()
	cs := g.snapshot(nil)
	if len(cs) != 1 {
		t.Fatalf("%d connections, want 1", len(cs))
	}
	c := cs[0]
	testwait.Until(t, "the gate's writes to the connection to end", func() bool {
		if !c.wmu.TryLock() {
			return false
		}
		c.wmu.Unlock()
		return true
	})
	return c
}

// ponger is a test player that reads, and answers pings only while
// answering is on; each ping it gets is signalled on pinged.
type ponger struct {
	*client
	answering atomic.Bool
	pinged    chan struct{}
}

func newPonger(t *testing.T, g *testGate, player string) *ponger {
	c, _ := g.connect(t, player, wire.ProtoSubprotocol)
	p := &ponger{client: c, pinged: make(chan struct{}, 64)}
	c.ws.SetPingHandler(func(data string) error {
		select {
		case p.pinged <- struct{}{}:
		default:
		}
		if p.answering.Load() {
			return c.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(5*time.Second))
		}
		return nil
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, _, err := c.ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = c.ws.Close(); <-done })
	return p
}

func (p *ponger) waitPing(t *testing.T) {
	t.Helper()
	select {
	case <-p.pinged:
	case <-time.After(10 * time.Second):
		t.Fatal("no ping reached the player")
	}
}

func (p *ponger) pong(t *testing.T) {
	t.Helper()
	if err := p.ws.WriteControl(websocket.PongMessage, nil, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// waitHeard waits until the gate has read a sign of life from c since its
// last ping.
func waitHeard(t *testing.T, c *conn) {
	t.Helper()
	testwait.Until(t, "the gate to read the pong", func() bool { return c.lastSeen.Load() >= c.pingedAt.Load() })
}

// A pong that comes after the next ping went out, but within the pong
// timeout, keeps the player: the gate does not wait for it at a tick.
func TestLatePongKeepsThePlayer(t *testing.T) {
	const pi, pt = 150 * time.Millisecond, 300 * time.Millisecond // one slot: every round pings everyone
	g := kaGate(t, pi, pt)
	p := newPonger(t, g, "late")
	sc := g.onlyConn(t)

	g.kaRound(t, pi) // ping 1
	first := sc.pingedAt.Load()
	p.waitPing(t)
	g.kaRound(t, pi) // ping 2, the next tick: still no answer
	p.waitPing(t)
	if sc.pingedAt.Load() != first {
		t.Fatal("a second unanswered ping restarted the player's clock")
	}
	g.kaRound(t, pi) // 2 x ping interval after ping 1, pong timeout not yet over
	p.pong(t)        // late, but inside ping interval + pong timeout of ping 1
	waitHeard(t, sc)
	// From here the player answers every ping; it stays for many deadlines.
	p.answering.Store(true)
	for range 10 {
		g.kaRound(t, pi)
		waitHeard(t, sc)
	}
	if g.kaDrops() != 0 || testutil.ToFloat64(g.m.active) != 1 {
		t.Fatalf("dropped a player that answered: drops %v, active %v", g.kaDrops(), testutil.ToFloat64(g.m.active))
	}

	// Then it falls silent: dropped once ping interval + pong timeout pass
	// after the first ping it did not answer, and not before.
	p.answering.Store(false)
	lastSeen := time.Unix(0, sc.lastSeen.Load())
	var pinged time.Time
	for range 20 {
		g.kaRound(t, pi)
		if g.kaDrops() > 0 {
			break
		}
		if at := sc.pingedAt.Load(); at > sc.lastSeen.Load() && pinged.IsZero() {
			pinged = time.Unix(0, at)
		}
	}
	now := g.clock.Now()
	if g.kaDrops() != 1 {
		t.Fatal("the silent player was not dropped")
	}
	if now.Sub(pinged) <= pi+pt {
		t.Fatalf("dropped %v after its unanswered ping, before ping interval + pong timeout (%v)", now.Sub(pinged), pi+pt)
	}
	if bound := 2*pi + pt + 2*g.ka.step; now.Sub(lastSeen) > bound {
		t.Fatalf("dropped %v after its last pong, later than the bound %v", now.Sub(lastSeen), bound)
	}
	testwait.Until(t, "the dropped connection to end", func() bool { return testutil.ToFloat64(g.m.active) == 0 })
}

// A player that never answers, with the work spread over slots, is dropped
// within 2 x ping interval + pong timeout + 2 steps of connecting.
func TestSilentPlayerDroppedWithinBound(t *testing.T) {
	const pi, pt = time.Second, 500 * time.Millisecond
	g := kaGate(t, pi, pt)
	if g.ka.slots != 10 || g.ka.check == 0 {
		t.Fatalf("slots %d check %d: want the deadline checked apart from the pings", g.ka.slots, g.ka.check)
	}
	g.connect(t, "silent", wire.ProtoSubprotocol) // never reads again, so never pongs
	sc := g.onlyConn(t)
	connected := time.Unix(0, sc.lastSeen.Load())
	var pinged time.Time
	for range 40 {
		g.kaRound(t, g.ka.step)
		if g.kaDrops() > 0 {
			break
		}
		if at := sc.pingedAt.Load(); at != 0 && pinged.IsZero() {
			pinged = time.Unix(0, at)
		}
	}
	if g.kaDrops() != 1 {
		t.Fatal("the silent player was not dropped")
	}
	now := g.clock.Now()
	if now.Sub(pinged) <= pi+pt {
		t.Fatalf("dropped %v after its first ping, before ping interval + pong timeout", now.Sub(pinged))
	}
	if bound := 2*pi + pt + 2*g.ka.step; now.Sub(connected) > bound {
		t.Fatalf("dropped %v after connecting, later than the bound %v", now.Sub(connected), bound)
	}
}

// A keepalive round that starts late by L moves every deadline by L.
func TestLateKeepaliveMovesDeadlines(t *testing.T) {
	const pi, pt = 150 * time.Millisecond, 300 * time.Millisecond // one slot, step = pi
	const late = 140 * time.Millisecond                           // under a step, so the late round is one round
	g := kaGate(t, pi, pt)
	g.connect(t, "silent", wire.ProtoSubprotocol)
	sc := g.onlyConn(t)
	g.kaRound(t, pi) // the ping; deadline: pi + pt after it, at the 4th round from here
	pinged := sc.pingedAt.Load()
	g.kaRound(t, pi)
	g.kaRound(t, pi)
	// The round that would find the deadline reached starts late by L:
	// by the clock the player has been silent pi + pt + L since the ping,
	// but L was the gate's lateness, not the player's.
	g.kaRound(t, pi+late)
	if got := time.Duration(g.ka.excused.Load()); got != late {
		t.Fatalf("excused %v, want %v", got, late)
	}
	if got := testutil.ToFloat64(g.m.keepalive.excused); got != late.Seconds() {
		t.Fatalf("gate_keepalive_excused_seconds_total %v, want %v", got, late.Seconds())
	}
	if g.clock.Now().UnixNano()-pinged <= int64(pi+pt) {
		t.Fatal("test setup: the clock has not passed the old deadline")
	}
	if g.kaDrops() != 0 {
		t.Fatal("dropped a player for the gate's own lateness")
	}
	g.kaRound(t, pi) // the deadline, moved by L, has now passed too
	if g.kaDrops() != 1 {
		t.Fatal("the silent player was not dropped after the moved deadline")
	}
}

// The pings are spread: each round pings one slot's share, and each
// connection once per interval.
func TestPingsAreSpread(t *testing.T) {
	const pi, pt = time.Second, 500 * time.Millisecond // 10 slots
	g := kaGate(t, pi, pt)
	var ps []*ponger
	for i := range 30 {
		p := newPonger(t, g, fmt.Sprintf("p%d", i))
		p.answering.Store(true)
		ps = append(ps, p)
	}
	sent := func() float64 { return testutil.ToFloat64(g.m.keepalive.pings[pingSent]) }
	for round := range 2 * g.ka.slots {
		before := sent()
		g.kaRound(t, g.ka.step)
		if got := sent() - before; got != 3 {
			t.Fatalf("round %d sent %v pings, want 3 (30 connections over 10 slots)", round, got)
		}
		for _, c := range g.snapshot(nil) {
			waitHeard(t, c)
		}
	}
	for i, p := range ps {
		if n := len(p.pinged); n != 2 {
			t.Fatalf("player %d got %d pings in two intervals, want 2", i, n)
		}
	}
	if g.kaDrops() != 0 {
		t.Fatal("dropped players that answered")
	}
}

// Bytes from a player that wait unread in the socket (no reader is running:
// here, while logic answers its login) are a sign of life: the gate's own
// backlog never drops a player.
func TestUnreadBytesAreASignOfLife(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("unreadBytes asks the kernel with SIOCINQ, on Linux only")
	}
	const pi, pt = 150 * time.Millisecond, 300 * time.Millisecond
	logic := startFakeLogic(t)
	release := make(chan struct{})
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return defaultReply(req), nil
	})
	g := startGate(t, func(c *Config) { c.PingInterval, c.PongTimeout = pi, pt }, logic)
	testwait.Until(t, "the keepalive ticker", g.ka.ticking.Load)
	c := dialRaw(t, g.wsURL(g.tokenFor(t, "slow")), wire.ProtoSubprotocol, nil)
	select { // logging in: no reader runs until logic answers
	case <-logic.got:
	case <-time.After(10 * time.Second):
		t.Fatal("logic never saw the login")
	}
	sc := g.onlyConn(t)
	g.kaRound(t, pi) // the ping
	if err := c.ws.WriteControl(websocket.PongMessage, nil, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the pong to wait in the gate's socket", func() bool { return unreadBytes(sc.ws.NetConn()) > 0 })
	for range 6 { // 900 ms: twice the deadline
		g.kaRound(t, pi)
	}
	if g.kaDrops() != 0 {
		t.Fatal("dropped a player whose pong waited unread")
	}
	if testutil.ToFloat64(g.m.keepalive.unread) == 0 {
		t.Fatal("gate_keepalive_unread_reprieves_total did not count the reprieve")
	}
	close(release)
	if f := c.recv(); f.GetWelcome() == nil {
		t.Fatalf("want the welcome, got %v", f)
	}
}
