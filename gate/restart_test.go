package gate

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// A gate with players in line is stopped (they are closed with 1012) and a
// new one starts on the same address with the same secret. The players come
// back with their tickets, in a scrambled order, and get their places in
// the order they first joined, ahead of a player who joined after the
// restart; a ticket already taken back is in use; a ticket that comes
// back after the return window joins at the back.
func TestRestartedGateGivesPlacesBack(t *testing.T) {
	logic := startFakeLogic(t)
	g1 := lineGate(t, "queueing", 1, time.Second, nil, logic)
	players := []string{"p0", "p1", "p2", "p3", "slow"}
	tickets := map[string]string{}
	var clients []*client
	for _, p := range players {
		c, st := g1.join(t, p, "")
		tickets[p] = st.GetTicket()
		clients = append(clients, c)
		g1.advance(t, lineTick) // distinct join times
	}
	g1.cancel()
	for i, c := range clients {
		if code := c.recvClose(); code != websocket.CloseServiceRestart {
			t.Fatalf("%s: close %d, want 1012", players[i], code)
		}
	}
	g1.stop(t)

	addr := g1.Addr().String()
	g2 := startGateClock(t, func(c *Config) {
		c.Addr = addr
		c.LineMode, c.LineRate, c.LineInterval = "queueing", 1, time.Second
	}, nil, clock.NewFake(t0.Add(10*time.Second)), logic)
	testwait.Until(t, "the walker's ticker", g2.line.ticking.Load)

	late, lst := g2.join(t, "late", "")
	if lst.GetPosition() != 1 {
		t.Fatalf("late: position %d, want 1", lst.GetPosition())
	}
	// Back in the order p2, p0, p3, p1: each first position counts the
	// returning players who joined before them, and not late.
	for _, x := range []struct {
		p   string
		pos uint64
	}{{"p2", 1}, {"p0", 1}, {"p3", 3}, {"p1", 2}} {
		_, st := g2.join(t, x.p, tickets[x.p])
		if st.GetPosition() != x.pos {
			t.Fatalf("%s back at %d, want %d", x.p, st.GetPosition(), x.pos)
		}
		old, _ := verifyTicket(g2.ring(), tickets[x.p], x.p, g2.clock.Now())
		nu, err := verifyTicket(g2.ring(), st.GetTicket(), x.p, g2.clock.Now())
		if err != nil || nu.Line != g2.line.id || nu.ID != old.ID || !nu.Joined.Equal(old.Joined) {
			t.Fatalf("%s: new ticket %+v (%v), want this line's with id %v joined %v", x.p, nu, err, old.ID, old.Joined)
		}
	}
	var order []string
	for _, s := range g2.line.q.AppendPositions(nil, g2.clock.Now()) {
		order = append(order, fmt.Sprintf("%s@%d", s.Ticket.PlayerID, s.Position))
	}
	if got := fmt.Sprint(order); got != "[p0@1 p1@2 p2@3 p3@4 late@5]" {
		t.Fatalf("the line after the restart: %s", got)
	}
	// late is told it moved back.
	g2.advance(t, g2.cfg.LinePush)
	if st := late.recvStatus(); st.GetPosition() != 5 {
		t.Fatalf("late pushed %d, want 5", st.GetPosition())
	}

	// The old ticket of a player who is back names a place that is held.
	g2.refused(t, g2.lineURL(t, "p0", tickets["p0"]), leveev2.ErrorCode_ERROR_CODE_TICKET_IN_USE, websocket.ClosePolicyViolation)
	// Nor may another player use it.
	g2.refused(t, g2.lineURL(t, "p1", tickets["slow"]), leveev2.ErrorCode_ERROR_CODE_FORBIDDEN, websocket.ClosePolicyViolation)

	// After the return window, an old line's ticket joins at the back (the
	// others are still in line: those whose sockets the keepalive dropped,
	// as this test does not answer pings, are away).
	g2.advance(t, g2.cfg.LineGrace)
	_, st := g2.join(t, "slow", tickets["slow"])
	if st.GetPosition() != 6 {
		t.Fatalf("slow, after the window: at %d, want the back (6)", st.GetPosition())
	}
	if got := g2.stats(); got.Length != 6 || got.Joined != 6 {
		t.Fatalf("stats %+v", got)
	}
}

