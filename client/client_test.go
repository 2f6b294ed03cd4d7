package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/client/internal/codec"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/token"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

var secret = []byte("test-secret")

func mint(t *testing.T, player string) string {
	t.Helper()
	tok, err := token.Sign(secret, player, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newGate(t *testing.T, h clienttest.Handler) *clienttest.Gate {
	t.Helper()
	g := clienttest.NewGameGate(secret, arena.Game(), nil, h)
	t.Cleanup(g.Close)
	return g
}

func dial(t *testing.T, g *clienttest.Gate, player string, opts client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, g.URL(), mint(t, player), withArena(opts))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx5s(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitDone fails the test if the client's reader has not ended in time.
func waitDone(t *testing.T, c *client.Client) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("reader goroutine did not end")
	}
}

func TestWelcomeAndCalls(t *testing.T) {
	g := newGate(t, arenaPlay)
	c := dial(t, g, "alice", client.Options{})
	if c.PlayerID() != "alice" || mustProfile(t, c).GetGold() != arena.StartGold {
		t.Fatalf("welcome = %v", c.Welcome())
	}
	if c.Backpressure() != nil {
		t.Fatalf("backpressure before any reply: %v", c.Backpressure())
	}
	ctx := ctx5s(t)
	p, err := getProfile(ctx, c, "")
	if err != nil || p.GetId() != "alice" {
		t.Fatalf("GetProfile = %v, %v", p, err)
	}
	if c.Backpressure() == nil {
		t.Fatal("no backpressure hints recorded")
	}
	buy, err := buyItem(ctx, c, "potion", 2)
	if err != nil || buy.GetGoldSpent() != 20 || buy.GetPlayer().GetInventory()["potion"] != 2 {
		t.Fatalf("BuyItem = %v, %v", buy, err)
	}
	bt, err := startBattle(ctx, c, "b1", 4, 100)
	if err != nil || bt.GetBattleId() != "b1" || !bt.GetWon() {
		t.Fatalf("StartBattle = %v, %v", bt, err)
	}
	_, err = buyItem(ctx, c, "sword", 100)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != leveev2.ErrorCode_ERROR_CODE_REJECTED || !ce.IsBusiness() || ce.Retryable() {
		t.Fatalf("expensive BuyItem err = %#v", err)
	}
	if !errors.Is(err, &client.Error{Code: leveev2.ErrorCode_ERROR_CODE_REJECTED}) {
		t.Fatal("errors.Is by code failed")
	}
	if st := c.Stats(); st.Sent != 4 || st.Replies != 4 || st.Late != 0 || st.Unexpected != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestBadToken(t *testing.T) {
	g := newGate(t, arenaPlay)
	bad, _ := token.Sign([]byte("other"), "mallory", time.Now().Add(time.Hour))
	c, err := client.Dial(ctx5s(t), g.URL(), bad, client.Options{})
	if c != nil || err == nil {
		t.Fatal("dial with a forged token succeeded")
	}
	if client.Code(err) != leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED {
		t.Fatalf("code = %v (%v)", client.Code(err), err)
	}
	if client.CloseCode(err) != websocket.ClosePolicyViolation {
		t.Fatalf("close code = %d (%v)", client.CloseCode(err), err)
	}
	if strings.Contains(err.Error(), bad) {
		t.Fatal("error leaks the token")
	}
}

// A handler that collects n requests, then answers them in reverse order,
// echoing each request's player id.
func TestOutOfOrderReplies(t *testing.T) {
	const n = 5
	frames := make(chan *leveev2.ClientFrame, n)
	g := newGate(t, func(c *clienttest.Conn) {
		var got []*leveev2.ClientFrame
		for len(got) < n {
			f, err := c.Recv()
			if err != nil {
				return
			}
			got = append(got, f)
			frames <- f
		}
		for i := len(got) - 1; i >= 0; i-- {
			id := profileReq(got[i]).GetPlayerId()
			_ = c.Send(clienttest.Reply(got[i], &arenapb.ProfileReply{Player: &arenapb.Player{Id: id}}))
		}
		for {
			if _, err := c.Recv(); err != nil {
				return
			}
		}
	})
	c := dial(t, g, "bob", client.Options{})
	ctx := ctx5s(t)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			want := "p" + string(rune('a'+i))
			p, err := getProfile(ctx, c, want)
			if err == nil && p.GetId() != want {
				err = errors.New("got " + p.GetId() + ", want " + want)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	close(frames)
	ids := map[uint64]bool{}
	for f := range frames {
		if f.GetRequestId() == 0 || f.GetRequestId() >= 1<<53 || ids[f.GetRequestId()] {
			t.Errorf("bad or repeated request id %d", f.GetRequestId())
		}
		ids[f.GetRequestId()] = true
		if f.GetCriticality() != leveev2.Criticality_CRITICALITY_DEFAULT {
			t.Errorf("GetProfile criticality = %v", f.GetCriticality())
		}
		// The remaining budget (under 5 s) less the 250 ms reply margin.
		if f.GetTimeoutMs() == 0 || f.GetTimeoutMs() > 4750 {
			t.Errorf("timeout_ms = %d, want the remaining budget less the reply margin", f.GetTimeoutMs())
		}
	}
}

// oneReply answers every request with the reply build returns.
func oneReply(build func(f *leveev2.ClientFrame) *leveev2.ServerFrame) clienttest.Handler {
	return func(c *clienttest.Conn) {
		for {
			f, err := c.Recv()
			if err != nil {
				return
			}
			if err := c.Send(build(f)); err != nil {
				return
			}
		}
	}
}

func TestTypedErrors(t *testing.T) {
	g := newGate(t, oneReply(func(f *leveev2.ClientFrame) *leveev2.ServerFrame {
		if f.GetCriticality() != leveev2.Criticality_CRITICALITY_CRITICAL {
			return clienttest.Reply(f, &leveev2.Error{Code: leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, Message: "want CRITICAL"})
		}
		r := clienttest.Reply(f, &leveev2.Error{Code: leveev2.ErrorCode_ERROR_CODE_BUSY, Message: "shard busy", RetryAfterMs: 250})
		r.Backpressure = &leveev2.Backpressure{QueueDepth: 450, Ratio: 0.9, RetryAfterMs: 250}
		return r
	}))
	// Retries are tested in retry_test.go; here the refusal comes back as is.
	c := dial(t, g, "carol", client.Options{NoRetry: true})
	_, err := buyItem(ctx5s(t), c, "sword", 1)
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *client.Error", err)
	}
	if ce.Code != leveev2.ErrorCode_ERROR_CODE_BUSY || ce.Message != "shard busy" || ce.RetryAfter != 250*time.Millisecond {
		t.Fatalf("error = %+v", ce)
	}
	if !client.IsBusy(err) || !client.Retryable(err) || client.RetryAfter(err) != 250*time.Millisecond || ce.IsBusiness() {
		t.Fatal("helpers disagree with BUSY")
	}
	if bp := c.Backpressure(); bp.GetQueueDepth() != 450 || bp.GetRatio() != 0.9 {
		t.Fatalf("backpressure = %v", bp)
	}
	if _, err := startBattle(ctx5s(t), c, "b", 4, 50); client.Code(err) != leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST {
		t.Fatalf("StartBattle is CRITICAL: %v", err)
	}
	crit := client.WithCriticality(ctx5s(t), leveev2.Criticality_CRITICALITY_CRITICAL)
	if _, err := startBattle(crit, c, "b", 4, 50); client.Code(err) != leveev2.ErrorCode_ERROR_CODE_BUSY {
		t.Fatalf("WithCriticality(CRITICAL) StartBattle: %v", err)
	}
	// Do returns the frame too, with its error.
	f, err := c.Do(ctx5s(t), frame(arena.ActionGetProfile, &arenapb.GetProfileRequest{}))
	if f.GetError() == nil || client.Code(err) != leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST {
		t.Fatalf("Do = %v, %v", f, err)
	}
}

func TestUnexpectedPayload(t *testing.T) {
	g := newGate(t, oneReply(func(f *leveev2.ClientFrame) *leveev2.ServerFrame {
		return clienttest.Reply(f, &arenapb.BattleReply{BattleId: "x"})
	}))
	c := dial(t, g, "dave", client.Options{})
	if _, err := getProfile(ctx5s(t), c, ""); !errors.Is(err, client.ErrUnexpectedReply) {
		t.Fatalf("err = %v", err)
	}
}

// The first call's ctx expires while the gate holds its reply; the reply
// arrives later and must be dropped (counted late, as a stray one is
// counted unexpected), not handed to the next call, on both subprotocols.
func TestDeadlineAndLateReply(t *testing.T) {
	for _, json := range []bool{false, true} {
		t.Run(map[bool]string{false: "proto", true: "json"}[json], func(t *testing.T) {
			received := make(chan *leveev2.ClientFrame, 1)
			release := make(chan struct{})
			g := newGate(t, func(c *clienttest.Conn) {
				f, err := c.Recv()
				if err != nil {
					return
				}
				received <- f
				select {
				case <-release:
				case <-c.Context().Done():
					return
				}
				_ = c.Send(clienttest.Reply(f, &arenapb.ProfileReply{Player: &arenapb.Player{Id: "late"}}))
				// A stray reply nobody asked for.
				if c.JSON() {
					_ = c.SendRaw([]byte(`{"requestId":"12345","reply":{"player":{"id":"stray"}}}`))
				} else {
					_ = c.Send(clienttest.Reply(&leveev2.ClientFrame{RequestId: 12345}, &arenapb.ProfileReply{}))
				}
				arenaPlay(c)
			})
			c := dial(t, g, "erin", client.Options{JSON: json})
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := getProfile(ctx, c, "")
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want deadline exceeded", err)
			}
			f := <-received
			if f.GetTimeoutMs() == 0 || f.GetTimeoutMs() > 50 {
				t.Fatalf("timeout_ms = %d, want <= 50 (100 ms less the 50 ms reply margin)", f.GetTimeoutMs())
			}
			close(release)
			// The next reply comes after the late one on the same connection.
			p, err := getProfile(ctx5s(t), c, "")
			if err != nil || p.GetId() != "erin" {
				t.Fatalf("next call = %v, %v (got the late reply?)", p, err)
			}
			if st := c.Stats(); st.Late != 1 || st.Unexpected != 1 || st.Replies != 1 || st.Sent != 2 {
				t.Fatalf("stats = %+v", st)
			}
			// An expired context is refused before anything is sent.
			if _, err := getProfile(ctx, c, ""); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("expired ctx: %v", err)
			}
			if c.Stats().Sent != 2 {
				t.Fatal("a request was sent with an expired context")
			}
		})
	}
}

