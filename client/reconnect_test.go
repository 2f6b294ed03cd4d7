package client_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/client/internal/codec"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// flakyGate refuses the first fails handshakes with 503 (and Retry-After
// retryAfter seconds, if > 0), then lets players in with a Welcome and
// holds them until they leave. It counts the attempts.
func flakyGate(t *testing.T, fails int64, retryAfter int) (url string, attempts *atomic.Int64) {
	t.Helper()
	attempts = new(atomic.Int64)
	up := websocket.Upgrader{Subprotocols: codec.Subprotocols}
	url = rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) <= fails {
			if retryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
			}
			http.Error(w, "full", http.StatusServiceUnavailable)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		cd, _ := codec.ForSubprotocol(ws.Subprotocol(), nil)
		data, _ := cd.EncodeServer(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Welcome{
			Welcome: &leveev2.Welcome{PlayerId: "p"}}}, "")
		if ws.WriteMessage(websocket.BinaryMessage, data) != nil {
			return
		}
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	})
	return url, attempts
}

type dialResult struct {
	c   *client.Client
	err error
}

func dialAsync(f func() (*client.Client, error)) <-chan dialResult {
	ch := make(chan dialResult, 1)
	go func() {
		c, err := f()
		ch <- dialResult{c, err}
	}()
	return ch
}

func awaitDial(t *testing.T, ch <-chan dialResult) (*client.Client, error) {
	t.Helper()
	select {
	case r := <-ch:
		if r.c != nil {
			t.Cleanup(func() { r.c.Close() })
		}
		return r.c, r.err
	case <-time.After(5 * time.Second):
		t.Fatal("dial did not return")
		return nil, nil
	}
}

// Reconnect waits a random delay in [0, Spread) before its first dial (rnd
// 0.5 of 2 s: 1 s), then backs off: 50 ms (half of 100 ms), 100 ms (half of
// 200 ms).
func TestReconnectSpreadsThenBacksOff(t *testing.T) {
	url, attempts := flakyGate(t, 2, 0)
	clk := clock.NewFake(time.Now())
	opts := client.Options{Clock: clk, Rand: constRand(0.5), Reconnect: backoff.Reconnect{Spread: 2 * time.Second}}
	ch := dialAsync(func() (*client.Client, error) {
		return client.Reconnect(ctx5s(t), url, client.StaticToken("tok"), opts, nil)
	})
	for i, wait := range []time.Duration{time.Second, 50 * time.Millisecond, 100 * time.Millisecond} {
		testwait.Until(t, "a redial wait", func() bool { return clk.Waiters() == 1 && attempts.Load() == int64(i) })
		clk.Advance(wait - time.Millisecond)
		if n := attempts.Load(); n != int64(i) {
			t.Fatalf("wait %d: attempt %d came %v early", i, n, time.Millisecond)
		}
		clk.Advance(time.Millisecond)
	}
	c, err := awaitDial(t, ch)
	if err != nil {
		t.Fatal(err)
	}
	if c.PlayerID() != "p" || attempts.Load() != 3 || c.Stats().DialAttempts != 3 {
		t.Fatalf("player %q, attempts %d, stats %+v", c.PlayerID(), attempts.Load(), c.Stats())
	}
}

// DialRetry tries at once; after a SERVER_FULL refusal with Retry-After 3 s
// the redial waits 3 s plus the spread's jitter (rnd 0: none).
func TestDialRetryHonoursRetryAfter(t *testing.T) {
	url, attempts := flakyGate(t, 1, 3)
	clk := clock.NewFake(time.Now())
	ch := dialAsync(func() (*client.Client, error) {
		return client.DialRetry(ctx5s(t), url, client.StaticToken("tok"), client.Options{Clock: clk, Rand: constRand(0)})
	})
	testwait.Until(t, "the redial wait", func() bool { return clk.Waiters() == 1 && attempts.Load() == 1 })
	clk.Advance(3*time.Second - time.Millisecond)
	if attempts.Load() != 1 {
		t.Fatal("redialed before retry_after")
	}
	clk.Advance(time.Millisecond)
	c, err := awaitDial(t, ch)
	if err != nil || c.Stats().DialAttempts != 2 {
		t.Fatalf("DialRetry = %v, %v", c, err)
	}
}