// A reconnect storm against the connection cap: many players dial at once
// into a line; gate_connections_peak reaches the cap and never passes it,
// and gate_connection_cap says what it is.
func TestConnectionPeakNeverPassesTheCap(t *testing.T) {
	const capN, players = 8, 40
	g := lineGate(t, "queueing", 1, time.Second, func(c *Config) { c.MaxConns = capN })
	if got := testutil.ToFloat64(g.m.connCap); got != capN {
		t.Fatalf("gate_connection_cap = %v, want %d", got, capN)
	}
	type result struct {
		c    *websocket.Conn
		full bool
		err  error
	}
	results := make(chan result, players)
	var wg sync.WaitGroup
	for i := range players {
		u := g.lineURL(t, fmt.Sprintf("s%d", i), "")
		wg.Go(func() {
			ws, _, err := (&websocket.Dialer{Subprotocols: []string{wire.ProtoSubprotocol}}).Dial(u, nil)
			if err != nil {
				results <- result{err: err}
				return
			}
			_, data, err := ws.ReadMessage()
			if err != nil {
				results <- result{err: err}
				return
			}
			f, err := wire.Codec{}.DecodeServer(data, nil)
			results <- result{c: ws, full: f.GetError().GetCode() == leveev2.ErrorCode_ERROR_CODE_SERVER_FULL, err: err}
		})
	}
	wg.Wait()
	close(results)
	waiting := 0
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !r.full {
			waiting++
		}
		defer r.c.Close()
	}
	if waiting != capN {
		t.Fatalf("%d players in line, want the cap %d", waiting, capN)
	}
	if got := testutil.ToFloat64(g.m.connPeak); got != capN {
		t.Fatalf("gate_connections_peak = %v, want %d", got, capN)
	}
}

