// Package clienttest runs a tiny in-process fake gate on loopback for tests
// of code that uses the client SDK. It speaks the real player protocol
// (internal/wire): token check, Welcome, one reply per request, close codes;
// what it answers is up to the test's Handler (Game is a ready-made one).
package clienttest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// StartGold is the gold every player has in the Welcome.
const StartGold = 1000

// Shards is the shard count used for the Welcome's shard.
const Shards = 8

// Line runs on a connection after its token was verified and before its
// Welcome, like a gate's admission line: it may push QueueStatus and
// Admitted frames (Conn.Send; Status and Admit build them) and read
// Conn.Ticket, the ticket the player came back with. It returns true to let
// the player in (the Welcome follows) or false to end the connection
// without one (after refusing it with Send and CloseWith, or to simulate a
// drop: the fake gate then closes the socket without a close frame).
type Line func(c *Conn) bool

// Handler serves one authenticated connection after its Welcome was sent.
// When it returns the gate closes the connection normally (unless the
// handler already closed it).
type Handler func(c *Conn)

// Gate is a fake gate listening on 127.0.0.1.
type Gate struct {
	srv     *httptest.Server
	secret  []byte
	handler Handler
	line    Line
	ctx     context.Context
	cancel  context.CancelFunc

	mu    sync.Mutex
	conns map[*Conn]struct{}
	wg    sync.WaitGroup
}

// NewGate starts a fake gate that verifies tokens with secret and hands each
// admitted connection to h.
func NewGate(secret []byte, h Handler) *Gate { return NewGateWithLine(secret, nil, h) }

// NewGateWithLine is NewGate with an admission line: every connection
// passes line (nil: none) before its Welcome.
func NewGateWithLine(secret []byte, line Line, h Handler) *Gate {
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gate{secret: secret, handler: h, line: line, ctx: ctx, cancel: cancel, conns: map[*Conn]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", g.serveWS)
	g.srv = httptest.NewUnstartedServer(mux)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("clienttest: listen: " + err.Error())
	}
	g.srv.Listener.Close()
	g.srv.Listener = l
	g.srv.Start()
	return g
}

// URL is the gate's WebSocket endpoint, ws://127.0.0.1:port/ws.
func (g *Gate) URL() string { return "ws" + strings.TrimPrefix(g.srv.URL, "http") + "/ws" }

// Close drops every connection, waits for the handlers to return and stops
// the server. Handlers that block must watch Conn.Context.
func (g *Gate) Close() {
	g.cancel()
	g.mu.Lock()
	for c := range g.conns {
		c.ws.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
	g.srv.Close()
}

var upgrader = websocket.Upgrader{
	Subprotocols:    wire.Subprotocols,
	CheckOrigin:     func(*http.Request) bool { return true },
	ReadBufferSize:  1024,
	WriteBufferSize: 1024,
}

func (g *Gate) serveWS(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	if tok == "" {
		tok = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if !slices.ContainsFunc(websocket.Subprotocols(r), func(p string) bool { return slices.Contains(wire.Subprotocols, p) }) {
		// As the real gate does.
		http.Error(w, "offer one of these subprotocols: "+strings.Join(wire.Subprotocols, ", "), http.StatusBadRequest)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	codec, _ := wire.ForSubprotocol(ws.Subprotocol())
	ctx, cancel := context.WithCancel(g.ctx)
	c := &Conn{ws: ws, codec: codec, ctx: ctx, cancel: cancel, Ticket: r.URL.Query().Get("ticket")}
	g.mu.Lock()
	if g.ctx.Err() != nil {
		g.mu.Unlock()
		cancel()
		ws.Close()
		return
	}
	g.conns[c] = struct{}{}
	g.wg.Add(1)
	g.mu.Unlock()
	defer func() {
		cancel()
		ws.Close()
		g.mu.Lock()
		delete(g.conns, c)
		g.mu.Unlock()
		g.wg.Done()
	}()

	ws.SetReadLimit(wire.MaxFrame)
	player, err := token.Verify(g.secret, tok, time.Now())
	if err != nil {
		e := apperr.Reply(fmt.Errorf("%w: bad token: %w", apperr.ErrUnauthorized, err), 0)
		_ = c.Send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: e}})
		_ = c.CloseWith(apperr.LoginCloseCode(e.GetCode()), "unauthorized")
		return
	}
	c.Player = player
	if g.line != nil && !g.line(c) {
		return
	}
	welcome := &leveev2.Welcome{
		Player: &leveev2.Player{Id: player, Level: 1, Gold: StartGold, Inventory: map[string]uint32{}},
		Shard:  uint32(shardmap.Shard(player, Shards)),
	}
	if err := c.Send(&leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Welcome{Welcome: welcome}}); err != nil {
		return
	}
	g.handler(c)
	_ = c.CloseWith(websocket.CloseNormalClosure, "")
}

// Conn is one player's connection as the fake gate sees it. Recv must be
// called from the handler's goroutine only; Send and CloseWith from any.
type Conn struct {
	Player string
	Ticket string // the ticket query parameter: a place in line to resume

	ws     *websocket.Conn
	codec  wire.Codec
	ctx    context.Context
	cancel context.CancelFunc
	wmu    sync.Mutex
	closed bool
}

// JSON reports whether the connection speaks protojson.
func (c *Conn) JSON() bool { return c.codec.JSON }

// Context ends when the connection is closed or the gate stops.
func (c *Conn) Context() context.Context { return c.ctx }

// ErrFrame is returned by Recv for a frame that does not decode; the
// connection stays usable.
var ErrFrame = errors.New("clienttest: bad frame")

// Recv reads the next request. It returns an error once the connection has
// ended (including when the client closed it). A client close is answered
// with the same close code, as a real gate does.
func (c *Conn) Recv() (*leveev2.ClientFrame, error) {
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		c.cancel()
		return nil, err
	}
	f, err := c.codec.DecodeClient(data)
	if err != nil {
		return f, errors.Join(ErrFrame, err)
	}
	return f, nil
}

// Send writes a frame to the player.
func (c *Conn) Send(f *leveev2.ServerFrame) error {
	data, err := c.codec.EncodeServer(f)
	if err != nil {
		return err
	}
	return c.SendRaw(data)
}

// CloseWith sends a close frame with code and text; the handler should
// return soon after (Recv then fails). Calling it again does nothing.
func (c *Conn) CloseWith(code int, text string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
}

// Reply is a helper that answers request f with payload p (a result or an
// *leveev2.Error via ServerFrame_Error).
func Reply(f *leveev2.ClientFrame, p any) *leveev2.ServerFrame {
	out := &leveev2.ServerFrame{RequestId: f.GetRequestId()}
	switch v := p.(type) {
	case *leveev2.Error:
		out.Payload = &leveev2.ServerFrame_Error{Error: v}
	case *leveev2.ProfileReply:
		out.Payload = &leveev2.ServerFrame_Profile{Profile: v}
	case *leveev2.BuyItemReply:
		out.Payload = &leveev2.ServerFrame_BuyItem{BuyItem: v}
	case *leveev2.BattleReply:
		out.Payload = &leveev2.ServerFrame_Battle{Battle: v}
	default:
		panic("clienttest: Reply: unsupported payload")
	}
	return out
}

// SendRaw writes data as one frame of the connection's message type (also
// used by tests of malformed input).
func (c *Conn) SendRaw(data []byte) error {
	mt := websocket.BinaryMessage
	if c.codec.JSON {
		mt = websocket.TextMessage
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return websocket.ErrCloseSent
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(mt, data)
}
