package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// A BUSY with retry_after 300 ms is retried on the fake clock after
// 300 ms plus the jitter (rnd 0.5 over the first 100 ms ceiling: 50 ms),
// not a moment sooner, with the same request id.
func TestRetryBusyAfterRetryAfterWithSameID(t *testing.T) {
	clk := clock.NewFake(time.Now())
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		if n == 0 {
			return busy(f, 300)
		}
		return bought(f)
	}))
	c := dial(t, g, "rita", client.Options{Clock: clk, Rand: constRand(0.5), NoPacing: true})
	res := make(chan error, 1)
	go func() {
		_, err := buyItem(ctx5s(t), c, "potion", 1)
		res <- err
	}()
	first := next(t, got)
	testwait.Until(t, "the retry timer", func() bool { return clk.Waiters() == 1 })
	clk.Advance(349 * time.Millisecond)
	nothing(t, got) // the timer is not due: nothing can have been sent
	clk.Advance(time.Millisecond)
	second := next(t, got)
	if err := result(t, res); err != nil {
		t.Fatalf("BuyItem after a retry: %v", err)
	}
	if second.GetRequestId() != first.GetRequestId() || buyReq(second).GetItemId() != "potion" {
		t.Fatalf("retry has id %d, first %d", second.GetRequestId(), first.GetRequestId())
	}
	if second.GetCriticality() != leveev2.Criticality_CRITICALITY_CRITICAL {
		t.Fatalf("retry criticality %v", second.GetCriticality())
	}
	if st := c.Stats(); st.Requests != 1 || st.Sent != 2 || st.Retries != 1 || st.Replies != 2 || st.BudgetRefused != 0 {
		t.Fatalf("stats = %+v", st)
	}
	// The next request has a new id.
	if _, err := buyItem(ctx5s(t), c, "potion", 1); err != nil {
		t.Fatal(err)
	}
	if third := next(t, got); third.GetRequestId() == first.GetRequestId() {
		t.Fatal("a new request reused the retried id")
	}
}

// Each of the three busy codes is retried; the request gets 3 attempts in
// all, then the last refusal is returned.
func TestRetryAtMostThreeAttempts(t *testing.T) {
	for _, code := range []leveev2.ErrorCode{leveev2.ErrorCode_ERROR_CODE_BUSY, leveev2.ErrorCode_ERROR_CODE_SERVER_FULL, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED} {
		got := make(chan *leveev2.ClientFrame, 8)
		g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
			return refusal(f, code, 0)
		}))
		// rnd 0 and no retry_after: every wait is 0, so no clock is needed.
		c := dial(t, g, "sam", client.Options{Rand: constRand(0), NoPacing: true,
			Budget: backoff.NewBudget(backoff.BudgetConfig{Ratio: 1})})
		_, err := buyItem(ctx5s(t), c, "potion", 1)
		if client.Code(err) != code || errors.Is(err, client.ErrRetryBudget) {
			t.Fatalf("%v: err = %v", code, err)
		}
		ids := map[uint64]bool{}
		for range 3 {
			ids[next(t, got).GetRequestId()] = true
		}
		nothing(t, got)
		if len(ids) != 1 {
			t.Fatalf("%v: attempts had ids %v", code, ids)
		}
		if st := c.Stats(); st.Requests != 1 || st.Sent != 3 || st.Retries != 2 {
			t.Fatalf("%v: stats = %+v", code, st)
		}
	}
}

func TestRetryPolicyMaxAttempts(t *testing.T) {
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame { return busy(f, 0) }))
	c := dial(t, g, "sue", client.Options{Rand: constRand(0), NoPacing: true, Retry: backoff.Policy{MaxAttempts: 5},
		Budget: backoff.NewBudget(backoff.BudgetConfig{Ratio: 1, MinPerSecond: 10})})
	if _, err := getProfile(ctx5s(t), c, ""); !client.IsBusy(err) {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Sent != 5 || st.Retries != 4 {
		t.Fatalf("stats = %+v", st)
	}
}

