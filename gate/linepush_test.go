package gate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The push rule in a running gate (pushrule.go has the rule's table).

// holdPlaces puts n players in the line who have no connection the walker
// knows (it skips them, and releasing them lets nobody in), so that a test
// player can stand far back without thousands of sockets.
func (g *testGate) holdPlaces(t *testing.T, n int) {
	t.Helper()
	l := g.line
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range n {
		if _, err := l.q.Join(fmt.Sprintf("place-%d-%d", l.q.Stats(g.clock.Now()).Joined, i), g.clock.Now(), true); err != nil {
			t.Fatal(err)
		}
	}
}

// statusesBefore sends a request from a waiting player and returns the
// statuses pushed to it before the NOT_ADMITTED reply, which comes after
// everything the walker wrote so far.
func (c *client) statusesBefore(id uint64) []*leveev2.QueueStatus {
	c.t.Helper()
	c.send(profileFrame(id))
	var out []*leveev2.QueueStatus
	for {
		f := c.recv()
		if q := f.GetQueue(); q != nil && f.GetRequestId() == 0 {
			out = append(out, q)
			continue
		}
		wantError(c.t, f, id, leveev2.ErrorCode_ERROR_CODE_NOT_ADMITTED)
		return out
	}
}

func reasonCount(g *testGate, reason int) float64 {
	return testutil.ToFloat64(g.m.line.reasons[reason])
}

// In a standing line every player is looked at every push interval, but a
// player far back is pushed only at its heartbeat: 2 s at the front, 6 s
// at place 300, 40 s at place 2,000; nothing else, as nothing changes.
func TestStandingLinePushesOnlyHeartbeats(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, func(c *Config) { c.LinePush = 2 * time.Second })
	near, _ := g.join(t, "near", "")
	g.holdPlaces(t, 298)
	mid, _ := g.join(t, "mid", "")
	g.holdPlaces(t, 1699)
	far, st := g.join(t, "far", "")
	if st.GetPosition() != 2000 || st.GetTicket() == "" {
		t.Fatalf("far: first status %v, want place 2000 with the ticket", st)
	}
	players := []struct {
		name  string
		c     *client
		pos   uint64
		every int // walks between heartbeats
	}{{"near", near, 1, 1}, {"mid", mid, 300, 3}, {"far", far, 2000, 20}}
	// The first heartbeat comes anywhere in its interval (heartbeatPhase
	// spreads a surge's players), then one every interval: over 120 s, 60,
	// 20 and 3, each exactly its interval after the one before.
	id := uint64(0)
	beats := make([][]int, len(players)) // the walks at which each was pushed
	for walk := 1; walk <= 60; walk++ {
		g.advance(t, 2*time.Second)
		for i, p := range players {
			id++
			got := p.c.statusesBefore(id)
			if len(got) > 1 {
				t.Fatalf("%s at %d s: %d statuses in one walk", p.name, 2*walk, len(got))
			}
			for _, q := range got {
				if q.GetPosition() != p.pos || q.GetTicket() != "" || q.GetMode() != "queueing" || q.GetLineLength() != 2000 {
					t.Fatalf("%s's heartbeat: %v, want place %d of 2000 and no ticket (unchanged)", p.name, q, p.pos)
				}
				beats[i] = append(beats[i], walk)
			}
		}
	}
	for i, p := range players {
		b := beats[i]
		if len(b) != 60/p.every || b[0] > p.every {
			t.Fatalf("%s: heartbeats at walks %v, want %d, the first by walk %d", p.name, b, 60/p.every, p.every)
		}
		for j := 1; j < len(b); j++ {
			if b[j]-b[j-1] != p.every {
				t.Fatalf("%s: heartbeats at walks %v, want one every %d walks", p.name, b, p.every)
			}
		}
	}
	// 60 + 20 + 3 heartbeats to 3 players in a line of 2,000, in 120 s.
	if h, f, sent := reasonCount(g, reasonHeartbeat), reasonCount(g, reasonFirst), testutil.ToFloat64(g.m.line.pushes[pushSent]); h != 83 || f != 3 || sent != 86 {
		t.Fatalf("pushes: heartbeat %v, first %v, sent %v; want 83, 3, 86", h, f, sent)
	}
}