// A redial wait that would outlast ctx is not started; a refusal that no
// retry can fix is returned at once.
func TestDialRetryGivesUp(t *testing.T) {
	url, attempts := flakyGate(t, 100, 10)
	clk := clock.NewFake(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := client.DialRetry(ctx, url, client.StaticToken("tok"), client.Options{Clock: clk})
	if client.Code(err) != leveev2.ErrorCode_ERROR_CODE_SERVER_FULL || !errors.Is(err, client.ErrRetryDeadline) || attempts.Load() != 1 {
		t.Fatalf("err = %v after %d attempts", err, attempts.Load())
	}

	g := newGate(t, arenaPlay)
	bad := func(context.Context) (string, error) { return "forged", nil }
	if _, err := client.DialRetry(ctx5s(t), g.URL(), bad, client.Options{Clock: clk}); client.Code(err) != leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED {
		t.Fatalf("bad token: %v", err)
	}
	tokenErr := errors.New("no token")
	if _, err := client.DialRetry(ctx5s(t), g.URL(), func(context.Context) (string, error) { return "", tokenErr }, client.Options{}); !errors.Is(err, tokenErr) {
		t.Fatalf("token error: %v", err)
	}
	// The ctx ends during a wait.
	ctx2, cancel2 := context.WithCancel(context.Background())
	ch := dialAsync(func() (*client.Client, error) {
		return client.Reconnect(ctx2, url, client.StaticToken("tok"), client.Options{Clock: clk}, nil)
	})
	testwait.Until(t, "the first wait", func() bool { return clk.Waiters() == 1 })
	cancel2()
	if _, err := awaitDial(t, ch); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled reconnect: %v", err)
	}
	if clk.Waiters() != 0 {
		t.Fatal("the wait's timer outlived the call")
	}
}

// A connection closed after a notice with retry_after: Err carries it, and
// Reconnect waits at least that long.
func TestReconnectAfterNotice(t *testing.T) {
	n := atomic.Int64{}
	g := newGate(t, func(c *clienttest.Conn) {
		if n.Add(1) > 1 {
			arenaPlay(c)
			return
		}
		_ = c.Send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: &leveev2.Error{
			Code: leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN, Message: "restarting", RetryAfterMs: 1500}}})
		_ = c.CloseWith(websocket.CloseServiceRestart, "restarting")
		_, _ = c.Recv()
	})
	clk := clock.NewFake(time.Now())
	opts := client.Options{Clock: clk, Rand: constRand(0)}
	old := dial(t, g, "fay", opts)
	waitDone(t, old)
	cause := old.Err()
	if client.CloseCode(cause) != websocket.CloseServiceRestart || client.RetryAfter(cause) != 1500*time.Millisecond {
		t.Fatalf("Err() = %v", cause)
	}
	tok := mint(t, "fay")
	ch := dialAsync(func() (*client.Client, error) {
		return client.Reconnect(ctx5s(t), g.URL(), client.StaticToken(tok), opts, cause)
	})
	testwait.Until(t, "the first wait", func() bool { return clk.Waiters() == 1 })
	clk.Advance(1499 * time.Millisecond)
	if n.Load() != 1 {
		t.Fatal("reconnected before retry_after")
	}
	clk.Advance(time.Millisecond)
	c, err := awaitDial(t, ch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := getProfile(ctx5s(t), c, ""); err != nil {
		t.Fatal(err)
	}
}

// A connection the gate closed with 4001 (a newer connection of the same
// player replaced it) ends with ErrReplaced, and neither Reconnect nor
// DialRetry dials again: the newer connection is the player's.
func TestReplacedIsNotReconnected(t *testing.T) {
	n := atomic.Int64{}
	g := newGate(t, func(c *clienttest.Conn) {
		n.Add(1)
		_ = c.CloseWith(4001, "replaced by a newer session")
		_, _ = c.Recv()
	})
	clk := clock.NewFake(time.Now())
	opts := client.Options{Clock: clk, Rand: constRand(0)}
	old := dial(t, g, "fay", opts)
	waitDone(t, old)
	cause := old.Err()
	if !errors.Is(cause, client.ErrReplaced) || !errors.Is(cause, client.ErrClosed) || client.CloseCode(cause) != 4001 {
		t.Fatalf("Err() = %v, want ErrReplaced with close 4001", cause)
	}
	tok := mint(t, "fay")
	if c, err := client.Reconnect(ctx5s(t), g.URL(), client.StaticToken(tok), opts, cause); c != nil || !errors.Is(err, client.ErrReplaced) {
		t.Fatalf("Reconnect after 4001: %v, %v; want ErrReplaced at once", c, err)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("%d connections, want no redial", got)
	}
	// DialRetry whose dial is replaced stops too.
	// The dial may succeed before the 4001 arrives: then the client ends
	// with ErrReplaced once it does, and does not redial.
	c, err := client.DialRetry(ctx5s(t), g.URL(), client.StaticToken(tok), opts)
	if c != nil {
		waitDone(t, c)
		err = c.Err()
	}
	if !errors.Is(err, client.ErrReplaced) {
		t.Fatalf("DialRetry: %v, %v; want ErrReplaced", c, err)
	}
	if got := n.Load(); got != 2 {
		t.Fatalf("%d connections, want 2 (one dial, no redial)", got)
	}
}