// A server that refuses everything: 50 requests from two clients sharing
// one budget (10 %, no reserve) get no retry at all, not 100: the budget
// grows with the requests the server answers, and it answered none. Once
// it has answered 20, the refusals that follow get 2 retries in all.
func TestRetryBudgetStopsAStorm(t *testing.T) {
	var answering atomic.Bool
	g := newGate(t, scripted(nil, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		if answering.Load() {
			return bought(f)
		}
		return busy(f, 0)
	}))
	budget := backoff.NewBudget(backoff.BudgetConfig{Ratio: 0.1, MinPerSecond: 1e-9, Window: 10 * time.Second})
	clk := clock.NewFake(time.Now()) // still: the budget's window never slides
	opts := client.Options{Clock: clk, Rand: constRand(0), NoPacing: true, Budget: budget}
	cs := []*client.Client{dial(t, g, "tom", opts), dial(t, g, "uma", opts)}
	storm := func(n int) (refused int, sent, retries, budgetRefused uint64) {
		for i := range n {
			_, err := buyItem(ctx5s(t), cs[i%2], "potion", 1)
			if !client.IsBusy(err) {
				t.Fatalf("request %d: %v", i, err)
			}
			if errors.Is(err, client.ErrRetryBudget) {
				refused++
			}
		}
		for _, c := range cs {
			st := c.Stats()
			sent, retries, budgetRefused = sent+st.Sent, retries+st.Retries, budgetRefused+st.BudgetRefused
		}
		return
	}
	if refused, sent, retries, budgetRefused := storm(50); retries != 0 || sent != 50 || budgetRefused != 50 || refused != 50 {
		t.Fatalf("retries %d, sent %d, budget refusals %d (%d errors)", retries, sent, budgetRefused, refused)
	}
	answering.Store(true)
	for i := range 20 {
		if _, err := buyItem(ctx5s(t), cs[i%2], "potion", 1); err != nil {
			t.Fatal(err)
		}
	}
	answering.Store(false)
	// 20 answered requests left 2 retries: the first refusal takes both
	// (its 3 attempts, then the policy gives up), the other 49 none.
	if refused, sent, retries, budgetRefused := storm(50); retries != 2 || sent != 50+20+50+2 || budgetRefused != 50+49 || refused != 49 {
		t.Fatalf("after 20 answered: retries %d, sent %d, budget refusals %d (%d errors)", retries, sent, budgetRefused, refused)
	}
}

// Business and other errors that are neither refusals for load nor
// outcome-unknown answers come back at once, never retried; SHUTTING_DOWN
// neither, on the connection the gate is closing (see
// TestLostInFlightResentAfterReconnect).
func TestRetryNotForOtherErrors(t *testing.T) {
	codes := []leveev2.ErrorCode{
		leveev2.ErrorCode_ERROR_CODE_REJECTED, leveev2.ErrorCode_ERROR_CODE_NOT_FOUND,
		leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, leveev2.ErrorCode_ERROR_CODE_FORBIDDEN,
		leveev2.ErrorCode_ERROR_CODE_INTERNAL, leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE,
		leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN,
	}
	g := newGate(t, scripted(nil, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		return refusal(f, codes[n], 100)
	}))
	c := dial(t, g, "vic", client.Options{Rand: constRand(0), NoPacing: true})
	for _, code := range codes {
		if _, err := buyItem(ctx5s(t), c, "potion", 1); client.Code(err) != code {
			t.Fatalf("%v: err = %v", code, err)
		}
	}
	if st := c.Stats(); st.Sent != uint64(len(codes)) || st.Retries != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// A retry whose wait would outlast the caller's deadline, or leave less
