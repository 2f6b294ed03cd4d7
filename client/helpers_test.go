package client_test

import (
	"testing"
	"time"

	"github.com/leveehq/levee/client/clienttest"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// constRand is a jitter source that always returns f.
func constRand(f float64) func() float64 { return func() float64 { return f } }

// scripted is a Handler that passes every request to got (before it
// answers) and answers request n (0-based, in arrival order) with
// answer(n, f); a nil answer leaves the request unanswered.
func scripted(got chan<- *leveev2.ClientFrame, answer func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame) clienttest.Handler {
	return func(c *clienttest.Conn) {
		for n := 0; ; n++ {
			f, err := c.Recv()
			if err != nil {
				return
			}
			if got != nil {
				got <- f
			}
			if out := answer(n, f); out != nil {
				if c.Send(out) != nil {
					return
				}
			}
		}
	}
}

// refusal is an error reply to f with code and retry_after ms.
func refusal(f *leveev2.ClientFrame, code leveev2.ErrorCode, retryMs uint32) *leveev2.ServerFrame {
	return clienttest.Reply(f, &leveev2.Error{Code: code, Message: "test", RetryAfterMs: retryMs})
}

func busy(f *leveev2.ClientFrame, retryMs uint32) *leveev2.ServerFrame {
	return refusal(f, leveev2.ErrorCode_ERROR_CODE_BUSY, retryMs)
}

// bought is a successful BuyItem reply to f.
func bought(f *leveev2.ClientFrame) *leveev2.ServerFrame {
	return clienttest.Reply(f, &leveev2.BuyItemReply{Player: &leveev2.Player{}, GoldSpent: 10})
}

// next reads the next request the gate saw, failing after 5 s.
func next(t *testing.T, got <-chan *leveev2.ClientFrame) *leveev2.ClientFrame {
	t.Helper()
	select {
	case f := <-got:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("the gate saw no request")
		return nil
	}
}

// nothing fails if the gate has seen a request that was not read yet.
func nothing(t *testing.T, got <-chan *leveev2.ClientFrame) {
	t.Helper()
	select {
	case f := <-got:
		t.Fatalf("unexpected request %d (%T)", f.GetRequestId(), f.GetPayload())
	default:
	}
}

// result waits for a call's error, failing after 5 s.
func result(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("call did not return")
		return nil
	}
}