func TestServerClose1013FailsPending(t *testing.T) {
	const n = 3
	g := newGate(t, func(c *clienttest.Conn) {
		for range n {
			if _, err := c.Recv(); err != nil {
				return
			}
		}
		_ = c.CloseWith(websocket.CloseTryAgainLater, "overloaded")
		for {
			if _, err := c.Recv(); err != nil {
				return
			}
		}
	})
	c := dial(t, g, "frank", client.Options{})
	ctx := ctx5s(t)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = getProfile(ctx, c, "") })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, client.ErrClosed) || client.CloseCode(err) != 1013 {
			t.Errorf("call %d: err = %v, want ErrClosed with close 1013", i, err)
		}
	}
	waitDone(t, c)
	var ce *client.CloseError
	if !errors.As(c.Err(), &ce) || ce.Code != 1013 || ce.Text != "overloaded" || !errors.Is(c.Err(), client.ErrClosed) {
		t.Fatalf("Err() = %v", c.Err())
	}
	if _, err := getProfile(ctx, c, ""); !errors.Is(err, client.ErrClosed) || client.CloseCode(err) != 1013 {
		t.Fatalf("call after close: %v", err)
	}
}

func TestJSONMode(t *testing.T) {
	sawJSON := make(chan bool, 2)
	g := newGate(t, func(c *clienttest.Conn) {
		sawJSON <- c.JSON()
		arenaPlay(c)
	})
	for _, json := range []bool{true, false} {
		c := dial(t, g, "gina", client.Options{JSON: json})
		if got := <-sawJSON; got != json {
			t.Fatalf("gate saw JSON=%v, want %v", got, json)
		}
		if r, err := buyItem(ctx5s(t), c, "shield", 1); err != nil || r.GetGoldSpent() != 80 {
			t.Fatalf("json=%v: BuyItem = %v, %v", json, r, err)
		}
		if _, err := buyItem(ctx5s(t), c, "dragon", 1); client.Code(err) != leveev2.ErrorCode_ERROR_CODE_NOT_FOUND {
			t.Fatalf("json=%v: unknown item: %v", json, err)
		}
	}
}

