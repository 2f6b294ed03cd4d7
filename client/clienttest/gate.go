// Package clienttest runs a tiny in-process fake gate on loopback for tests
// of code that uses the client SDK. It speaks the real player protocol
// (the v2 frame, both subprotocols): token check, Welcome, one reply per
// request, close codes; what it answers is up to the test's Handler (Game
// is a ready-made one that plays a game's declaration in-process).
package clienttest

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/client/internal/codec"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/token"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

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
	def     *gamedef.Def // nil: no game (binary frames only, empty Welcome state)
	handler Handler
	line    Line
	ctx     context.Context
	cancel  context.CancelFunc

	full, resumed atomic.Int64 // TLS handshakes

	mu    sync.Mutex
	conns map[*Conn]struct{}
	wg    sync.WaitGroup
}

// NewGate starts a fake gate that verifies tokens with secret and hands each
// admitted connection to h. It knows no game: its Welcome has no state
// and it speaks levee.v2.json only for frames without game messages (see
// NewGameGate).
func NewGate(secret []byte, h Handler) *Gate { return NewGateWithLine(secret, nil, h) }

// NewGateWithLine is NewGate with an admission line: every connection
// passes line (nil: none) before its Welcome.
func NewGateWithLine(secret []byte, line Line, h Handler) *Gate {
	return NewGameGate(secret, nil, line, h)
}

// NewGameGate is a fake gate for game g (nil: none): the Welcome carries
// the game's initial state for the player (version 1), the JSON
// subprotocol converts the game's messages, and a nil h plays the game
// (Game(g)). line is as for NewGateWithLine.
func NewGameGate(secret []byte, g *game.Game, line Line, h Handler) *Gate {
	var def *gamedef.Def
	if g != nil {
		if err := g.Validate(); err != nil {
			panic("clienttest: " + err.Error())
		}
		def = g.Def()
		if h == nil {
			h = Game(g)
		}
	}
	return newGate(secret, def, line, h, false)
}

// NewTLSGameGate is NewGameGate serving wss:// (TLS 1.2+, session tickets
// on) with a certificate for 127.0.0.1 from httptest's built-in CA: trust
// it with CAPEM (or CertPool). URL then starts with wss://.
func NewTLSGameGate(secret []byte, g *game.Game, line Line, h Handler) *Gate {
	if g != nil {
		if err := g.Validate(); err != nil {
			panic("clienttest: " + err.Error())
		}
		if h == nil {
			h = Game(g)
		}
	}
	var def *gamedef.Def
	if g != nil {
		def = g.Def()
	}
	return newGate(secret, def, line, h, true)
}

func newGate(secret []byte, def *gamedef.Def, line Line, h Handler, useTLS bool) *Gate {
	ctx, cancel := context.WithCancel(context.Background())
	gt := &Gate{secret: secret, def: def, handler: h, line: line, ctx: ctx, cancel: cancel, conns: map[*Conn]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", gt.serveWS)
	gt.srv = httptest.NewUnstartedServer(mux)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("clienttest: listen: " + err.Error())
	}
	gt.srv.Listener.Close()
	gt.srv.Listener = l
	if useTLS {
		// A refused handshake is what the tests look for: not news.
		gt.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		gt.srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		gt.srv.StartTLS()
	} else {
		gt.srv.Start()
	}
	return gt
}

// URL is the gate's WebSocket endpoint, ws://127.0.0.1:port/ws (wss://
// for a gate from NewTLSGameGate).
func (g *Gate) URL() string {
	if strings.HasPrefix(g.srv.URL, "https") {
		return "wss" + strings.TrimPrefix(g.srv.URL, "https") + "/ws"
	}
	return "ws" + strings.TrimPrefix(g.srv.URL, "http") + "/ws"
}

// Handshakes counts the TLS connections that reached a TLS gate's
// WebSocket endpoint (the client accepted the certificate): those with a
// full handshake and those that resumed a session.
func (g *Gate) Handshakes() (full, resumed int64) { return g.full.Load(), g.resumed.Load() }