// In a paced line a player near the front is pushed as its place moves
// (every walk), one far back only when its place or ETA moved by 10 %.
func TestPacedLinePushesAsPlacesMove(t *testing.T) {
	g := lineGate(t, "paced", 10, time.Second, func(c *Config) { c.LinePush = 2 * time.Second }) // one every 100 ms
	g.holdPlaces(t, 50)
	front, st := g.join(t, "front", "")
	g.holdPlaces(t, 948)
	back, bst := g.join(t, "back", "")
	if st.GetPosition() != 51 || bst.GetPosition() != 1000 || bst.GetEtaMs() != 100_000 {
		t.Fatalf("first statuses %v and %v, want places 51 and 1000 (ETA 100 s)", st, bst)
	}
	g.unphase(t, "back")        // this test is about moves: its heartbeat (20 s) stays out of the way
	g.advance(t, 2*time.Second) // 20 released
	if q := front.recvStatus(); q.GetPosition() != 31 || q.GetTicket() != "" {
		t.Fatalf("front at 2 s: %v, want place 31", q)
	}
	g.advance(t, 2*time.Second)
	if q := front.recvStatus(); q.GetPosition() != 11 {
		t.Fatalf("front at 4 s: %v, want place 11", q)
	}
	g.advance(t, 1100*time.Millisecond) // its turn at 5.1 s
	front.recvAdmitted("front")
	// The back moved 20 places a walk: 2 % of its place, 2 s of a 100 s ETA.
	if got := back.statusesBefore(1); len(got) != 0 {
		t.Fatalf("back before 10 s: %v, want no status", got)
	}
	g.advance(t, 4900*time.Millisecond) // 10 s: 100 places, 10 %
	if got := back.statusesBefore(2); len(got) != 1 || got[0].GetPosition() != 900 {
		t.Fatalf("back at 10 s: %v, want one status, place 900", got)
	}
	if m := reasonCount(g, reasonMoved); m != 3 {
		t.Fatalf("gate_line_push_reasons_total{moved} = %v, want 3", m)
	}
}

// An operator's change of mode or rate reaches every waiting player at
// once, wherever they stand.
func TestModeAndRateChangesReachEveryone(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, nil)
	g.holdPlaces(t, 100)
	var cs []*client
	for i, ahead := range []int{0, 298, 1699} {
		g.holdPlaces(t, ahead)
		c, _ := g.join(t, fmt.Sprintf("p%d", i), "")
		cs = append(cs, c)
	}
	everyone := func(what string, check func(*leveev2.QueueStatus) bool) {
		t.Helper()
		for i, c := range cs {
			got := c.statusesBefore(uint64(100 + i))
			if len(got) != 1 || !check(got[0]) {
				t.Fatalf("%s: p%d got %v, want one status showing it", what, i, got)
			}
		}
	}
	g.setLine(t, map[string]string{"mode": "closed"})
	everyone("closing", func(q *leveev2.QueueStatus) bool { return q.GetMode() == "closed" && q.GetReleaseRate() == 0 })
	g.setLine(t, map[string]string{"mode": "paced"})
	everyone("pacing", func(q *leveev2.QueueStatus) bool { return q.GetMode() == "paced" && q.GetReleaseRate() == 1 })
	g.setLine(t, map[string]string{"rate": "5"})
	everyone("a faster rate", func(q *leveev2.QueueStatus) bool { return q.GetReleaseRate() == 5 })
	if got := reasonCount(g, reasonModeRate); got != 9 {
		t.Fatalf("gate_line_push_reasons_total{mode_rate} = %v, want 9", got)
	}
}

// The ticket comes in a connection's first status only, in both
// subprotocols; later ones leave it out (unchanged). A resumed connection
// gets it again first.
func TestTicketInTheFirstStatusOnly(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, nil)
	for i, sp := range []string{wire.ProtoSubprotocol, wire.JSONSubprotocol} {
		c := dialRaw(t, g.lineURL(t, fmt.Sprintf("p%d", i), ""), sp, nil)
		raw := func() string {
			t.Helper()
			_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, b, err := c.ws.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		first := raw()
		g.advance(t, 2*time.Second)
		later := raw()
		f1, err1 := c.codec.DecodeServer([]byte(first), nil)
		f2, err2 := c.codec.DecodeServer([]byte(later), nil)
		if err1 != nil || err2 != nil || f1.GetQueue().GetTicket() == "" || f2.GetQueue() == nil || f2.GetQueue().GetTicket() != "" {
			t.Fatalf("%s: first %v, later %v (%v, %v): want the ticket in the first only", sp, f1, f2, err1, err2)
		}
		if c.codec.JSON && strings.Contains(later, "ticket") {
			t.Fatalf("JSON: a later status %s names a ticket", later)
		}
	}
}

// unphase takes the heartbeat phase (heartbeatPhase) out of a waiting
// player's last push, as if its first status had not been back-dated.
func (g *testGate) unphase(t *testing.T, player string) {
	t.Helper()
	for _, c := range g.snapshot(nil) {
		if c.playerID == player {
			c.wmu.Lock()
			c.pushed.at = g.line.tick(g.clock.Now())
			c.wmu.Unlock()
			return
		}
	}
	t.Fatalf("no connection of %s", player)
}