func TestCloseIsCleanAndIdempotent(t *testing.T) {
	serverSaw := make(chan error, 1)
	received := make(chan struct{})
	g := newGate(t, func(c *clienttest.Conn) {
		if _, err := c.Recv(); err != nil {
			serverSaw <- err
			return
		}
		close(received) // never answer
		_, err := c.Recv()
		serverSaw <- err
	})
	c := dial(t, g, "hank", client.Options{})
	callErr := make(chan error, 1)
	go func() {
		_, err := getProfile(context.Background(), c, "")
		callErr <- err
	}()
	<-received
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitDone(t, c)
	if err := <-callErr; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("pending call: %v", err)
	}
	var ce *websocket.CloseError
	if err := <-serverSaw; !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
		t.Fatalf("gate saw %v, want close 1000", err)
	}
	if !errors.Is(c.Err(), client.ErrClosed) {
		t.Fatalf("Err() = %v", c.Err())
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := getProfile(ctx5s(t), c, ""); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
}

func TestFrameTooLargeIsNotSent(t *testing.T) {
	g := newGate(t, arenaPlay)
	c := dial(t, g, "ivy", client.Options{})
	_, err := getProfile(ctx5s(t), c, strings.Repeat("x", codec.MaxFrame))
	if !errors.Is(err, client.ErrFrameTooLarge) || c.Stats().Sent != 0 {
		t.Fatalf("err = %v, sent = %d", err, c.Stats().Sent)
	}
	if _, err := getProfile(ctx5s(t), c, ""); err != nil {
		t.Fatalf("connection unusable after a refused frame: %v", err)
	}
}

