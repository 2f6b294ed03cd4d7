package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func newLineGate(t *testing.T, line clienttest.Line, h clienttest.Handler) *clienttest.Gate {
	t.Helper()
	g := clienttest.NewGameGate(secret, arena.Game(), line, h)
	t.Cleanup(g.Close)
	return g
}

// tickets records the ticket every connection came with.
type tickets struct {
	mu  sync.Mutex
	got []string
}

func (tk *tickets) add(s string) int {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.got = append(tk.got, s)
	return len(tk.got)
}

func (tk *tickets) list() []string {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return append([]string(nil), tk.got...)
}

// Dial waits through the line: every status reaches OnQueue in order, the
// last is kept, Admitted gives Waited, and the player is in after the
// Welcome. The gate sends the ticket in the first status only; every
// status the SDK hands on carries it.
func TestDialWaitsInLine(t *testing.T) {
	g := newLineGate(t, clienttest.Waiting(3, 2, 1), arenaPlay)
	var seen []uint64
	c := dial(t, g, "ann", client.Options{
		OnQueue: func(q *leveev2.QueueStatus) {
			seen = append(seen, q.GetPosition())
			if q.GetTicket() != "ticket-ann" {
				t.Errorf("OnQueue at %d: ticket %q, want the first status's", q.GetPosition(), q.GetTicket())
			}
		},
		OnAdmitted: func(a *leveev2.Admitted) { seen = append(seen, 1000+a.GetWaitedMs()/1000) },
	})
	if len(seen) != 4 || seen[0] != 3 || seen[1] != 2 || seen[2] != 1 || seen[3] != 1003 {
		t.Fatalf("OnQueue, OnAdmitted saw %v, want [3 2 1 1003]", seen)
	}
	q := c.Queue()
	if q.GetPosition() != 1 || q.GetTicket() != "ticket-ann" || q.GetGraceMs() != 60_000 {
		t.Fatalf("Queue() = %v", q)
	}
	if c.Waited() != 3*time.Second || c.PlayerID() != "ann" {
		t.Fatalf("Waited() = %v, player %q", c.Waited(), c.PlayerID())
	}
	if _, err := getProfile(ctx5s(t), c, ""); err != nil {
		t.Fatal(err)
	}

	// No line: no status, no wait.
	plain := dial(t, newGate(t, arenaPlay), "bea", client.Options{})
	if plain.Queue() != nil || plain.Waited() != 0 {
		t.Fatalf("without a line: Queue() = %v, Waited() = %v", plain.Queue(), plain.Waited())
	}
}

// The dial's ctx bounds the wait in line; the error carries the place.
func TestDialLineWaitEndsWithCtx(t *testing.T) {
	g := newLineGate(t, func(c *clienttest.Conn) bool {
		_ = c.Send(clienttest.Status(40, 40, 2, "T-40"))
		<-c.Context().Done() // never admitted
		return false
	}, arenaPlay)
	clk := clock.NewFake(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan struct{})
	ch := dialAsync(func() (*client.Client, error) {
		return client.Dial(ctx, g.URL(), mint(t, "cid"), client.Options{Clock: clk, OnQueue: func(*leveev2.QueueStatus) { close(got) }})
	})
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no status")
	}
	cancel()
	_, err := awaitDial(t, ch)
	le := client.AsLineError(err)
	if !errors.Is(err, context.Canceled) || le == nil || le.Status.GetTicket() != "T-40" || le.Status.GetPosition() != 40 {
		t.Fatalf("err = %v (line error %v)", err, le)
	}
	if !le.Seen.Equal(clk.Now()) || !le.Resumable(clk.Now().Add(59*time.Second)) || le.Resumable(clk.Now().Add(60*time.Second)) {
		t.Fatalf("seen %v, grace %d ms", le.Seen, le.Status.GetGraceMs())
	}
}