// The drill's restart with players both in and waiting: a gate with a
// paced line has let some players in (each got an admission pass) while
// others wait; it is stopped and a new one starts on the same address with
// the same secret and a line paced so slowly that it releases nobody
// during the test. The admitted players come back with their passes and
// are let in at once (Admitted, then the welcome), not put in line; the
// waiting ones get exactly the positions they had, ahead of a player who
// arrived after the restart; a pass shown a second time joins the back; a
// forged one is refused; the connection cap holds for passes too (and a
// refusal at the cap does not use the pass up); after the return window a
// pass joins the back.
func TestRestartedGateLetsAdmittedPlayersBackAtOnce(t *testing.T) {
	logic := startFakeLogic(t)
	g1 := lineGate(t, "paced", 1, time.Second, nil, logic)
	players := []string{"p0", "p1", "p2", "p3", "p4", "p5"}
	clients := map[string]*client{}
	tickets := map[string]string{}
	for _, p := range players {
		c, st := g1.join(t, p, "")
		clients[p], tickets[p] = c, st.GetTicket()
		g1.advance(t, lineTick) // distinct join times
	}
	// Let the line release three of them, one a second.
	for i := 0; g1.stats().Length > 3; i++ {
		if i > 100 {
			t.Fatalf("the line does not release: %+v", g1.stats())
		}
		g1.advance(t, lineTick)
	}
	passes := map[string]string{}
	for _, p := range players[:3] {
		a := clients[p].recvAdmittedSkipping(p)
		cl, err := verifyTicket(g1.ring(), a.GetTicket(), p, g1.clock.Now())
		old, _ := verifyTicket(g1.ring(), tickets[p], p, g1.clock.Now())
		if err != nil || !cl.Pass || cl.Line != g1.line.id || cl.ID != old.ID {
			t.Fatalf("%s: Admitted pass %q: %+v %v, want a pass of ticket %v", p, a.GetTicket(), cl, err, old.ID)
		}
		passes[p] = a.GetTicket()
	}
	var before []string
	for _, s := range g1.line.q.AppendPositions(nil, g1.clock.Now()) {
		before = append(before, fmt.Sprintf("%s@%d", s.Ticket.PlayerID, s.Position))
	}
	if got := fmt.Sprint(before); got != "[p3@1 p4@2 p5@3]" {
		t.Fatalf("the line before the restart: %s", got)
	}
	g1Line := g1.line.id
	g1.cancel()
	for _, p := range players {
		if code := clients[p].recvClose(); code != websocket.CloseServiceRestart {
			t.Fatalf("%s: close %d, want 1012", p, code)
		}
	}
	g1.stop(t)

	const capN = 8
	addr := g1.Addr().String()
	g2 := startGateClock(t, func(c *Config) {
		c.Addr = addr
		c.LineMode, c.LineRate, c.LineInterval = "paced", 1, time.Hour
		c.LineGrace = 5 * time.Second
		c.MaxConns = capN
	}, nil, clock.NewFake(t0.Add(10*time.Second)), logic)
	testwait.Until(t, "the walker's ticker", g2.line.ticking.Load)

	if _, lst := g2.join(t, "late", ""); lst.GetPosition() != 1 {
		t.Fatalf("late: position %d, want 1", lst.GetPosition())
	}
	// Back in a scrambled order, the players who were in and those who
	// waited mixed; the clock does not move, so the line releases nobody.
	back := map[string]*client{}
	for _, p := range []string{"p4", "p1", "p5", "p0", "p3", "p2"} {
		if pass, ok := passes[p]; ok {
			c := dialRaw(t, g2.lineURL(t, p, pass), wire.ProtoSubprotocol, nil)
			a := c.recvAdmittedSkipping(p)
			if a.GetWaitedMs() != 0 {
				t.Errorf("%s: waited %d ms, want 0", p, a.GetWaitedMs())
			}
			old, _ := verifyTicket(g2.ring(), pass, p, g2.clock.Now())
			nu, err := verifyTicket(g2.ring(), a.GetTicket(), p, g2.clock.Now())
			if err != nil || !nu.Pass || nu.Line != g2.line.id || nu.ID != old.ID {
				t.Fatalf("%s: new pass %+v (%v), want this line's with id %v", p, nu, err, old.ID)
			}
			passes[p+"@g2"] = a.GetTicket()
			back[p] = c
			continue
		}
		c, _ := g2.join(t, p, tickets[p])
		back[p] = c
	}
	var after []string
	for _, s := range g2.line.q.AppendPositions(nil, g2.clock.Now()) {
		after = append(after, fmt.Sprintf("%s@%d", s.Ticket.PlayerID, s.Position))
	}
	if got := fmt.Sprint(after); got != "[p3@1 p4@2 p5@3 late@4]" {
		t.Fatalf("the line after the restart: %s, want the waiters' old places and late behind", got)
	}
	// The players let in are served.
	back["p1"].send(profileFrame(7))
	if f := back["p1"].recv(); f.GetRequestId() != 7 || f.GetError() != nil {
		t.Fatalf("p1's request after coming back: %v", f)
	}

	// A forged pass is refused, and changes nothing.
	forged := passes["p2"]
	i := strings.LastIndexByte(forged, '.') + 1
	if forged[i] == 'A' {
		forged = forged[:i] + "B" + forged[i+1:]
	} else {
		forged = forged[:i] + "A" + forged[i+1:]
	}
	g2.refused(t, g2.lineURL(t, "p2", forged), leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED, websocket.ClosePolicyViolation)

	// A pass shown again (p0's first connection is still open) joins the
	// back; so does a t2 ticket of a player let in, as before. p0's first
	// connection is replaced (one player, one place): 4001; a filler takes
	// its slot, so the gate is at its cap again.
	replay, st := g2.join(t, "p0", passes["p0"])
	if st.GetPosition() != 5 {
		t.Fatalf("p0's pass replayed: at %d, want the back (5)", st.GetPosition())
	}
	if code := back["p0"].recvClose(); code != apperr.CloseReplaced {
		t.Fatalf("p0's first connection: close %d, want %d", code, apperr.CloseReplaced)
	}
	testwait.Until(t, "p0's first connection to be gone", func() bool { return g2.slots.Load() < capN })
	filler, _ := g2.join(t, "filler", "")
	// At the cap (late, six back, the replay: 8), a pass holder is refused
	// before the line, and the refusal does not use the pass up.
	extra := signPass(g2.signingKey(), g1Line, 0x5eed, "extra", t0, t0.Add(time.Hour))
	g2.refused(t, g2.lineURL(t, "extra", extra), leveev2.ErrorCode_ERROR_CODE_SERVER_FULL, websocket.CloseTryAgainLater)
	g2.closeClient(t, replay, 1)
	testwait.Until(t, "a free slot", func() bool { return g2.slots.Load() < capN })
	c := dialRaw(t, g2.lineURL(t, "extra", extra), wire.ProtoSubprotocol, nil)
	c.recvAdmittedSkipping("extra")
	if got := testutil.ToFloat64(g2.m.connPeak); got > capN {
		t.Fatalf("gate_connections_peak = %v, over the cap %d", got, capN)
	}

	// p1 drops and comes back with the pass this gate gave it: the
	// priority lane, ahead of everyone waiting.
	_ = back["p1"].ws.Close()
	testwait.Until(t, "p1 to be gone", func() bool { return g2.slots.Load() < capN })
	if _, st := g2.join(t, "p1", passes["p1@g2"]); st.GetPosition() != 1 {
		t.Fatalf("p1 back with this gate's pass: at %d, want 1 (the priority lane)", st.GetPosition())
	}

	// After the return window, another line's pass joins the back.
	g2.closeClient(t, filler, 2) // away with p0's replay; both dropped after the grace
	g2.advance(t, g2.cfg.LineGrace)
	_ = c.ws.Close()
	testwait.Until(t, "extra to be gone", func() bool { return g2.slots.Load() < capN })
	late := signPass(g2.signingKey(), g1Line, 0x1a7e, "tardy", t0, t0.Add(time.Hour))
	_, st = g2.join(t, "tardy", late)
	var line []string
	for _, s := range g2.line.q.AppendPositions(nil, g2.clock.Now()) {
		line = append(line, fmt.Sprintf("%s@%d/%v", s.Ticket.PlayerID, s.Position, s.Ticket.Priority))
	}
	if got := fmt.Sprint(line); st.GetPosition() != 5 || got != "[p1@1/true p3@1/false p4@2/false p5@3/false late@4/false tardy@5/false]" {
		t.Fatalf("a pass after the window: at %d, want the back (5); the line %s", st.GetPosition(), got)
	}
	for r, want := range map[string]float64{passAdmitted: 4, passReplayed: 1, passPriority: 1, passForeignLate: 1, passExpired: 0, passFull: 0} {
		if got := testutil.ToFloat64(g2.m.line.passes[r]); got != want {
			t.Errorf("gate_line_passes_total{result=%q} = %v, want %v", r, got, want)
		}
	}
}