func TestMalformedServerFrame(t *testing.T) {
	g := newGate(t, func(c *clienttest.Conn) {
		if _, err := c.Recv(); err != nil {
			return
		}
		_ = c.SendRaw([]byte{0xff, 0xff, 0xff})
		for {
			if _, err := c.Recv(); err != nil {
				return
			}
		}
	})
	c := dial(t, g, "jack", client.Options{})
	_, err := getProfile(ctx5s(t), c, "")
	if !errors.Is(err, client.ErrClosed) || !errors.Is(err, client.ErrProtocol) {
		t.Fatalf("err = %v", err)
	}
	waitDone(t, c)
}

func TestRequestIDsAreRandomPerClient(t *testing.T) {
	ids := make(chan uint64, 4)
	g := newGate(t, func(c *clienttest.Conn) {
		for {
			f, err := c.Recv()
			if err != nil {
				return
			}
			ids <- f.GetRequestId()
			_ = c.Send(clienttest.Reply(f, &arenapb.ProfileReply{}))
		}
	})
	var firsts []uint64
	for range 2 {
		c := dial(t, g, "kim", client.Options{})
		for range 2 {
			if _, err := getProfile(ctx5s(t), c, ""); err != nil {
				t.Fatal(err)
			}
		}
		a, b := <-ids, <-ids
		if b != a+1 {
			t.Fatalf("ids %d, %d: want consecutive", a, b)
		}
		firsts = append(firsts, a)
	}
	if firsts[0] == firsts[1] {
		t.Fatalf("two sessions started at the same request id %d", firsts[0])
	}
}

// rawServer upgrades (or not) and then does what f says.
func rawServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return "ws" + strings.TrimPrefix(s.URL, "http") + "/ws"
}

func TestHandshakeRefusals(t *testing.T) {
	url := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		http.Error(w, "gate full", http.StatusServiceUnavailable)
	})
	_, err := client.Dial(ctx5s(t), url, "tok", client.Options{})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != leveev2.ErrorCode_ERROR_CODE_SERVER_FULL || ce.RetryAfter != 3*time.Second || !ce.IsBusy() {
		t.Fatalf("503: %v", err)
	}

	up := websocket.Upgrader{Subprotocols: codec.Subprotocols}
	url = rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "overloaded"), time.Now().Add(time.Second))
		_, _, _ = ws.ReadMessage() // wait for the client's answer
	})
	_, err = client.Dial(ctx5s(t), url, "tok", client.Options{})
	if !errors.Is(err, client.ErrClosed) || client.CloseCode(err) != 1013 {
		t.Fatalf("close before welcome: %v", err)
	}

	// A gate that never says welcome: Dial gives up with its context.
	url = rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		_, _, _ = ws.ReadMessage()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := client.Dial(ctx, url, "tok", client.Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no welcome: %v", err)
	}
}

// The server is given the budget less a margin for the reply's way back,
// so that its DEADLINE_EXCEEDED arrives before the call gives up.
func TestReplyMargin(t *testing.T) {
	for _, c := range []struct{ left, want time.Duration }{
		{5 * time.Second, 250 * time.Millisecond},
		{2 * time.Second, 100 * time.Millisecond},
		{time.Second, 50 * time.Millisecond},
		{100 * time.Millisecond, 50 * time.Millisecond},
		{60 * time.Millisecond, 30 * time.Millisecond},
		{10 * time.Millisecond, 5 * time.Millisecond},
		{time.Minute, 250 * time.Millisecond},
	} {
		if got := client.ReplyMargin(c.left); got != c.want {
			t.Errorf("ReplyMargin(%v) = %v, want %v", c.left, got, c.want)
		}
	}
}