// A player dropped while waiting comes back with the ticket and keeps the
// place; DialRetry does it by itself. The ticket came in the first status
// only (the last one before the drop had none), as the gate sends it.
func TestDialRetryResumesPlace(t *testing.T) {
	var tk tickets
	g := newLineGate(t, func(c *clienttest.Conn) bool {
		if tk.add(c.Ticket) == 1 {
			_ = c.Send(clienttest.Status(8, 9, 1, "T-7"))
			_ = c.Send(clienttest.Status(7, 9, 1, ""))
			return false // dropped without a close frame
		}
		if c.Ticket != "T-7" {
			return c.Send(clienttest.Status(9, 9, 1, "T-new")) == nil && c.Send(clienttest.Admit(time.Second)) == nil
		}
		return c.Send(clienttest.Status(6, 9, 1, "T-7")) == nil && c.Send(clienttest.Admit(time.Second)) == nil
	}, arenaPlay)
	c, err := client.DialRetry(ctx5s(t), g.URL(), client.StaticToken(mint(t, "dee")), client.Options{Rand: constRand(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := tk.list(); len(got) != 2 || got[0] != "" || got[1] != "T-7" {
		t.Fatalf("tickets = %q, want [\"\" T-7]", got)
	}
	if c.Queue().GetPosition() != 6 || c.Stats().DialAttempts != 2 {
		t.Fatalf("Queue() = %v, stats %+v", c.Queue(), c.Stats())
	}
}

// Reconnect takes the ticket from its cause while the grace lasts (the
// wait runs on the fake clock), and dials as a new arrival after it.
func TestReconnectTicketGrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spread time.Duration // the first wait is half of it (rnd 0.5)
		want   string
	}{
		{"well within", 10 * time.Second, "T-3"},   // waits 5 s
		{"last instant", 2*time.Minute - 2, "T-3"}, // 60 s - 1 ns: the 60 s grace still holds
		{"at grace", 2 * time.Minute, ""},          // 60 s: over
		{"long after", 10 * time.Minute, ""},       // 5 min
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tk tickets
			g := newLineGate(t, func(c *clienttest.Conn) bool {
				if tk.add(c.Ticket) == 1 {
					_ = c.Send(clienttest.Status(3, 3, 1, "T-3"))
					return false
				}
				return true
			}, arenaPlay)
			clk := clock.NewFake(time.Now())
			opts := client.Options{Clock: clk, Rand: constRand(0.5), Reconnect: backoff.Reconnect{Spread: tc.spread}}
			tok := mint(t, "eve")
			_, cause := client.Dial(ctx5s(t), g.URL(), tok, opts)
			if client.AsLineError(cause) == nil || !errors.Is(cause, client.ErrClosed) {
				t.Fatalf("dropped in line: %v", cause)
			}
			ch := dialAsync(func() (*client.Client, error) {
				// No deadline: the waits run on the fake clock.
				return client.Reconnect(t.Context(), g.URL(), client.StaticToken(tok), opts, cause)
			})
			testwait.Until(t, "the first wait", func() bool { return clk.Waiters() == 1 })
			clk.Advance(tc.spread / 2)
			if _, err := awaitDial(t, ch); err != nil {
				t.Fatal(err)
			}
			if got := tk.list(); len(got) != 2 || got[1] != tc.want {
				t.Fatalf("tickets = %q, want the second %q", got, tc.want)
			}
		})
	}
}

