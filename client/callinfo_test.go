package client_test

import (
	"context"
	"testing"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena/arenapb"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// CallInfo tells the request id a call used and how many times it sent
// it: 1 for a first answer, 3 for two BUSY retries, and, for a Resend,
// the id it was given and its own sends only.
func TestCallInfo(t *testing.T) {
	got := make(chan *leveev2.ClientFrame, 16)
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		switch n {
		case 1, 2: // the second call's first two sends
			return busy(f, 0)
		case 4: // the Resend's first send
			return refusal(f, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, 0)
		}
		if profileReq(f) != nil {
			return clienttest.Reply(f, &arenapb.ProfileReply{Player: &arenapb.Player{}})
		}
		return bought(f)
	}))
	c := dial(t, g, "cai", client.Options{Rand: constRand(0), NoPacing: true,
		Budget: backoff.NewBudget(backoff.BudgetConfig{Ratio: 1, MinPerSecond: 10})})

	var info client.CallInfo
	ctx := client.WithCallInfo(ctx5s(t), &info)
	if _, err := getProfile(ctx, c, ""); err != nil {
		t.Fatal(err)
	}
	first := next(t, got)
	if info.RequestID != first.GetRequestId() || info.Attempts != 1 {
		t.Fatalf("profile: info %+v, sent id %d once", info, first.GetRequestId())
	}

	if _, err := buyItem(ctx, c, "potion", 1); err != nil {
		t.Fatal(err)
	}
	second := next(t, got)
	next(t, got)
	next(t, got)
	if info.RequestID != second.GetRequestId() || info.RequestID == first.GetRequestId() || info.Attempts != 3 {
		t.Fatalf("purchase retried twice: info %+v, want id %d and 3 attempts", info, second.GetRequestId())
	}

	// A Resend of that purchase: its id, 2 sends (UNAVAILABLE, then the
	// answer), nothing of the first call's.
	f := buyFrame("potion", 1)
	f.RequestId, f.Criticality = second.GetRequestId(), leveev2.Criticality_CRITICALITY_CRITICAL
	if _, err := c.Resend(ctx, f); err != nil {
		t.Fatal(err)
	}
	if info.RequestID != second.GetRequestId() || info.Attempts != 2 {
		t.Fatalf("resend: info %+v, want id %d and 2 attempts", info, second.GetRequestId())
	}
	next(t, got)
	next(t, got)

	// Nothing sent: a Resend without an id, and a call whose ctx is over.
	if _, err := c.Resend(ctx, &leveev2.ClientFrame{}); err == nil {
		t.Fatal("a resend without an id was sent")
	}
	if info != (client.CallInfo{}) {
		t.Fatalf("resend without id: info %+v, want zero", info)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := buyItem(done, c, "potion", 1); err == nil {
		t.Fatal("a purchase under an ended ctx succeeded")
	}
	if info.Attempts != 0 || info.RequestID == 0 {
		t.Fatalf("ended ctx: info %+v, want a fresh id and 0 attempts", info)
	}
	nothing(t, got)
}

// A call without WithCallInfo is unchanged (and does not panic).
func TestCallInfoAbsent(t *testing.T) {
	g := newGate(t, scripted(nil, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame { return bought(f) }))
	c := dial(t, g, "cai2", client.Options{NoPacing: true})
	if _, err := buyItem(ctx5s(t), c, "potion", 1); err != nil {
		t.Fatal(err)
	}
}

// WithMaxAttempts caps one call's sends below the policy's: a caller
// resending a request keeps the request's sends in all within it.
func TestWithMaxAttempts(t *testing.T) {
	got := make(chan *leveev2.ClientFrame, 16)
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		return busy(f, 0) // always BUSY: the policy would send 3 times
	}))
	c := dial(t, g, "cap", client.Options{Rand: constRand(0), NoPacing: true,
		Budget: backoff.NewBudget(backoff.BudgetConfig{Ratio: 1, MinPerSecond: 10})})
	var info client.CallInfo
	ctx := client.WithCallInfo(ctx5s(t), &info)
	if _, err := buyItem(client.WithMaxAttempts(ctx, 2), c, "potion", 1); !client.AsError(err).IsBusy() {
		t.Fatalf("err %v, want the last BUSY", err)
	}
	if info.Attempts != 2 {
		t.Fatalf("%d sends under WithMaxAttempts(2), want 2", info.Attempts)
	}
	if _, err := buyItem(ctx, c, "potion", 1); err == nil {
		t.Fatal("always BUSY, yet no error")
	}
	if info.Attempts != 3 {
		t.Fatalf("%d sends without a cap, want the policy's 3", info.Attempts)
	}
}