// than MinRetryBudget of it for its attempt (whose answer would race the
// deadline), is not waited for: the refusal comes back at once.
func TestRetryNotPastTheDeadline(t *testing.T) {
	for _, retryAfterMs := range []uint32{2000, 950} { // 1 s left: 2 s outlasts it, 950 ms + MinRetryBudget too
		clk := clock.NewFake(time.Now())
		g := newGate(t, scripted(nil, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame { return busy(f, retryAfterMs) }))
		c := dial(t, g, "wes", client.Options{Clock: clk, Rand: constRand(0), NoPacing: true})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := buyItem(ctx, c, "potion", 1)
		if !client.IsBusy(err) || !errors.Is(err, client.ErrRetryDeadline) || client.RetryAfter(err) != time.Duration(retryAfterMs)*time.Millisecond {
			t.Fatalf("retry_after %d ms: err = %v, want BUSY wrapping ErrRetryDeadline", retryAfterMs, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("retry_after %d ms: the call waited for its deadline", retryAfterMs)
		}
		cancel()
		if st := c.Stats(); st.Sent != 1 || st.RetryDeadline != 1 || st.Retries != 0 || clk.Waiters() != 0 {
			t.Fatalf("retry_after %d ms: stats = %+v, timers %d", retryAfterMs, st, clk.Waiters())
		}
	}
}

// said and why there was no retry.
func TestRetryWaitEndsWithCtx(t *testing.T) {
	clk := clock.NewFake(time.Now())
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame { return busy(f, 300) }))
	c := dial(t, g, "xia", client.Options{Clock: clk, NoPacing: true})
	ctx, cancel := context.WithCancel(ctx5s(t))
	res := make(chan error, 1)
	go func() {
		_, err := buyItem(ctx, c, "potion", 1)
		res <- err
	}()
	next(t, got)
	testwait.Until(t, "the retry timer", func() bool { return clk.Waiters() == 1 })
	cancel()
	err := result(t, res)
	if !client.IsBusy(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if clk.Waiters() != 0 {
		t.Fatal("the retry timer outlived the call")
	}
	nothing(t, got)
}

// NoRetry: a busy refusal comes back as it came.
func TestNoRetry(t *testing.T) {
	g := newGate(t, scripted(nil, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame { return busy(f, 0) }))
	c := dial(t, g, "yan", client.Options{NoRetry: true, Rand: constRand(0)})
	_, err := buyItem(ctx5s(t), c, "potion", 1)
	if !client.IsBusy(err) || errors.Is(err, client.ErrRetryBudget) {
		t.Fatalf("err = %v", err)
	}
	if st := c.Stats(); st.Sent != 1 || st.Retries != 0 || st.Requests != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// Many concurrent callers against a server that refuses a third of the
// attempts at random: every call ends, a retry always repeats its own
// request's id, and different requests never share one.
func TestRetryConcurrentIDs(t *testing.T) {
	var mu sync.Mutex
	owner := map[uint64]string{} // request id -> the player id the request asked for
	clash := ""
	g := newGate(t, scripted(nil, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		want := profileReq(f).GetPlayerId()
		mu.Lock()
		if o, ok := owner[f.GetRequestId()]; ok && o != want {
			clash = o + " and " + want
		}
		owner[f.GetRequestId()] = want
		mu.Unlock()
		if n%3 == 1 {
			r := busy(f, 1)
			r.Backpressure = &leveev2.Backpressure{Ratio: 0.5}
			return r
		}
		return clienttest.Reply(f, &arenapb.ProfileReply{Player: &arenapb.Player{Id: want}})
	}))
	c := dial(t, g, "zed", client.Options{Retry: backoff.Policy{Base: time.Millisecond, Cap: 2 * time.Millisecond},
		Budget: backoff.NewBudget(backoff.BudgetConfig{Ratio: 1}), Pacer: pacerFast})
	var wg sync.WaitGroup
	const workers, each = 8, 25
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				want := string(rune('a'+w)) + "-" + string(rune('a'+i))
				p, err := getProfile(ctx5s(t), c, want)
				if err == nil && p.GetId() != want {
					t.Errorf("asked %s, got %s", want, p.GetId())
				}
				if err != nil && !client.IsBusy(err) {
					t.Errorf("%s: %v", want, err)
				}
			}
		})
	}
	wg.Wait()
	if clash != "" {
		t.Fatalf("one request id for %s", clash)
	}
	st := c.Stats()
	if st.Requests != workers*each || len(owner) != workers*each || st.Retries == 0 || st.Sent != st.Requests+st.Retries || st.Unexpected != 0 {
		t.Fatalf("stats = %+v, %d ids", st, len(owner))
	}
}