// A ticket the gate refuses (forged, expired, another player's) does not
// end DialRetry: the next attempt goes at once without it. Only the code
// TICKET_IN_USE keeps the ticket (TestTicketInUseRetriedWithTicket): a
// FORBIDDEN is a refused ticket whatever its message says.
func TestRefusedTicketDropped(t *testing.T) {
	clk := clock.NewFake(time.Now())
	for _, refusal := range []*leveev2.Error{
		{Code: leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, Message: "unknown ticket"},
		{Code: leveev2.ErrorCode_ERROR_CODE_FORBIDDEN, Message: "another connection holds this place in line"},
	} {
		var tk tickets
		g := newLineGate(t, func(c *clienttest.Conn) bool {
			tk.add(c.Ticket)
			if c.Ticket != "" {
				_ = c.Send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: refusal}})
				_ = c.CloseWith(websocket.ClosePolicyViolation, "bad ticket")
				_, _ = c.Recv()
				return false
			}
			return true
		}, arenaPlay)
		c, err := client.DialRetry(ctx5s(t), g.URL(), client.StaticToken(mint(t, "fox")), client.Options{Clock: clk, Ticket: "stale"})
		if err != nil {
			t.Fatalf("%v: %v", refusal.GetCode(), err)
		}
		c.Close()
		if got := tk.list(); len(got) != 2 || got[0] != "stale" || got[1] != "" || c.Stats().DialAttempts != 2 {
			t.Fatalf("%v: tickets = %q, attempts %d", refusal.GetCode(), got, c.Stats().DialAttempts)
		}
	}
	// Without a ticket the same refusal ends it.
	bad := newLineGate(t, func(c *clienttest.Conn) bool {
		_ = c.Send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: &leveev2.Error{
			Code: leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, Message: "no"}}})
		_ = c.CloseWith(websocket.ClosePolicyViolation, "no")
		_, _ = c.Recv()
		return false
	}, arenaPlay)
	if _, err := client.DialRetry(ctx5s(t), bad.URL(), client.StaticToken(mint(t, "fox")), client.Options{Clock: clk}); client.Code(err) != leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST {
		t.Fatalf("err = %v", err)
	}
}

// A refusal while waiting (the line closed for maintenance) is returned
// typed, with the close code and the place.
func TestRefusedWhileWaiting(t *testing.T) {
	g := newLineGate(t, func(c *clienttest.Conn) bool {
		_ = c.Send(clienttest.Status(2, 2, 1, "T-2"))
		_ = c.Send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: &leveev2.Error{
			Code: leveev2.ErrorCode_ERROR_CODE_SERVER_FULL, Message: "maintenance", RetryAfterMs: 30_000}}})
		_ = c.CloseWith(websocket.CloseTryAgainLater, "maintenance")
		_, _ = c.Recv()
		return false
	}, arenaPlay)
	var n atomic.Int32
	_, err := client.Dial(ctx5s(t), g.URL(), mint(t, "gil"), client.Options{OnQueue: func(*leveev2.QueueStatus) { n.Add(1) }})
	if client.Code(err) != leveev2.ErrorCode_ERROR_CODE_SERVER_FULL || client.CloseCode(err) != websocket.CloseTryAgainLater ||
		client.RetryAfter(err) != 30*time.Second || client.AsLineError(err) == nil || n.Load() != 1 {
		t.Fatalf("err = %v, statuses %d", err, n.Load())
	}
}

// NOT_ADMITTED is typed, carries the ETA as retry_after and is not retried.
func TestNotAdmittedNotRetried(t *testing.T) {
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, scripted(got, func(_ int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		return refusal(f, leveev2.ErrorCode_ERROR_CODE_NOT_ADMITTED, 4200)
	}))
	c := dial(t, g, "hal", client.Options{Clock: clock.NewFake(time.Now())})
	_, err := getProfile(ctx5s(t), c, "")
	if !errors.Is(err, client.ErrNotAdmitted) || !client.IsNotAdmitted(err) || client.RetryAfter(err) != 4200*time.Millisecond ||
		client.IsBusy(err) || !client.Retryable(err) {
		t.Fatalf("err = %v", err)
	}
	next(t, got)
	nothing(t, got)
	if s := c.Stats(); s.Retries != 0 || s.Sent != 1 {
		t.Fatalf("stats %+v", s)
	}
	if errors.Is(err, &client.Error{Code: leveev2.ErrorCode_ERROR_CODE_BUSY}) {
		t.Fatal("NOT_ADMITTED matched BUSY")
	}
}

// Statuses pushed after the Welcome only update Queue().
func TestQueueAfterWelcome(t *testing.T) {
	g := newGate(t, func(c *clienttest.Conn) {
		_ = c.Send(clienttest.Status(1, 1, 1, "late"))
		arenaPlay(c)
	})
	c := dial(t, g, "ivy", client.Options{OnQueue: func(*leveev2.QueueStatus) { t.Error("OnQueue after the Welcome") }})
	testwait.Until(t, "the late status", func() bool { return c.Queue().GetTicket() == "late" })
	if _, err := getProfile(ctx5s(t), c, ""); err != nil {
		t.Fatal(err)
	}
}

