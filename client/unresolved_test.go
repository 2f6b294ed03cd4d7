package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// A purchase answered UNAVAILABLE or DEADLINE_EXCEEDED (the tier below may
// have committed it) is resent with the same request id, after the
// server's retry_after plus the jitter (rnd 0.5 over the first 100 ms
// ceiling: 50 ms) and not a moment sooner, and the second answer is the
// one returned.
func TestOutcomeUnknownResentWithSameID(t *testing.T) {
	for _, code := range []leveev2.ErrorCode{leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, leveev2.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED} {
		t.Run(client.CodeName(code), func(t *testing.T) {
			clk := clock.NewFake(time.Now())
			got := make(chan *leveev2.ClientFrame, 8)
			g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
				if n == 0 {
					return refusal(f, code, 1000)
				}
				return clienttest.Reply(f, &arenapb.BuyItemReply{Player: &arenapb.Player{Gold: 900}, GoldSpent: 100})
			}))
			c := dial(t, g, "uma", client.Options{Clock: clk, Rand: constRand(0.5), NoPacing: true})
			type res struct {
				r   *arenapb.BuyItemReply
				err error
			}
			done := make(chan res, 1)
			go func() {
				r, err := buyItem(ctx5s(t), c, "sword", 1)
				done <- res{r, err}
			}()
			first := next(t, got)
			testwait.Until(t, "the retry timer", func() bool { return clk.Waiters() == 1 })
			clk.Advance(1049 * time.Millisecond)
			nothing(t, got) // the timer is not due: nothing can have been sent
			clk.Advance(time.Millisecond)
			second := next(t, got)
			var out res
			select {
			case out = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("BuyItem did not return")
			}
			if out.err != nil || out.r.GetGoldSpent() != 100 || out.r.GetPlayer().GetGold() != 900 {
				t.Fatalf("BuyItem = %v, %v; want the second answer", out.r, out.err)
			}
			if second.GetRequestId() != first.GetRequestId() || buyReq(second).GetItemId() != "sword" {
				t.Fatalf("resent with id %d, first sent with %d", second.GetRequestId(), first.GetRequestId())
			}
			if st := c.Stats(); st.Requests != 1 || st.Sent != 2 || st.Retries != 1 {
				t.Fatalf("stats = %+v", st)
			}
		})
	}
}

// When the retry budget refuses the resend, the UNAVAILABLE answer is what
// the caller gets, saying that the budget stopped it and that the outcome
// is unknown, with the request to resend later under its own id.
func TestOutcomeUnknownBudgetExhausted(t *testing.T) {
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		return refusal(f, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, 0)
	}))
	empty := backoff.NewBudget(backoff.BudgetConfig{Ratio: 1e-9, MinPerSecond: 1e-9})
	c := dial(t, g, "vera", client.Options{Rand: constRand(0), NoPacing: true, Budget: empty})
	_, err := buyItem(ctx5s(t), c, "sword", 1)
	if client.Code(err) != leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE || !errors.Is(err, client.ErrRetryBudget) || !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want UNAVAILABLE, budget exhausted, outcome unknown", err)
	}
	first := next(t, got)
	nothing(t, got)
	req := client.Unresolved(err)
	if req.GetRequestId() != first.GetRequestId() || buyReq(req).GetItemId() != "sword" {
		t.Fatalf("unresolved request %v, sent %v", req, first)
	}
	if st := c.Stats(); st.Sent != 1 || st.Retries != 0 || st.BudgetRefused != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// UNAVAILABLE every time: three attempts, one id, then the UNAVAILABLE
// error, unresolved. A refusal for load that runs out is not unresolved:
// it was not executed, so a new id would be safe too.
func TestOutcomeUnknownAttemptsExhausted(t *testing.T) {
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		if buyReq(f).GetItemId() == "potion" {
			return busy(f, 0)
		}
		return refusal(f, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, 0)
	}))
	c := dial(t, g, "wyn", client.Options{Rand: constRand(0), NoPacing: true,
		Budget: backoff.NewBudget(backoff.BudgetConfig{Ratio: 1})})
	_, err := buyItem(ctx5s(t), c, "sword", 1)
	if client.Code(err) != leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE || errors.Is(err, client.ErrRetryBudget) {
		t.Fatalf("err = %v", err)
	}
	ids := map[uint64]bool{}
	for range 3 {
		ids[next(t, got).GetRequestId()] = true
	}
	nothing(t, got)
	if req := client.Unresolved(err); len(ids) != 1 || req == nil || !ids[req.GetRequestId()] {
		t.Fatalf("attempts had ids %v, unresolved request %v", ids, req)
	}

	_, err = buyItem(ctx5s(t), c, "potion", 1)
	if !client.IsBusy(err) || client.Unresolved(err) != nil || errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("busy to the end: err = %v", err)
	}
}

