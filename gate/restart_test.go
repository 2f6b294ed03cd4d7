package gate

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"levee/internal/clock"
	"levee/internal/testwait"
	"levee/internal/wire"
	leveev1 "levee/proto/leveev1"
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
		old, _ := verifyTicket(g2.secret, tickets[x.p], x.p, g2.clock.Now())
		nu, err := verifyTicket(g2.secret, st.GetTicket(), x.p, g2.clock.Now())
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
	g2.refused(t, g2.lineURL(t, "p0", tickets["p0"]), leveev1.ErrorCode_ERROR_CODE_FORBIDDEN, websocket.ClosePolicyViolation)
	// Nor may another player use it.
	g2.refused(t, g2.lineURL(t, "p1", tickets["slow"]), leveev1.ErrorCode_ERROR_CODE_FORBIDDEN, websocket.ClosePolicyViolation)

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
			f, err := wire.Codec{}.DecodeServer(data)
			results <- result{c: ws, full: f.GetError().GetCode() == leveev1.ErrorCode_ERROR_CODE_SERVER_FULL, err: err}
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