// A player let in from the line who drops comes back with the ticket (the
// gate lets such a player in first): the old client's Err carries it.
func TestReconnectAfterAdmissionPresentsTicket(t *testing.T) {
	var tk tickets
	g := newLineGate(t, func(c *clienttest.Conn) bool {
		tk.add(c.Ticket)
		return c.Send(clienttest.Status(1, 1, 1, "T-in")) == nil && c.Send(clienttest.Admit(time.Second)) == nil
	}, restartingGame(1))
	clk := clock.NewFake(time.Now())
	opts := client.Options{Clock: clk, Rand: constRand(0)}
	old := dial(t, g, "jan", opts)
	waitDone(t, old)
	cause := old.Err()
	le := client.AsLineError(cause)
	if le == nil || !le.Admitted || le.Status.GetTicket() != "T-in" || client.CloseCode(cause) != websocket.CloseServiceRestart ||
		!errors.Is(cause, client.ErrClosed) || !strings.Contains(cause.Error(), "goes first") {
		t.Fatalf("Err() = %v", cause)
	}
	c, err := client.Reconnect(ctx5s(t), g.URL(), client.StaticToken(mint(t, "jan")), opts, cause)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := tk.list(); len(got) != 2 || got[1] != "T-in" {
		t.Fatalf("tickets = %q", got)
	}
	// Past the grace (counted from the admission) the ticket is not sent.
	clk.Advance(clienttest.LineGrace)
	if le.Resumable(clk.Now()) {
		t.Fatal("resumable after the grace")
	}
}

// While the gate says the ticket's place is held by another (old, not yet
// dropped) connection, the redials keep the ticket and back off.
func TestTicketInUseRetriedWithTicket(t *testing.T) {
	var tk tickets
	g := newLineGate(t, func(c *clienttest.Conn) bool {
		if tk.add(c.Ticket) <= 2 {
			_ = c.Send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: &leveev2.Error{
				Code: leveev2.ErrorCode_ERROR_CODE_TICKET_IN_USE, Message: "close the other connection first"}}})
			_ = c.CloseWith(websocket.ClosePolicyViolation, "busy ticket")
			_, _ = c.Recv()
			return false
		}
		return c.Send(clienttest.Status(4, 4, 1, c.Ticket)) == nil && c.Send(clienttest.Admit(time.Second)) == nil
	}, arenaPlay)
	clk := clock.NewFake(time.Now())
	opts := client.Options{Clock: clk, Rand: constRand(0.5), Ticket: "T-mine", Reconnect: backoff.Reconnect{Spread: 2 * time.Second}}
	ch := dialAsync(func() (*client.Client, error) {
		return client.DialRetry(t.Context(), g.URL(), client.StaticToken(mint(t, "kim")), opts)
	})
	// Refused at once, then after the spread (1 s), then after 50 ms.
	testwait.Until(t, "the first wait", func() bool { return clk.Waiters() == 1 && len(tk.list()) == 1 })
	clk.Advance(time.Second)
	testwait.Until(t, "the second wait", func() bool { return clk.Waiters() == 1 && len(tk.list()) == 2 })
	clk.Advance(50 * time.Millisecond)
	c, err := awaitDial(t, ch)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.list(); len(got) != 3 || got[0] != "T-mine" || got[1] != "T-mine" || got[2] != "T-mine" {
		t.Fatalf("tickets = %q", got)
	}
	if c.Queue().GetPosition() != 4 || c.Stats().DialAttempts != 3 {
		t.Fatalf("Queue() = %v, attempts %d", c.Queue(), c.Stats().DialAttempts)
	}
}

