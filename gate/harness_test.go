package gate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

const testSecret = "gate-test-secret"

var t0 = time.Unix(1_700_000_000, 0)

// testGate is a running gate on loopback ports with a fake clock.
type testGate struct {
	*Server
	clock  *clock.Fake
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func startGate(t testing.TB, mod func(*Config), logics ...*fakeLogic) *testGate {
	t.Helper()
	return startGateLog(t, mod, nil, logics...)
}

// startGateLog is startGate with a logger.
func startGateLog(t testing.TB, mod func(*Config), logger *slog.Logger, logics ...*fakeLogic) *testGate {
	t.Helper()
	return startGateClock(t, mod, logger, clock.NewFake(t0), logics...)
}

// startGateClock is startGateLog on the fake clock fc.
func startGateClock(t testing.TB, mod func(*Config), logger *slog.Logger, fc *clock.Fake, logics ...*fakeLogic) *testGate {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Addr, cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.TokenSecret = testSecret
	cfg.ShutdownGrace = 5 * time.Second
	cfg.Clock = fc
	for _, l := range logics {
		cfg.LogicAddrs = append(cfg.LogicAddrs, l.addr)
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &testGate{Server: s, clock: fc, cancel: cancel, done: make(chan error, 1)}
	go func() { g.done <- s.Run(ctx) }()
	t.Cleanup(func() { g.stop(t) })
	return g
}

// stop cancels Run and waits for it; safe to call twice.
func (g *testGate) stop(t testing.TB) {
	t.Helper()
	g.cancel()
	g.once.Do(func() {
		select {
		case err := <-g.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return")
		}
	})
}

func (g *testGate) tokenFor(t testing.TB, player string) string {
	t.Helper()
	tok, err := token.Sign([]byte(testSecret), player, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (g *testGate) wsURL(tok string) string {
	u := url.URL{Scheme: "ws", Host: g.Addr().String(), Path: "/ws"}
	if tok != "" {
		u.RawQuery = url.Values{"token": {tok}}.Encode()
	}
	return u.String()
}

// client is a test player's socket.
type client struct {
	t     testing.TB
	ws    *websocket.Conn
	codec wire.Codec
}

func dialRaw(t testing.TB, rawURL, subprotocol string, h http.Header) *client {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	if subprotocol == "" {
		subprotocol = wire.ProtoSubprotocol // the gate refuses a handshake without one
	}
	d.Subprotocols = []string{subprotocol}
	ws, resp, err := d.Dial(rawURL, h)
	if err != nil {
		t.Fatalf("dial: %v (response %v)", err, resp)
	}
	t.Cleanup(func() { _ = ws.Close() })
	codec, _ := wire.ForSubprotocol(ws.Subprotocol())
	return &client{t: t, ws: ws, codec: codec}
}

// connect dials as player and returns the client after its welcome.
func (g *testGate) connect(t testing.TB, player, subprotocol string) (*client, *leveev2.Welcome) {
	t.Helper()
	c := dialRaw(t, g.wsURL(g.tokenFor(t, player)), subprotocol, nil)
	f := c.recv()
	if f.GetRequestId() != 0 || f.GetWelcome() == nil {
		t.Fatalf("want a welcome push, got %v", f)
	}
	return c, f.GetWelcome()
}

func (c *client) send(f *leveev2.ClientFrame) {
	c.t.Helper()
	b, err := c.codec.EncodeClient(f)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(b)
}

func (c *client) sendRaw(b []byte) {
	c.t.Helper()
	mt := websocket.BinaryMessage
	if c.codec.JSON {
		mt = websocket.TextMessage
	}
	if err := c.ws.WriteMessage(mt, b); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one frame (the deadline only bounds a broken test).
func (c *client) recv() *leveev2.ServerFrame {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	f, err := c.codec.DecodeServer(b)
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

// recvClose reads until the socket closes and returns the close code.
func (c *client) recvClose() int {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			c.t.Fatalf("want a close frame, got %v", err)
		}
		f, _ := c.codec.DecodeServer(b)
		c.t.Logf("frame before close: %v", f)
	}
}

func profileFrame(id uint64) *leveev2.ClientFrame {
	return &leveev2.ClientFrame{RequestId: id, Payload: &leveev2.ClientFrame_GetProfile{GetProfile: &leveev2.GetProfileRequest{}}}
}

func wantError(t testing.TB, f *leveev2.ServerFrame, id uint64, code leveev2.ErrorCode) *leveev2.Error {
	t.Helper()
	if f.GetRequestId() != id || f.GetError().GetCode() != code {
		t.Fatalf("want request %d error %v, got %v", id, code, f)
	}
	return f.GetError()
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
