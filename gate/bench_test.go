package gate

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
	"github.com/leveehq/levee/queue"
)

// BenchmarkRequestRoundTrip measures one player's request through the gate
// to an in-process fake logic and back, one at a time. The rate limit is
// off: the fake clock never refills the bucket.
func BenchmarkRequestRoundTrip(b *testing.B) {
	g := startGate(b, func(c *Config) { c.ConnRateLimit = false }, startFakeLogic(b))
	c, _ := g.connect(b, "bench", wire.ProtoSubprotocol)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := uint64(i + 1)
		c.send(profileFrame(id))
		if f := c.recv(); f.GetRequestId() != id {
			b.Fatalf("reply %v", f)
		}
	}
}

// BenchmarkServerFull measures the server's own work to answer a player at
// the connection cap: the whole /ws handler (handshake count, cap check,
// gorilla's upgrade, one write of the pre-encoded SERVER_FULL and 1013
// close frames, close) on a connection whose writes go nowhere, so kernel
// and network time are left out (BenchmarkServerFullLoopback has them).
func BenchmarkServerFull(b *testing.B) {
	for _, sp := range []string{wire.ProtoSubprotocol, wire.JSONSubprotocol} {
		b.Run(sp, func(b *testing.B) {
			g := startGate(b, func(c *Config) { c.MaxConns = 1 }, startFakeLogic(b))
			g.slots.Store(1) // full
			r := upgradeRequest(sp)
			w := newHijackRecorder()
			g.handleWS(w, r)
			if w.conn.written == 0 || w.conn.closed != 1 {
				b.Fatalf("refusal wrote %d bytes, closed %d times", w.conn.written, w.conn.closed)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				g.handleWS(w, r)
			}
			b.StopTimer()
			if got := testutil.ToFloat64(g.m.active); got != 0 {
				b.Fatalf("gate_active_connections = %v", got)
			}
		})
	}
}

// BenchmarkServerFullLoopback refuses real players over loopback and
// reports the time spent inside the handler (server-ns/op), kernel writes
// included; ns/op is the player's whole dial, read and close.
func BenchmarkServerFullLoopback(b *testing.B) {
	g := startGate(b, func(c *Config) { c.MaxConns = 1 }, startFakeLogic(b))
	g.slots.Store(1)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var inHandler atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		g.handleWS(w, r)
		inHandler.Add(int64(time.Since(start)))
	})}
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(func() { _ = srv.Close() })
	u := "ws://" + lis.Addr().String() + "/ws"
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{wire.ProtoSubprotocol}}
	b.ResetTimer()
	for b.Loop() {
		ws, _, err := d.Dial(u, nil)
		if err != nil {
			b.Fatal(err)
		}
		_, data, err := ws.ReadMessage()
		if err != nil {
			b.Fatal(err)
		}
		if f, _ := (wire.Codec{}).DecodeServer(data, nil); f.GetError().GetCode() != leveev2.ErrorCode_ERROR_CODE_SERVER_FULL {
			b.Fatalf("frame %v", f)
		}
		if _, _, err := ws.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseTryAgainLater) {
			b.Fatalf("want close 1013, got %v", err)
		}
		_ = ws.Close()
	}
	b.StopTimer()
	b.ReportMetric(float64(inHandler.Load())/float64(b.N), "server-ns/op")
}

func upgradeRequest(subprotocol string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://gate.test/ws", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	r.Header.Set("Sec-WebSocket-Protocol", subprotocol)
	return r
}

// hijackRecorder is an http.ResponseWriter whose Hijack hands out a
// connection that discards what is written; its buffers are reused, as
// net/http's are between requests.
type hijackRecorder struct {
	h    http.Header
	conn *nullConn
	brw  *bufio.ReadWriter
}

func newHijackRecorder() *hijackRecorder {
	c := &nullConn{}
	return &hijackRecorder{h: http.Header{}, conn: c, brw: bufio.NewReadWriter(bufio.NewReaderSize(c, 4096), bufio.NewWriterSize(c, 4096))}
}

func (w *hijackRecorder) Header() http.Header         { return w.h }
func (w *hijackRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (w *hijackRecorder) WriteHeader(int)             {}
func (w *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.brw.Reader.Reset(w.conn)
	w.brw.Writer.Reset(w.conn)
	return w.conn, w.brw, nil
}

type nullConn struct{ written, closed int }

func (c *nullConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *nullConn) Write(b []byte) (int, error)      { c.written += len(b); return len(b), nil }
func (c *nullConn) Close() error                     { c.closed++; return nil }
func (c *nullConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *nullConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *nullConn) SetDeadline(time.Time) error      { return nil }
func (c *nullConn) SetReadDeadline(time.Time) error  { return nil }
func (c *nullConn) SetWriteDeadline(time.Time) error { return nil }

// benchWaiter is a waiting player's connection whose writes go nowhere
// (a hijacked nullConn), for the push benchmarks.
func benchWaiter(b *testing.B, g *testGate, subprotocol string) *conn {
	b.Helper()
	ws, err := g.upgrader.Upgrade(newHijackRecorder(), upgradeRequest(subprotocol), nil)
	if err != nil {
		b.Fatal(err)
	}
	codec := g.codecFor(ws.Subprotocol())
	c := &conn{s: g.Server, ws: ws, codec: codec, msgType: messageType(*codec), playerID: "bench-player-0001", ticket: 42}
	c.lineState.Store(lineWaiting)
	return c
}

// BenchmarkStatusPush is the walker's work for one waiting player at one
// walk: "due" pushes a status every time (the push rule's check, the
// encoding, the write through gorilla into a connection that discards
// it), "idle" looks at a player the rule has nothing for (most of a
// standing line), "encode" is the encoding alone. Before the push rule
// and the shared encoding, every player was pushed at every walk:
// 2.3-2.8 µs and 20 allocs (protobuf), 5.5-6.0 µs and 43 allocs (JSON).
// gorilla's pooled write buffer costs one 24-byte allocation per write
// (it boxes the buffer to put it back in the sync.Pool).
func BenchmarkStatusPush(b *testing.B) {
	for _, sp := range []string{wire.ProtoSubprotocol, wire.JSONSubprotocol} {
		g := startGate(b, func(c *Config) { c.LineMode = "paced" }, startFakeLogic(b))
		info := g.line.pushInfo(queue.Stats{Mode: queue.Paced, Length: 16000, ConfiguredPerSecond: 100})
		var enc statusEnc
		enc.reset(info)
		b.Run(sp+"/due", func(b *testing.B) {
			c := benchWaiter(b, g, sp)
			b.ReportAllocs()
			var cur pushMark
			for b.Loop() {
				cur.gen++ // the line changed: pushed
				if res, _ := c.pushStatus(int(cur.gen)%16000+1, time.Duration(cur.gen)*time.Millisecond, cur, &enc); res != pushSent {
					b.Fatalf("result %d", res)
				}
			}
		})
		b.Run(sp+"/idle", func(b *testing.B) {
			c := benchWaiter(b, g, sp)
			c.pushed = markOf(5000, 50_000, 0, 0)
			b.ReportAllocs()
			for b.Loop() {
				if res, _ := c.pushStatus(5000, 50*time.Second, pushMark{at: 1}, &enc); res != pushNotDue {
					b.Fatalf("result %d", res)
				}
			}
		})
		b.Run(sp+"/encode", func(b *testing.B) {
			codec, _ := wire.ForSubprotocol(sp)
			b.ReportAllocs()
			pos := 0
			for b.Loop() {
				pos++
				if _, err := enc.frame(codec, pos%16000+1, uint64(pos)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