// CAPEM is the PEM of the certificate a TLS gate serves (self-signed, so
// it is its own CA), nil for a plain gate: write it to a file for
// client.TLSConfigFromCAFile.
func (g *Gate) CAPEM() []byte {
	c := g.srv.Certificate()
	if c == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

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
	Subprotocols:    codec.Subprotocols,
	CheckOrigin:     func(*http.Request) bool { return true },
	ReadBufferSize:  1024,
	WriteBufferSize: 1024,
}

func (g *Gate) serveWS(w http.ResponseWriter, r *http.Request) {
	if r.TLS != nil {
		if r.TLS.DidResume {
			g.resumed.Add(1)
		} else {
			g.full.Add(1)
		}
	}
	tok := r.URL.Query().Get("token")
	if tok == "" {
		tok = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if !slices.ContainsFunc(websocket.Subprotocols(r), func(p string) bool { return slices.Contains(codec.Subprotocols, p) }) {
		// As the real gate does.
		http.Error(w, "offer one of these subprotocols: "+strings.Join(codec.Subprotocols, ", "), http.StatusBadRequest)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	cd, _ := codec.ForSubprotocol(ws.Subprotocol(), g.def)
	ctx, cancel := context.WithCancel(g.ctx)
	c := &Conn{ws: ws, codec: cd, ctx: ctx, cancel: cancel, Ticket: r.URL.Query().Get("ticket"), actions: map[uint64]string{}}
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

	ws.SetReadLimit(codec.MaxFrame)
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
	welcome := &leveev2.Welcome{PlayerId: player, Shard: uint32(shardmap.Shard(player, Shards)), Version: 1}
	if g.def != nil {
		c.state = g.def.Initial(player)
		b, err := proto.Marshal(c.state)
		if err != nil {
			return
		}
		welcome.State = b
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
	codec  codec.Codec
	ctx    context.Context
	cancel context.CancelFunc
	wmu    sync.Mutex
	closed bool
	// actions are the actions of the requests read and not yet answered,
	// by request id (under wmu): the JSON codec needs the reply's type.
	actions map[uint64]string
	state   proto.Message // the game's initial state for the player; nil without a game
}

// Def is the game's declaration the gate serves, nil without one.
func (c *Conn) Def() *gamedef.Def { return c.codec.Def }

// Initial is the player's state as the Welcome gave it (the game's
// initial state), nil without a game. Game's handler starts from it.
func (c *Conn) Initial() proto.Message { return c.state }

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
	if f.GetRequestId() != 0 {
		c.wmu.Lock()
		if len(c.actions) < 1<<16 {
			c.actions[f.GetRequestId()] = f.GetAction()
		}
		c.wmu.Unlock()
	}
	return f, nil
}

// Send writes a frame to the player. A reply's type, for the JSON
// subprotocol, is the reply of the action its request id named.
func (c *Conn) Send(f *leveev2.ServerFrame) error {
	var action string
	if id := f.GetRequestId(); id != 0 {
		c.wmu.Lock()
		action = c.actions[id]
		delete(c.actions, id)
		c.wmu.Unlock()
	}
	data, err := c.codec.EncodeServer(f, action)
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

// Reply is a helper that answers request f with p: an *leveev2.Error is
// the error payload, any other message the action's reply (encoded).
func Reply(f *leveev2.ClientFrame, p proto.Message) *leveev2.ServerFrame {
	out := &leveev2.ServerFrame{RequestId: f.GetRequestId()}
	switch v := p.(type) {
	case *leveev2.Error:
		out.Payload = &leveev2.ServerFrame_Error{Error: v}
	default:
		b, err := proto.Marshal(v)
		if err != nil {
			panic("clienttest: Reply: " + err.Error())
		}
		if b == nil {
			b = []byte{}
		}
		out.Payload = &leveev2.ServerFrame_Reply{Reply: b}
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
