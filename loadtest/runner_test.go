package loadtest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"levee/client"
	"levee/client/clienttest"
	leveev1 "levee/proto/leveev1"
)

const testSecret = "test-secret"

func startGate(t *testing.T, h clienttest.Handler) *clienttest.Gate {
	t.Helper()
	g := clienttest.NewGate([]byte(testSecret), h)
	t.Cleanup(g.Close)
	return g
}

func newTestRunner(t *testing.T, g *clienttest.Gate, mut func(*RunnerConfig)) *Runner {
	t.Helper()
	cfg := DefaultRunnerConfig()
	cfg.GateURL = g.URL()
	cfg.TokenSecret = testSecret
	cfg.RequestTimeout = 2 * time.Second
	cfg.Seed = 42
	cfg.ProgressEvery = 0
	if mut != nil {
		mut(&cfg)
	}
	r, err := NewRunner(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func checkAccounting(t *testing.T, rep *Report) {
	t.Helper()
	if rep.Sent != rep.Answered+Sum(rep.Lost) {
		t.Errorf("sent %d != answered %d + lost %d", rep.Sent, rep.Answered, Sum(rep.Lost))
	}
	if rep.Replies < uint64(rep.Answered) || rep.Replies > uint64(rep.Answered)+rep.Retries {
		t.Errorf("clients matched %d replies, %d answered after %d retries", rep.Replies, rep.Answered, rep.Retries)
	}
	if rep.OK+Sum(rep.Business)+Sum(rep.Overload)+Sum(rep.Failed) != rep.Answered {
		t.Errorf("answered %d != ok + errors: %+v", rep.Answered, rep)
	}
	if rep.Latency.Count != rep.Answered {
		t.Errorf("%d latency samples for %d answered", rep.Latency.Count, rep.Answered)
	}
}

// A short smoke run against a well-behaved gate passes.
func TestRunSmoke(t *testing.T) {
	var jsonConns atomic.Int32
	g := startGate(t, func(c *clienttest.Conn) {
		if c.JSON() {
			jsonConns.Add(1)
		}
		clienttest.Game(c)
	})
	r := newTestRunner(t, g, func(c *RunnerConfig) { c.JSONFraction = 0.5 })
	sm := SmokeConfig{Bots: 6, Ramp: 60 * time.Millisecond, Duration: 600 * time.Millisecond,
		Think: 20 * time.Millisecond, ThinkJitter: 0.5, Items: []string{"potion", "sword", "shield"}, OverspendFraction: 0.3}
	if err := sm.Validate(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err := r.Run(context.Background(), sm.Scenario())
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > sm.Duration+r.cfg.RequestTimeout+time.Second {
		t.Errorf("run took %v, over its bound", el)
	}
	checkAccounting(t, rep)
	if p := rep.Problems(); len(p) != 0 {
		t.Fatalf("problems: %v", p)
	}
	if rep.Bots != 6 || rep.Arrived != 6 || rep.Connected != 6 || jsonConns.Load() != 3 {
		t.Fatalf("bots %d arrived %d connected %d json %d", rep.Bots, rep.Arrived, rep.Connected, jsonConns.Load())
	}
	if rep.Sent < 6*3 || uint64(rep.Sent) != rep.Frames {
		t.Fatalf("sent %d, frames %d", rep.Sent, rep.Frames)
	}
	for _, op := range []string{OpGetProfile, OpBuyItem, OpStartBattle} {
		if rep.Ops[op] == nil || rep.Ops[op].OK == 0 {
			t.Errorf("no successful %s: %+v", op, rep.Ops[op])
		}
	}
	if rep.Throughput <= 0 || rep.Latency.P99 <= 0 || rep.Latency.P99 > rep.Latency.Max {
		t.Errorf("latency %+v, throughput %v", rep.Latency, rep.Throughput)
	}
}

// script is a Behaviour that makes a fixed list of purchases.
type script []string

func (s script) Run(b *Bot) {
	b.Call(OpGetProfile, func(ctx context.Context, c *client.Client) error {
		_, err := c.GetProfile(ctx, "")
		return err
	})
	for _, item := range s {
		q := int32(1)
		if item == "sword" {
			q = 100
		}
		b.Call(OpBuyItem, func(ctx context.Context, c *client.Client) error {
			_, err := c.BuyItem(ctx, item, q)
			return err
		})
	}
}

// Every kind of outcome, end to end through the runner.
func TestRunClassifiesOutcomes(t *testing.T) {
	g := startGate(t, func(c *clienttest.Conn) {
		p := &leveev1.Player{Id: c.Player, Gold: clienttest.StartGold, Inventory: map[string]uint32{}}
		n := 0
		for {
			f, err := c.Recv()
			if err != nil {
				return
			}
			var out any
			switch f.GetBuyItem().GetItemId() {
			case "busy":
				out = &leveev1.Error{Code: leveev1.ErrorCode_ERROR_CODE_BUSY, RetryAfterMs: 100}
			case "boom":
				out = &leveev1.Error{Code: leveev1.ErrorCode_ERROR_CODE_INTERNAL}
			case "silent":
				continue // never answered
			default:
				out = clienttest.GameReply(p, f, &n)
			}
			if c.Send(clienttest.Reply(f, out)) != nil {
				return
			}
		}
	})
	r := newTestRunner(t, g, func(c *RunnerConfig) { c.RequestTimeout = 500 * time.Millisecond })
	sc := Scenario{Name: "script", Bots: 2, Arrivals: LinearRamp(0), Duration: 10 * time.Second, MaxRequests: 100,
		Behaviour: script{"potion", "sword", "dragon", "busy", "boom", "silent"}}
	rep, err := r.Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, rep)
	want := map[string]map[string]int{
		"business": {"INSUFFICIENT_GOLD": 2, "NOT_FOUND": 2},
		"overload": {"BUSY": 2},
		"failed":   {"INTERNAL": 2},
		"lost":     {LostTimeout: 2},
	}
	got := map[string]map[string]int{"business": rep.Business, "overload": rep.Overload, "failed": rep.Failed, "lost": rep.Lost}
	for k, w := range want {
		if len(got[k]) != len(w) {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
		for code, n := range w {
			if got[k][code] != n {
				t.Errorf("%s = %v, want %v", k, got[k], w)
			}
		}
	}
	if rep.Sent != 14 || rep.OK != 4 || rep.Answered != 12 {
		t.Errorf("sent %d ok %d answered %d", rep.Sent, rep.OK, rep.Answered)
	}
	if rep.Passed() || len(rep.Problems()) != 3 {
		t.Errorf("problems = %v", rep.Problems())
	}
}

func TestRunDialFailures(t *testing.T) {
	g := startGate(t, clienttest.Game)
	r := newTestRunner(t, g, func(c *RunnerConfig) { c.TokenSecret = "wrong" })
	rep, err := r.Run(context.Background(), Scenario{Name: "x", Bots: 3, Arrivals: LinearRamp(0), Duration: 5 * time.Second,
		MaxRequests: 10, Behaviour: script{"potion"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Dialed != 3 || rep.Connected != 0 || rep.DialFailures["UNAUTHORIZED"] != 3 || rep.Sent != 0 || rep.Passed() {
		t.Fatalf("report = %+v, problems %v", rep, rep.Problems())
	}
}

// The gate drops every player with 1013 on its third request.
func TestRunServerCloses(t *testing.T) {
	g := startGate(t, func(c *clienttest.Conn) {
		p := &leveev1.Player{Id: c.Player, Gold: clienttest.StartGold, Inventory: map[string]uint32{}}
		n := 0
		for i := 0; ; i++ {
			f, err := c.Recv()
			if err != nil {
				return
			}
			if i == 2 {
				_ = c.CloseWith(websocket.CloseTryAgainLater, "overloaded")
				continue
			}
			if c.Send(clienttest.Reply(f, clienttest.GameReply(p, f, &n))) != nil {
				return
			}
		}
	})
	r := newTestRunner(t, g, nil)
	sm := SmokeConfig{Bots: 3, Duration: 5 * time.Second, Think: time.Millisecond, Items: []string{"potion"}}
	rep, err := r.Run(context.Background(), sm.Scenario())
	if err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, rep)
	if rep.Sent != 9 || rep.Lost[LostClosed] != 3 || rep.Disconnects["close 1013"] != 3 {
		t.Fatalf("sent %d lost %v disconnects %v", rep.Sent, rep.Lost, rep.Disconnects)
	}
}

func TestRunBudget(t *testing.T) {
	g := startGate(t, clienttest.Game)
	r := newTestRunner(t, g, nil)
	sm := SmokeConfig{Bots: 2, Duration: 10 * time.Second, Think: time.Millisecond, Items: []string{"potion"}, MaxRequests: 7}
	rep, err := r.Run(context.Background(), sm.Scenario())
	if err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, rep)
	if rep.Sent != 7 || !rep.BudgetExhausted || !rep.Passed() {
		t.Fatalf("sent %d exhausted %v problems %v", rep.Sent, rep.BudgetExhausted, rep.Problems())
	}
}

// cancelAfterFirst cancels the run from inside, like a signal would.
type cancelAfterFirst struct{ cancel context.CancelFunc }

func (c cancelAfterFirst) Run(b *Bot) {
	b.Call(OpGetProfile, func(ctx context.Context, c *client.Client) error {
		_, err := c.GetProfile(ctx, "")
		return err
	})
	c.cancel()
	for b.Think(time.Hour) {
	}
	if err := b.Call("never", nil); !errors.Is(err, ErrStopped) {
		panic("a stopped bot sent a request")
	}
}

func TestRunInterrupted(t *testing.T) {
	g := startGate(t, clienttest.Game)
	r := newTestRunner(t, g, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := r.Run(ctx, Scenario{Name: "x", Bots: 1, Arrivals: LinearRamp(0), Duration: time.Hour, MaxRequests: 10,
		Behaviour: cancelAfterFirst{cancel}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || rep.Sent != 1 || rep.OK != 1 || rep.Passed() {
		t.Fatalf("report = %+v", rep)
	}
}

func TestRunRefusesNonLocal(t *testing.T) {
	cfg := DefaultRunnerConfig()
	cfg.GateURL = "ws://10.0.0.1:8080/ws"
	r, err := NewRunner(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background(), DefaultSmoke().Scenario())
	if !errors.Is(err, ErrNonLocal) {
		t.Fatalf("err = %v, want ErrNonLocal", err)
	}
}

// -source-addr takes a loopback IP address, nothing else, and an invalid
// one stops the runner before anything is dialed.
func TestRunnerConfigSourceAddr(t *testing.T) {
	for _, ok := range []string{"127.0.0.11", "127.255.0.1", "::1"} {
		cfg := DefaultRunnerConfig()
		cfg.SourceAddr = ok
		if err := cfg.Validate(); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.1", "0.0.0.0", "127.0.0.1:5000", "localhost", "fe80::1"} {
		cfg := DefaultRunnerConfig()
		cfg.SourceAddr = bad
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "-source-addr") {
			t.Errorf("%q: err = %v, want a -source-addr error", bad, err)
		}
		if _, err := NewRunner(cfg, nil); err == nil {
			t.Errorf("%q: NewRunner accepted it", bad)
		}
	}
}
