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

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
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
	cfg.Game = arena.Game()
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

// testTypes are arena's messages, for the test players' codecs.
var testTypes = wire.ForGame(arena.Game().Def())

// client is a test player's socket. It remembers the action of every
// request it sent, to read the replies' messages on JSON.
type client struct {
	t     testing.TB
	ws    *websocket.Conn
	codec wire.Codec

	mu   sync.Mutex
	sent map[uint64]string // request id -> action
}

func (c *client) actionOf(id uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[id]
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
	codec.Game = testTypes
	return &client{t: t, ws: ws, codec: codec, sent: map[uint64]string{}}
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
	c.mu.Lock()
	c.sent[f.GetRequestId()] = f.GetAction()
	c.mu.Unlock()
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
	f, err := c.codec.DecodeServer(b, c.actionOf)
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
		f, _ := c.codec.DecodeServer(b, c.actionOf)
		c.t.Logf("frame before close: %v", f)
	}
}

func profileFrame(id uint64) *leveev2.ClientFrame {
	return callFrame(id, arena.ActionGetProfile, &arenapb.GetProfileRequest{})
}

func buyFrame(id uint64, item string, qty int32) *leveev2.ClientFrame {
	return callFrame(id, arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: item, Quantity: qty})
}

func battleFrame(id uint64, battleID string) *leveev2.ClientFrame {
	return callFrame(id, arena.ActionStartBattle, &arenapb.StartBattleRequest{BattleId: battleID, Units: 3, Ticks: 10})
}

// callFrame is a frame for action with req.
func callFrame(id uint64, action string, req proto.Message) *leveev2.ClientFrame {
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	return &leveev2.ClientFrame{RequestId: id, Action: action, Request: b}
}

// replyOf decodes f's reply as m (nil when f has no reply or it does not
// decode): replyOf(f, &arenapb.ProfileReply{}) != nil says f is a profile.
func replyOf[M proto.Message](f *leveev2.ServerFrame, m M) M {
	var zero M
	r, ok := f.GetPayload().(*leveev2.ServerFrame_Reply)
	if !ok || proto.Unmarshal(r.Reply, m) != nil {
		return zero
	}
	return m
}

// decodeAs decodes b as m (m, for a comparison; nil when it does not decode).
func decodeAs(b []byte, m proto.Message) proto.Message {
	if proto.Unmarshal(b, m) != nil {
		return nil
	}
	return m
}

// isProfile says f is a profile reply.
func isProfile(f *leveev2.ServerFrame) bool {
	return replyOf(f, &arenapb.ProfileReply{}).GetPlayer() != nil
}

// stateOf is a welcome's player state.
func stateOf(t testing.TB, w *leveev2.Welcome) *arenapb.Player {
	t.Helper()
	p := &arenapb.Player{}
	if err := proto.Unmarshal(w.GetState(), p); err != nil {
		t.Fatal(err)
	}
	return p
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