// Ticket is the latest ticket the gate gave the connection: the line
// ticket while waiting, the admission pass once in (the line ticket from a
// gate without passes), "" when let in at once. Err() carries the pass,
// and Reconnect presents it even past the grace (the gate decides what a
// pass is good for); a player let in by a pass alone (no status) gets the
// new one. A pass the gate refuses is dropped: the next attempt goes at
// once without it.
func TestTicketIsThePassOnceIn(t *testing.T) {
	var tk tickets
	g := newLineGate(t, func(c *clienttest.Conn) bool {
		switch tk.add(c.Ticket); c.Ticket {
		case "":
			return c.Send(clienttest.Status(2, 2, 1, "T-wait")) == nil && c.Send(clienttest.AdmitPass(2*time.Second, "P-in")) == nil
		case "P-in": // a restarted gate: in at once, with a new pass
			return c.Send(clienttest.AdmitPass(0, "P-again")) == nil
		}
		_ = c.Send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: &leveev2.Error{
			Code: leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED, Message: "gate: ticket expired"}}})
		_ = c.CloseWith(websocket.ClosePolicyViolation, "bad ticket")
		_, _ = c.Recv()
		return false
	}, restartingGame(2))
	clk := clock.NewFake(time.Now())
	opts := client.Options{Clock: clk, Rand: constRand(0)}
	old := dial(t, g, "pia", opts)
	if old.Ticket() != "P-in" || old.Queue().GetTicket() != "T-wait" || old.Waited() != 2*time.Second {
		t.Fatalf("Ticket() = %q, Queue() = %v", old.Ticket(), old.Queue())
	}
	waitDone(t, old)
	cause := old.Err()
	if le := client.AsLineError(cause); le == nil || !le.Admitted || le.Pass != "P-in" || le.Status.GetTicket() != "T-wait" {
		t.Fatalf("Err() = %v", cause)
	}
	clk.Advance(clienttest.LineGrace) // a ticket's grace would be over; a pass has none of its own
	c, err := client.Reconnect(ctx5s(t), g.URL(), client.StaticToken(mint(t, "pia")), opts, cause)
	if err != nil {
		t.Fatal(err)
	}
	if c.Ticket() != "P-again" || c.Queue() != nil || c.Waited() != 0 {
		t.Fatalf("back in by the pass: Ticket() = %q, Queue() = %v", c.Ticket(), c.Queue())
	}
	waitDone(t, c)
	if le := client.AsLineError(c.Err()); le == nil || le.Pass != "P-again" || le.Status != nil {
		t.Fatalf("Err() = %v", c.Err())
	}
	// A pass the gate refuses (Options.Ticket set by hand, as the load
	// tool does): dialed again at once without it.
	c2, err := client.DialRetry(ctx5s(t), g.URL(), client.StaticToken(mint(t, "pia")), client.Options{Clock: clk, Ticket: "P-stale"})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := tk.list(); len(got) != 4 || got[0] != "" || got[1] != "P-in" || got[2] != "P-stale" || got[3] != "" {
		t.Fatalf("tickets = %q", got)
	}
	if c2.Ticket() != "P-in" {
		t.Fatalf("Ticket() = %q after coming in as a new arrival", c2.Ticket())
	}

	// A gate without passes: the line ticket; no line: none.
	plain := dial(t, newLineGate(t, clienttest.Waiting(1), arenaPlay), "ray", client.Options{})
	if plain.Ticket() != "ticket-ray" {
		t.Fatalf("Ticket() = %q, want the line ticket", plain.Ticket())
	}
	if c := dial(t, newGate(t, arenaPlay), "sue", client.Options{}); c.Ticket() != "" {
		t.Fatalf("Ticket() = %q, want none", c.Ticket())
	}
}

// restartingGame is a game that closes its first k connections with 1012
// (a gate restarting), then plays.
func restartingGame(k int32) clienttest.Handler {
	var n atomic.Int32
	return func(c *clienttest.Conn) {
		if n.Add(1) <= k {
			_ = c.CloseWith(websocket.CloseServiceRestart, "restart")
			_, _ = c.Recv()
			return
		}
		arenaPlay(c)
	}
}