// Once an attempt's outcome was unknown the request stays unresolved, even
// when the later attempts are refused for load.
func TestOutcomeUnknownStaysUnresolved(t *testing.T) {
	g := newGate(t, scripted(nil, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		if n == 0 {
			return refusal(f, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, 0)
		}
		return busy(f, 0)
	}))
	c := dial(t, g, "xan", client.Options{Rand: constRand(0), NoPacing: true,
		Budget: backoff.NewBudget(backoff.BudgetConfig{Ratio: 1})})
	_, err := buyItem(ctx5s(t), c, "sword", 1)
	if !client.IsBusy(err) || client.Unresolved(err) == nil {
		t.Fatalf("err = %v, want BUSY and unresolved", err)
	}
}

// A final answer to a resend is the request id's outcome (the server
// executes an id at most once): after UNAVAILABLE, an INSUFFICIENT_GOLD
// resolves the request, so it is not handed back for another resend.
func TestFinalAnswerResolves(t *testing.T) {
	g := newGate(t, scripted(nil, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame {
		if n == 0 {
			return refusal(f, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, 0)
		}
		return refusal(f, leveev2.ErrorCode_ERROR_CODE_REJECTED, 0)
	}))
	c := dial(t, g, "yan", client.Options{Rand: constRand(0), NoPacing: true,
		Budget: backoff.NewBudget(backoff.BudgetConfig{Ratio: 1})})
	_, err := buyItem(ctx5s(t), c, "sword", 1)
	if client.Code(err) != leveev2.ErrorCode_ERROR_CODE_REJECTED || client.Unresolved(err) != nil {
		t.Fatalf("err = %v, want INSUFFICIENT_GOLD and resolved", err)
	}
}

// ledgerGate is a fake gate with a fake logic behind it: purchases are
// applied once per request id (as logic does), and the first send of
// every purchase is "lost" as its tier dies: the connection ends after it
// was applied, with no reply. end says how: a close frame with its code,
// or, with code 0, a SHUTTING_DOWN answer first and then close 1012.
type ledgerGate struct {
	mu      sync.Mutex
	applied map[uint64]int // request id -> times the purchase was applied
	sends   map[uint64]int // request id -> times it arrived
	gold    int64
}

func newLedgerGate(t *testing.T, code int) (*clienttest.Gate, *ledgerGate) {
	l := &ledgerGate{applied: map[uint64]int{}, sends: map[uint64]int{}, gold: arena.StartGold}
	g := newGate(t, func(c *clienttest.Conn) {
		end := code
		for {
			f, err := c.Recv()
			if err != nil {
				return
			}
			id := f.GetRequestId()
			l.mu.Lock()
			l.sends[id]++
			first := l.applied[id] == 0
			if first {
				l.applied[id]++
				l.gold -= 100
			}
			gold := l.gold
			l.mu.Unlock()
			if !first {
				_ = c.Send(clienttest.Reply(f, &arenapb.BuyItemReply{Player: &arenapb.Player{Gold: gold}, GoldSpent: 100}))
				continue
			}
			if end == 0 {
				_ = c.Send(refusal(f, leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN, 0))
				end = websocket.CloseServiceRestart
			}
			_ = c.CloseWith(end, "restarting")
			return
		}
	})
	return g, l
}

