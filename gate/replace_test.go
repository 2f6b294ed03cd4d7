package gate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// A second connection of a player replaces the first: the first one's
// requests in flight are answered, then it is closed with 4001; the second
// is served.
func TestReplacedConnectionAnswersInFlightThenCloses4001(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	first, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	<-logic.got // the login
	release := make(chan struct{})
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		if req.GetLogin() == nil {
			<-release
		}
		return defaultReply(req), nil
	})
	first.send(profileFrame(1))
	first.send(profileFrame(2))
	for range 2 {
		if r := <-logic.got; r.GetCall() == nil {
			t.Fatalf("logic got %v, want the two calls", r)
		}
	}
	second, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	testwait.Until(t, "the replacement", func() bool { return testutil.ToFloat64(g.m.replaced) == 1 })
	close(release)
	got := map[uint64]bool{}
	for range 2 {
		f := first.recv()
		if !isProfile(f) || got[f.GetRequestId()] {
			t.Fatalf("the replaced connection's reply: %v (got %v)", f, got)
		}
		got[f.GetRequestId()] = true
	}
	if code := first.recvClose(); code != apperr.CloseReplaced {
		t.Fatalf("the replaced connection closed with %d, want %d", code, apperr.CloseReplaced)
	}
	second.send(profileFrame(3))
	if f := second.recv(); f.GetRequestId() != 3 || !isProfile(f) {
		t.Fatalf("the new connection's reply: %v", f)
	}
	testwait.Until(t, "one connection", func() bool { return testutil.ToFloat64(g.m.active) == 1 })
}

// 500 connections with one player id: exactly one live session at the end,
// the 499 others closed with 4001, and every request logic executed was
// answered to the connection that sent it.
func TestFiveHundredConnectionsOnePlayer(t *testing.T) {
	const n = 500
	logic := startFakeLogic(t)
	logic.got = nil // 500 logins would fill it
	g := startGate(t, nil, logic)
	tok := g.tokenFor(t, "bot")

	type result struct {
		welcomed bool
		replies  map[uint64]int // request id -> replies
		ok       int            // replies that were results
		close    int            // the close code, 0 if none came
	}
	results := make([]result, n)
	clients := make([]*client, n)
	var readers sync.WaitGroup
	dial := make(chan int)
	var dialers sync.WaitGroup
	for range 25 {
		dialers.Go(func() {
			for i := range dial {
				c := dialRaw(t, g.wsURL(tok), wire.ProtoSubprotocol, nil)
				clients[i] = c
				readers.Go(func() {
					r := &results[i]
					r.replies = map[uint64]int{}
					sent := false
					for {
						_, b, err := c.ws.ReadMessage()
						if err != nil {
							var ce *websocket.CloseError
							if errors.As(err, &ce) {
								r.close = ce.Code
							}
							return
						}
						f, err := c.codec.DecodeServer(b, c.actionOf)
						if err != nil {
							t.Errorf("connection %d: %v", i, err)
							return
						}
						switch {
						case f.GetWelcome() != nil:
							r.welcomed = true
						case f.GetRequestId() != 0:
							r.replies[f.GetRequestId()]++
							if f.GetError() == nil {
								r.ok++
							}
						}
						if r.welcomed && !sent {
							sent = true
							b, _ := c.codec.EncodeClient(profileFrame(uint64(i + 1)))
							c.mu.Lock()
							c.sent[uint64(i+1)] = "get_profile"
							c.mu.Unlock()
							_ = c.ws.WriteMessage(websocket.BinaryMessage, b) // may fail once replaced
						}
					}
				})
			}
		})
	}
	for i := range n {
		dial <- i
	}
	close(dial)
	dialers.Wait()
	testwait.Until(t, "499 replacements and one connection left", func() bool {
		return testutil.ToFloat64(g.m.replaced) == n-1 && testutil.ToFloat64(g.m.active) == 1
	})
	// The one live connection still answers.
	g.line.mu.Lock()
	live, players := g.line.players["bot"], len(g.line.players)
	g.line.mu.Unlock()
	if live == nil || players != 1 {
		t.Fatalf("the gate's players: %d, want the one", players)
	}
	for _, c := range clients {
		_ = c.ws.Close() // ends the live reader
	}
	readers.Wait()
	calls := 0
	for _, r := range logic.requests() {
		if r.GetCall() != nil {
			calls++
		}
	}
	closed, okReplies := 0, 0
	for i, r := range results {
		for id, k := range r.replies {
			if k != 1 {
				t.Errorf("connection %d: request %d answered %d times", i, id, k)
			}
		}
		okReplies += r.ok
		if r.close == apperr.CloseReplaced {
			closed++
		} else if r.close != 0 {
			t.Errorf("connection %d closed with %d", i, r.close)
		}
	}
	if closed != n-1 {
		t.Fatalf("%d connections closed with 4001, want %d", closed, n-1)
	}
	if okReplies != calls {
		t.Fatalf("logic executed %d requests, the players got %d results: a request in flight was not answered", calls, okReplies)
	}
	if calls == 0 {
		t.Fatal("no request reached logic; the test shows nothing")
	}
}

// The case: one token opens five connections to a queueing gate,
// with other players joining between them. The player has one place (the
// first one's), the same ticket on every connection, and the line holds
// three places, not seven.
func TestFiveConnectionsOnePlaceInLine(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, nil)
	var alice []*client
	var ticket uint64
	join := func(want uint64) {
		t.Helper()
		c, st := g.join(t, "alice", "")
		if st.GetPosition() != want {
			t.Fatalf("alice's connection %d at %d, want %d", len(alice)+1, st.GetPosition(), want)
		}
		cl, err := verifyTicket(g.ring(), st.GetTicket(), "alice", g.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if ticket == 0 {
			ticket = uint64(cl.ID)
		} else if uint64(cl.ID) != ticket {
			t.Fatalf("alice's connection %d has ticket %v, want %x", len(alice)+1, cl.ID, ticket)
		}
		alice = append(alice, c)
	}
	join(1)
	g.join(t, "bob", "")
	join(1)
	g.join(t, "carol", "")
	join(1)
	join(1)
	join(1)
	for i, c := range alice[:4] {
		if code := c.recvClose(); code != apperr.CloseReplaced {
			t.Fatalf("alice's connection %d closed with %d, want %d", i+1, code, apperr.CloseReplaced)
		}
	}
	if st := g.stats(); st.Length != 3 || st.Joined != 3 || st.Away != 0 {
		t.Fatalf("stats %+v: want three places (alice, bob, carol), none away", st)
	}
	// The line releases alice first, on her last connection.
	g.setLine(t, map[string]string{"mode": "paced"})
	alice[4].recvStatus()
	g.advance(t, time.Second)
	alice[4].recvAdmitted("alice")
	if got := testutil.ToFloat64(g.m.replaced); got != 4 {
		t.Fatalf("gate_sessions_replaced_total = %v, want 4", got)
	}
}