// recvAdmittedSkipping reads until Admitted (skipping QueueStatus pushes),
// then the welcome, and returns the Admitted frame.
func (c *client) recvAdmittedSkipping(player string) *leveev2.Admitted {
	c.t.Helper()
	for {
		f := c.recv()
		if f.GetQueue() != nil {
			continue
		}
		a := f.GetAdmitted()
		if a == nil {
			c.t.Fatalf("%s: want Admitted, got %v", player, f)
		}
		if w := c.recv(); w.GetWelcome().GetPlayerId() != player {
			c.t.Fatalf("%s: want the welcome after Admitted, got %v", player, w)
		}
		return a
	}
}

// A player the line released just as the gate began to stop is let in
// (Admitted with its pass, then the welcome) before the gate closes it
// with 1012, however late the login's goroutine runs: the stop waits for
// the login the release started. Refused SHUTTING_DOWN instead, the player
// kept only its ticket, and the restarted gate put it back in line by its
// join time, ahead of the players the old gate had told it was gone: their
// places went backwards (the e2e drill's line_place_lost). Here the login
// is held back (it begins by taking the connection's dmu) until the gate
// is draining.
func TestReleasedAsTheGateStopsIsLetIn(t *testing.T) {
	g := lineGate(t, "paced", 1, time.Second, nil)
	c, _ := g.join(t, "p0", "")
	g.line.mu.Lock()
	gc := g.line.players["p0"]
	g.line.mu.Unlock()
	if gc == nil {
		t.Fatal("p0 has no connection in the line")
	}
	gc.dmu.Lock()
	held := true
	defer func() {
		if held {
			gc.dmu.Unlock()
		}
	}()
	for i := 0; gc.lineState.Load() == lineWaiting; i++ {
		if i > 100 {
			t.Fatalf("the line does not release p0: %+v", g.stats())
		}
		g.advance(t, lineTick)
	}
	g.cancel()
	testwait.Until(t, "the gate to drain", g.isDraining)
	gc.dmu.Unlock()
	held = false
	a := c.recvAdmittedSkipping("p0")
	if cl, err := verifyTicket(g.ring(), a.GetTicket(), "p0", g.clock.Now()); err != nil || !cl.Pass {
		t.Fatalf("Admitted ticket %q: %+v %v, want a pass", a.GetTicket(), cl, err)
	}
	if code := c.recvClose(); code != websocket.CloseServiceRestart {
		t.Fatalf("close %d after the welcome, want 1012", code)
	}
	g.stop(t)
}
