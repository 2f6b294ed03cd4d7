package client_test

import (
	"testing"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/backoff"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Every request carries the wall time it was created at in issued_at_ms,
// the same on its retries (logic's idempotency window is measured from
// it); a new request gets its own.
func TestIssuedAtSetOncePerRequest(t *testing.T) {
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		if n == 0 {
			return busy(f, 0)
		}
		return bought(f)
	}))
	// rnd 0 and no retry_after: the retry waits 0, so no clock is needed.
	c := dial(t, g, "ivy", client.Options{Rand: constRand(0), NoPacing: true,
		Budget: backoff.NewBudget(backoff.BudgetConfig{Ratio: 1})})
	before := uint64(time.Now().UnixMilli())
	if _, err := buyItem(ctx5s(t), c, "potion", 1); err != nil {
		t.Fatal(err)
	}
	after := uint64(time.Now().UnixMilli())
	first, retry := next(t, got), next(t, got)
	if first.GetIssuedAtMs() < before || first.GetIssuedAtMs() > after {
		t.Fatalf("issued_at_ms = %d, want the wall time, in [%d, %d]", first.GetIssuedAtMs(), before, after)
	}
	if retry.GetRequestId() != first.GetRequestId() || retry.GetIssuedAtMs() != first.GetIssuedAtMs() {
		t.Fatalf("retry: id %d issued %d; first: id %d issued %d", retry.GetRequestId(), retry.GetIssuedAtMs(), first.GetRequestId(), first.GetIssuedAtMs())
	}
	// A frame used again for a new request gets a new stamp, not the old one.
	f := buyFrame("potion", 1)
	f.IssuedAtMs = 1
	if _, err := c.Do(ctx5s(t), f); err != nil {
		t.Fatal(err)
	}
	if third := next(t, got); third.GetIssuedAtMs() < after {
		t.Fatalf("a new request has issued_at_ms %d, want at least %d", third.GetIssuedAtMs(), after)
	}
}
