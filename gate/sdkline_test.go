//go:build !nosdk

// The SDK against a real gate. The build tag lets the gate's tests run
// (-tags nosdk) while the SDK is being rebuilt for issue 21.

package gate

import (
	"context"
	"errors"
	"testing"
	"time"

	sdk "github.com/leveehq/levee/client"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The SDK keeps the first status's ticket: OnQueue, Queue() and the
// LineError of a dial that ends in line carry it, and Reconnect comes
// back to the same place with it.
func TestSDKKeepsTheTicketAndResumesThePlace(t *testing.T) {
	g := lineGate(t, "queueing", 1, time.Second, nil)
	g.join(t, "ahead", "")
	statuses := make(chan *leveev2.QueueStatus, 16)
	opts := sdk.Options{OnQueue: func(q *leveev2.QueueStatus) { statuses <- q }, Rand: func() float64 { return 0 }}
	next := func(what string) *leveev2.QueueStatus {
		t.Helper()
		select {
		case q := <-statuses:
			return q
		case <-time.After(10 * time.Second):
			t.Fatalf("no status: %s", what)
			return nil
		}
	}
	tok := g.tokenFor(t, "sdk")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		_, err := sdk.Dial(ctx, g.wsURL(""), tok, opts)
		dialed <- err
	}()
	first := next("the first")
	if first.GetPosition() != 2 || first.GetTicket() == "" {
		t.Fatalf("first status %v", first)
	}
	g.advance(t, 2*time.Second) // a heartbeat, without the ticket on the wire
	if q := next("the heartbeat"); q.GetPosition() != 2 || q.GetTicket() != first.GetTicket() {
		t.Fatalf("OnQueue after the heartbeat: %v, want the first ticket kept", q)
	}
	cancel() // the player gives up waiting: the dial ends in line
	var cause error
	select {
	case cause = <-dialed:
	case <-time.After(10 * time.Second):
		t.Fatal("Dial did not return")
	}
	le := sdk.AsLineError(cause)
	if !errors.Is(cause, context.Canceled) || le == nil || le.Status.GetTicket() != first.GetTicket() || le.Status.GetPosition() != 2 {
		t.Fatalf("Dial: %v, line error %v", cause, le)
	}
	testwait.Until(t, "the player to be away", func() bool { return g.stats().Away == 1 })

	back := make(chan *sdk.Client, 1)
	go func() {
		c, err := sdk.Reconnect(context.Background(), g.wsURL(""), sdk.StaticToken(tok), opts, cause)
		if err != nil {
			t.Errorf("Reconnect: %v", err)
		}
		back <- c
	}()
	if q := next("after the reconnect"); q.GetPosition() != 2 || q.GetTicket() != first.GetTicket() {
		t.Fatalf("back in line at %v, want place 2 with the same ticket", q)
	}
	g.setLine(t, map[string]string{"mode": "open"})
	var c *sdk.Client
	select {
	case c = <-back:
	case <-time.After(10 * time.Second):
		t.Fatal("Reconnect did not return")
	}
	if c == nil {
		return
	}
	defer c.Close()
	if q := c.Queue(); q.GetTicket() != first.GetTicket() {
		t.Fatalf("Queue() = %v, want the ticket", q)
	}
	if st := g.stats(); st.Joined != 2 {
		t.Fatalf("joined %d, want 2: the reconnect took its old place", st.Joined)
	}
}