// A purchase whose connection was lost while it was in flight (it was
// applied, the reply never came), or that the stopping gate answered
// SHUTTING_DOWN: the error says the outcome is unknown and carries the
// request; after Reconnect, Resend sends it with the same id, the fake
// logic replays it, and the player is charged once.
func TestLostInFlightResentAfterReconnect(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
	}{{"close 1012", websocket.CloseServiceRestart}, {"close 1011", websocket.CloseInternalServerErr}, {"SHUTTING_DOWN", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			g, l := newLedgerGate(t, tc.code)
			clk := clock.NewFake(time.Now())
			opts := client.Options{Clock: clk, Rand: constRand(0), NoPacing: true}
			c := dial(t, g, "yuri", opts)
			_, err := buyItem(ctx5s(t), c, "sword", 1)
			if !errors.Is(err, client.ErrOutcomeUnknown) {
				t.Fatalf("err = %v, want outcome unknown", err)
			}
			req := client.Unresolved(err)
			if req == nil || req.GetRequestId() == 0 {
				t.Fatalf("no request to resend in %v", err)
			}
			// A gate that closes with 1012 (restarting) has answered what
			// it read: the call ends with a typed SHUTTING_DOWN, not none.
			wantCode := leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN
			if tc.code == websocket.CloseInternalServerErr {
				wantCode = leveev2.ErrorCode_ERROR_CODE_UNSPECIFIED
			}
			if got := client.Code(err); got != wantCode {
				t.Fatalf("code %v, want %v (err %v)", got, wantCode, err)
			}
			if st := c.Stats(); st.Sent != 1 {
				t.Fatalf("SHUTTING_DOWN was retried on the closing connection: stats %+v", st)
			}
			<-c.Done()
			// A call made after the close gets the same answer.
			if _, err := getProfile(ctx5s(t), c, ""); client.Code(err) != wantCode {
				t.Fatalf("a call after the close: code %v, want %v (err %v)", client.Code(err), wantCode, err)
			}

			c2, err := client.Reconnect(ctx5s(t), g.URL(), client.StaticToken(mint(t, "yuri")), opts, c.Err())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c2.Close() })
			f, err := c2.Resend(ctx5s(t), req)
			if err != nil || buyRep(f).GetPlayer().GetGold() != arena.StartGold-100 {
				t.Fatalf("Resend = %v, %v", f, err)
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			if len(l.sends) != 1 || l.sends[req.GetRequestId()] != 2 || l.applied[req.GetRequestId()] != 1 || l.gold != arena.StartGold-100 {
				t.Fatalf("sends %v, applied %v, gold %d: want one id sent twice and charged once", l.sends, l.applied, l.gold)
			}
			if st := c2.Stats(); st.Sent != 1 || st.Retries != 1 || st.Requests != 0 {
				t.Fatalf("stats after resend = %+v", st)
			}
		})
	}
}

// A request in flight when its ctx ended may have been executed: the
// error wraps ctx's and carries the request, with the caller's own
// TimeoutMs (not the one the SDK derived from the old ctx).
func TestCtxEndedInFlightIsUnresolved(t *testing.T) {
	got := make(chan *leveev2.ClientFrame, 1)
	g := newGate(t, scripted(got, func(int, *leveev2.ClientFrame) *leveev2.ServerFrame { return nil }))
	c := dial(t, g, "zoe", client.Options{NoPacing: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	f := buyFrame("sword", 1)
	_, err := c.Do(ctx, f)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("err = %v", err)
	}
	sent := next(t, got)
	req := client.Unresolved(err)
	if req.GetRequestId() != sent.GetRequestId() || sent.GetTimeoutMs() == 0 || req.GetTimeoutMs() != 0 || req == f {
		t.Fatalf("unresolved %v (sent %v)", req, sent)
	}

	// A request refused before it was sent is not unresolved.
	_, err = c.Do(ctx, frame(arena.ActionGetProfile, &arenapb.GetProfileRequest{}))
	if !errors.Is(err, context.DeadlineExceeded) || client.Unresolved(err) != nil {
		t.Fatalf("unsent: err = %v", err)
	}
}

// Resend refuses a frame without an id, and a resend the budget does not
// allow; neither sends anything.
func TestResendRefusals(t *testing.T) {
	got := make(chan *leveev2.ClientFrame, 8)
	g := newGate(t, scripted(got, func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame { return bought(f) }))
	empty := backoff.NewBudget(backoff.BudgetConfig{Ratio: 1e-9, MinPerSecond: 1e-9})
	c := dial(t, g, "abe", client.Options{NoPacing: true, Budget: empty})
	buy := func(id uint64) *leveev2.ClientFrame {
		f := buyFrame("sword", 1)
		f.RequestId = id
		return f
	}
	if _, err := c.Resend(ctx5s(t), buy(0)); !errors.Is(err, client.ErrNoRequestID) {
		t.Fatalf("no id: err = %v", err)
	}
	_, err := c.Resend(ctx5s(t), buy(42))
	if !errors.Is(err, client.ErrRetryBudget) || client.Unresolved(err).GetRequestId() != 42 {
		t.Fatalf("no budget: err = %v", err)
	}
	nothing(t, got)
	if st := c.Stats(); st.Sent != 0 || st.BudgetRefused != 1 {
		t.Fatalf("stats = %+v", st)
	}
}
