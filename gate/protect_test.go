package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

const testCard = `{"title":"While you wait","tip":"Daily quests reset at 04:00; today's hero is the archer."}`

func writeCard(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "card.json")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServerFullAtTheCap(t *testing.T) {
	card := writeCard(t, "\n"+testCard+"\n")
	g := startGate(t, func(c *Config) {
		c.MaxConns = 2
		c.FullCardFile = card
		c.FullRetryAfter = 30 * time.Second
	}, startFakeLogic(t))
	a, _ := g.connect(t, "a", wire.ProtoSubprotocol)
	g.connect(t, "b", wire.JSONSubprotocol)

	for _, sp := range []string{wire.ProtoSubprotocol, wire.JSONSubprotocol, ""} {
		c := dialRaw(t, g.wsURL(g.tokenFor(t, "c")), sp, nil)
		e := wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_SERVER_FULL)
		if ms := e.GetRetryAfterMs(); ms < 24_000 || ms > 36_000 {
			t.Fatalf("%q: retry_after_ms = %d, want 30 s ± 20 %%", sp, ms)
		}
		friendly, gotCard, ok := strings.Cut(e.GetMessage(), "\n\n")
		if !ok || gotCard != testCard || !strings.Contains(friendly, "server is full") || !strings.Contains(friendly, "try again") {
			t.Fatalf("%q: message %q, want friendly text, a blank line and the card", sp, e.GetMessage())
		}
		if code := c.recvClose(); code != websocket.CloseTryAgainLater {
			t.Fatalf("%q: close code %d, want 1013", sp, code)
		}
	}
	// A bad token at the cap is told the server is full too (the cap is
	// checked first, as it is the cheaper check).
	c := dialRaw(t, g.wsURL("not-a-token"), "", nil)
	wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_SERVER_FULL)

	if got := testutil.ToFloat64(g.m.active); got != 2 {
		t.Fatalf("gate_active_connections = %v, want 2 (refusals must not count)", got)
	}
	if got := testutil.ToFloat64(g.m.rejectFull); got != 4 {
		t.Fatalf("gate_rejections_total{server_full} = %v, want 4", got)
	}
	if got := testutil.ToFloat64(g.m.fullConns); got != 4 {
		t.Fatalf("gate_connections_total{server_full} = %v, want 4", got)
	}
	testwait.Until(t, "no handshakes in progress", func() bool { return testutil.ToFloat64(g.m.handshakes) == 0 })

	// After one player leaves, a new one gets in.
	_ = a.ws.Close()
	testwait.Until(t, "1 active connection", func() bool { return testutil.ToFloat64(g.m.active) == 1 })
	if _, w := g.connect(t, "c", wire.ProtoSubprotocol); w.GetPlayerId() != "c" {
		t.Fatalf("welcome %v", w)
	}
	if got := testutil.ToFloat64(g.m.active); got != 2 {
		t.Fatalf("gate_active_connections = %v, want 2", got)
	}
}

func TestServerFullWithoutCard(t *testing.T) {
	g := startGate(t, func(c *Config) { c.MaxConns = 1; c.FullRetryAfter = time.Second }, startFakeLogic(t))
	g.connect(t, "a", "")
	c := dialRaw(t, g.wsURL(g.tokenFor(t, "b")), wire.JSONSubprotocol, nil)
	e := wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_SERVER_FULL)
	if strings.Contains(e.GetMessage(), "\n") || e.GetRetryAfterMs() < 800 || e.GetRetryAfterMs() > 1200 {
		t.Fatalf("error %v", e)
	}
	if code := c.recvClose(); code != websocket.CloseTryAgainLater {
		t.Fatalf("close code %d, want 1013", code)
	}
}

func TestFullReplyVariants(t *testing.T) {
	r, err := newFullReply(30*time.Second, "card")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	for i := range fullVariants {
		for _, codec := range []wire.Codec{{}, {JSON: true}} {
			b := r.proto[i]
			if codec.JSON {
				b = r.json[i]
			}
			f := parseServerFrames(t, codec, b)
			want := jittered(30*time.Second, i)
			if f.GetError().GetRetryAfterMs() != uint32(want.Milliseconds()) {
				t.Fatalf("variant %d: %v, want retry %s", i, f, want)
			}
			seen[f.GetError().GetRetryAfterMs()] = true
		}
	}
	if len(seen) != fullVariants || !seen[24_000] || !seen[36_000] {
		t.Fatalf("retry_after values %v, want %d spread over 24 s..36 s", seen, fullVariants)
	}
	// Picks are spread over the variants.
	picked := map[*byte]bool{}
	for range 200 {
		picked[&r.frames(wire.Codec{})[0]] = true
	}
	if len(picked) < fullVariants/2 {
		t.Fatalf("200 picks hit only %d variants", len(picked))
	}
	if n := testing.AllocsPerRun(100, func() { r.frames(wire.Codec{JSON: true}) }); n != 0 {
		t.Fatalf("frames allocates %v times", n)
	}
}

// parseServerFrames reads the raw bytes the gate writes on a refusal: one
// data frame, then a 1013 close frame, both unmasked.
func parseServerFrames(t *testing.T, codec wire.Codec, b []byte) *leveev2.ServerFrame {
	t.Helper()
	next := func() (int, []byte) {
		if len(b) < 2 || b[0]&0x80 == 0 || b[1]&0x80 != 0 {
			t.Fatalf("bad frame header % x", b[:min(len(b), 2)])
		}
		op, n, hdr := int(b[0]&0x0f), int(b[1]), 2
		switch n {
		case 126:
			n, hdr = int(b[2])<<8|int(b[3]), 4
		case 127:
			t.Fatal("unexpected 64-bit length")
		}
		p := b[hdr : hdr+n]
		b = b[hdr+n:]
		return op, p
	}
	op, data := next()
	if op != messageType(codec) {
		t.Fatalf("opcode %d", op)
	}
	f, err := codec.DecodeServer(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	op, p := next()
	if op != websocket.CloseMessage || int(p[0])<<8|int(p[1]) != websocket.CloseTryAgainLater || string(p[2:]) != fullCloseReason || len(b) != 0 {
		t.Fatalf("close frame op %d payload %q, %d bytes after", op, p, len(b))
	}
	return f
}

func TestAppendFrameLengths(t *testing.T) {
	for _, n := range []int{0, 125, 126, 65535, 65536} {
		b := appendFrame(nil, websocket.BinaryMessage, make([]byte, n))
		var hdr int
		switch {
		case n < 126:
			hdr = 2
			if int(b[1]) != n {
				t.Fatalf("%d: len byte %d", n, b[1])
			}
		case n <= 0xffff:
			hdr = 4
			if b[1] != 126 || int(b[2])<<8|int(b[3]) != n {
				t.Fatalf("%d: header % x", n, b[:4])
			}
		default:
			hdr = 10
			if b[1] != 127 || int(b[8])<<8|int(b[9]) != n&0xffff || b[7] != 1 {
				t.Fatalf("%d: header % x", n, b[:10])
			}
		}
		if b[0] != 0x82 || len(b) != hdr+n {
			t.Fatalf("%d: first byte %x, len %d", n, b[0], len(b))
		}
	}
	if c := appendClose(nil, 1013, strings.Repeat("x", 200)); len(c) != 2+125 {
		t.Fatalf("close frame of %d bytes, want 127", len(c))
	}
}

func TestLoadCard(t *testing.T) {
	if c, err := loadCard(""); c != "" || err != nil {
		t.Fatalf("no file: %q %v", c, err)
	}
	if c, err := loadCard(writeCard(t, "  Try the new map!\n")); c != "Try the new map!" || err != nil {
		t.Fatalf("text card: %q %v", c, err)
	}
	for name, path := range map[string]string{
		"missing":  filepath.Join(t.TempDir(), "nope"),
		"too big":  writeCard(t, strings.Repeat("x", maxCardBytes+1)),
		"not utf8": writeCard(t, "\xff\xfe"),
	} {
		if _, err := loadCard(path); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "-full-card-file") {
			t.Errorf("%s: %v", name, err)
		}
	}
	cfg := DefaultConfig()
	cfg.Addr, cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.LogicAddrs = []string{"127.0.0.1:1"}
	cfg.FullCardFile = filepath.Join(t.TempDir(), "nope")
	if _, err := New(cfg, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New with a missing card: %v", err)
	}
}

// blockLogins makes logic hold every login until the returned func is
// called (also at cleanup).
func blockLogins(t *testing.T, logic *fakeLogic) (release func()) {
	block := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(block) }) }
	t.Cleanup(release)
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		if req.GetLogin() != nil {
			<-block
		}
		return defaultReply(req), nil
	})
	return release
}

// dialStatus dials and returns the HTTP response of a refused handshake, or
// nil when the upgrade succeeded.
func dialStatus(t *testing.T, rawURL string) *http.Response {
	t.Helper()
	ws, resp, err := (&websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: wire.Subprotocols}).Dial(rawURL, nil)
	if err == nil {
		t.Cleanup(func() { _ = ws.Close() })
		return nil
	}
	if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
		t.Fatalf("dial: %v", err)
	}
	_ = resp.Body.Close()
	return resp
}

func TestHandshakeCap(t *testing.T) {
	logic := startFakeLogic(t)
	release := blockLogins(t, logic)
	g := startGate(t, func(c *Config) { c.MaxHandshakes = 1 }, logic)

	first := dialRaw(t, g.wsURL(g.tokenFor(t, "a")), wire.ProtoSubprotocol, nil)
	<-logic.got // a's login is in progress: one handshake
	if got := testutil.ToFloat64(g.m.handshakes); got != 1 {
		t.Fatalf("gate_handshakes_in_progress = %v, want 1", got)
	}
	resp := dialStatus(t, g.wsURL(g.tokenFor(t, "b")))
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("second handshake: %+v, want 503 with Retry-After: 1", resp)
	}
	if got := testutil.ToFloat64(g.m.rejectHandshakes); got != 1 {
		t.Fatalf("gate_rejections_total{handshakes} = %v", got)
	}

	release()
	if f := first.recv(); f.GetWelcome() == nil {
		t.Fatalf("first player: %v", f)
	}
	testwait.Until(t, "no handshakes in progress", func() bool { return testutil.ToFloat64(g.m.handshakes) == 0 })
	g.connect(t, "b", wire.ProtoSubprotocol)
}

func TestRateLimitRecoversWithTheClock(t *testing.T) {
	g := startGate(t, func(c *Config) { c.ConnRate, c.ConnBurst = 2, 3 }, startFakeLogic(t)) // a token per 500 ms
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	id := uint64(0)
	ask := func(crit leveev2.Criticality) *leveev2.ServerFrame {
		id++
		f := profileFrame(id)
		f.Criticality = crit
		c.send(f)
		return c.recv()
	}
	for range 3 {
		if f := ask(0); !isProfile(f) {
			t.Fatalf("within the burst: %v", f)
		}
	}
	if e := wantError(t, ask(0), id, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED); e.GetRetryAfterMs() != 500 {
		t.Fatalf("retry_after_ms = %d, want 500 (the time until a token)", e.GetRetryAfterMs())
	}
	g.clock.Advance(200 * time.Millisecond)
	if e := wantError(t, ask(leveev2.Criticality_CRITICALITY_SHEDDABLE), id, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED); e.GetRetryAfterMs() != 300 {
		t.Fatalf("retry_after_ms = %d, want 300", e.GetRetryAfterMs())
	}
	// Malformed frames cost a token too.
	c.sendRaw([]byte{0xff, 0xff})
	wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED)

	g.clock.Advance(300 * time.Millisecond)
	if f := ask(0); !isProfile(f) {
		t.Fatalf("after a token was earned: %v", f)
	}
	g.clock.Advance(time.Hour) // refills to the burst, no more
	for range 3 {
		if f := ask(0); !isProfile(f) {
			t.Fatalf("after refill: %v", f)
		}
	}
	wantError(t, ask(0), id, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED)

	if got := testutil.ToFloat64(g.m.rejectRequest[reqRateLimited]); got != 4 {
		t.Fatalf("gate_rejections_total{rate_limited} = %v, want 4", got)
	}
	if got := testutil.ToFloat64(g.m.reqRejects.WithLabelValues(reasonRateLimited, "default")); got != 3 {
		t.Fatalf("gate_request_rejections_total{rate_limited,default} = %v, want 3", got)
	}
	if got := testutil.ToFloat64(g.m.reqRejects.WithLabelValues(reasonRateLimited, "sheddable")); got != 1 {
		t.Fatalf("gate_request_rejections_total{rate_limited,sheddable} = %v, want 1", got)
	}
}

func TestInFlightLimitIsTyped(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, func(c *Config) { c.MaxInFlight = 1 }, logic)
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	<-logic.got // the login
	release := make(chan struct{})
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		<-release
		return defaultReply(req), nil
	})
	c.send(profileFrame(1))
	<-logic.got
	c.send(buyOne(2)) // a purchase: critical
	if e := wantError(t, c.recv(), 2, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED); e.GetRetryAfterMs() != uint32(inflightRetryAfter.Milliseconds()) || !strings.Contains(e.GetMessage(), "in flight") {
		t.Fatalf("in-flight refusal %v", e)
	}
	close(release)
	if f := c.recv(); f.GetRequestId() != 1 || !isProfile(f) {
		t.Fatalf("in-flight request: %v", f)
	}
	if got := testutil.ToFloat64(g.m.reqRejects.WithLabelValues(reasonInflight, "critical")); got != 1 {
		t.Fatalf("gate_request_rejections_total{inflight,critical} = %v", got)
	}
	if got := testutil.ToFloat64(g.m.rejectRequest[reqInflight]); got != 1 {
		t.Fatalf("gate_rejections_total{inflight} = %v", got)
	}
}

func TestLogicOverloadBecomesBusyWithBackpressure(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	c, _ := g.connect(t, "alice", wire.JSONSubprotocol)
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		return nil, apperr.Overloaded(ctx, apperr.ErrBusy, 250*time.Millisecond, 42, 0.93)
	})
	c.send(profileFrame(9))
	f := c.recv()
	if e := wantError(t, f, 9, leveev2.ErrorCode_ERROR_CODE_BUSY); e.GetRetryAfterMs() != 250 {
		t.Fatalf("retry_after_ms = %d, want 250", e.GetRetryAfterMs())
	}
	bp := f.GetBackpressure()
	if bp.GetQueueDepth() != 42 || bp.GetRatio() != 0.93 || bp.GetRetryAfterMs() != 250 {
		t.Fatalf("backpressure %v, want depth 42, ratio 0.93, retry 250 ms", bp)
	}
	// Without hints there is no backpressure to report, only the pushback.
	// (Past the cooling the refusal started, so the request reaches logic.)
	g.clock.Advance(250 * time.Millisecond)
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		return nil, apperr.ToStatus(ctx, apperr.ErrBusy, 0)
	})
	c.send(profileFrame(10))
	f = c.recv()
	if e := wantError(t, f, 10, leveev2.ErrorCode_ERROR_CODE_BUSY); e.GetRetryAfterMs() == 0 || f.GetBackpressure() != nil {
		t.Fatalf("busy without hints: %v", f)
	}
	if n := len(logic.requests()); n != 3 { // login + 2: the gate never retries logic
		t.Fatalf("logic saw %d requests, want 3", n)
	}
}

// TestLogicRefusalKeepsItsCode: logic's refusal reaches the player with its
// own code (server full and rate limited are not turned into busy), its
// retry delay and its queue hints, all read from the status details; an
// overload refusal of any of the three codes cools the shard.
func TestLogicRefusalKeepsItsCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		code leveev2.ErrorCode
		cool bool
	}{
		{fmt.Errorf("%w: shard 0 is full", apperr.ErrServerFull), leveev2.ErrorCode_ERROR_CODE_SERVER_FULL, true},
		{fmt.Errorf("%w: this player sends too much", apperr.ErrRateLimited), leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED, true},
		{fmt.Errorf("%w: logic stops", apperr.ErrShuttingDown), leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN, false},
		{fmt.Errorf("%w: resent after a day", apperr.ErrRequestExpired), leveev2.ErrorCode_ERROR_CODE_REQUEST_EXPIRED, false},
	} {
		t.Run(c.code.String(), func(t *testing.T) {
			logic := startFakeLogic(t)
			g := startGate(t, nil, logic)
			cl, _ := g.connect(t, "alice", wire.JSONSubprotocol)
			logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
				return nil, apperr.Overloaded(ctx, c.err, 300*time.Millisecond, 17, 0.85)
			})
			cl.send(profileFrame(5))
			f := cl.recv()
			e := wantError(t, f, 5, c.code)
			if e.GetRetryAfterMs() != 300 || !strings.Contains(e.GetMessage(), c.err.Error()) {
				t.Fatalf("error %v", e)
			}
			if bp := f.GetBackpressure(); bp.GetQueueDepth() != 17 || bp.GetRatio() != 0.85 || bp.GetRetryAfterMs() != 300 {
				t.Fatalf("backpressure %v, want depth 17, ratio 0.85, retry 300 ms", bp)
			}
			if got := testutil.ToFloat64(g.m.requests.WithLabelValues(arena.ActionGetProfile, apperr.Outcome(c.code))); got != 1 {
				t.Fatalf("gate_requests_total{get_profile,%s} = %v", apperr.Outcome(c.code), got)
			}
			// The next request: answered by the gate's cooling (BUSY, the
			// same hints) when the refusal was an overload, by logic again
			// otherwise.
			cl.send(profileFrame(6))
			f = cl.recv()
			if c.cool {
				wantCooling(t, f, 6, 300*time.Millisecond)
				if bp := f.GetBackpressure(); bp.GetQueueDepth() != 17 || bp.GetRatio() != 0.85 {
					t.Fatalf("cooling hints %v", bp)
				}
			} else {
				wantError(t, f, 6, c.code)
			}
			if n, want := len(logic.requests()), map[bool]int{true: 2, false: 3}[c.cool]; n != want {
				t.Fatalf("logic saw %d requests, want %d", n, want)
			}
		})
	}
}

// TestSwitches checks each mechanism with its switch on, with its switch
// off, and with -protection off: off means unlimited.
func TestSwitches(t *testing.T) {
	type mechanism struct {
		limit   func(*Config)
		off     func(*Config)
		limited func(t *testing.T, g *testGate, logic *fakeLogic, release func()) bool
	}
	mechanisms := map[string]mechanism{
		"conn-cap": {
			limit: func(c *Config) { c.MaxConns = 1 },
			off:   func(c *Config) { c.ConnCap = false },
			limited: func(t *testing.T, g *testGate, _ *fakeLogic, _ func()) bool {
				g.connect(t, "a", "")
				f := dialRaw(t, g.wsURL(g.tokenFor(t, "b")), "", nil).recv()
				return f.GetError().GetCode() == leveev2.ErrorCode_ERROR_CODE_SERVER_FULL
			},
		},
		"handshake-cap": {
			limit: func(c *Config) { c.MaxHandshakes = 1 },
			off:   func(c *Config) { c.HandshakeCap = false },
			limited: func(t *testing.T, g *testGate, logic *fakeLogic, release func()) bool {
				dialRaw(t, g.wsURL(g.tokenFor(t, "a")), "", nil)
				<-logic.got
				defer release()
				return dialStatus(t, g.wsURL(g.tokenFor(t, "b"))) != nil
			},
		},
		"conn-rate-limit": {
			limit: func(c *Config) { c.ConnRate, c.ConnBurst = 1, 1 },
			off:   func(c *Config) { c.ConnRateLimit = false },
			limited: func(t *testing.T, g *testGate, _ *fakeLogic, release func()) bool {
				release()
				c, _ := g.connect(t, "a", "")
				c.send(profileFrame(1))
				c.recv()
				c.send(profileFrame(2))
				return c.recv().GetError().GetCode() == leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED
			},
		},
		"inflight-limit": {
			limit: func(c *Config) { c.MaxInFlight = 1 },
			off:   func(c *Config) { c.InflightLimit = false },
			limited: func(t *testing.T, g *testGate, logic *fakeLogic, _ func()) bool {
				c, _ := g.connect(t, "a", "")
				<-logic.got // the login
				block := make(chan struct{})
				logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
					<-block
					return defaultReply(req), nil
				})
				c.send(profileFrame(1))
				<-logic.got
				c.send(profileFrame(2))
				first := make(chan *leveev2.ServerFrame, 1)
				go func() {
					_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
					_, b, err := c.ws.ReadMessage()
					if err != nil {
						first <- nil
						return
					}
					f, _ := c.codec.DecodeServer(b, c.actionOf)
					first <- f
				}()
				var limited bool
				select {
				case f := <-first: // refused while request 1 is still held
					limited = f.GetError().GetCode() == leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED
					close(block)
				case <-logic.got: // request 2 reached logic
					close(block)
					<-first
				}
				c.recv()
				return limited
			},
		},
		"logic-pushback": {
			limit: func(*Config) {},
			off:   func(c *Config) { c.LogicPushback = false },
			limited: func(t *testing.T, g *testGate, logic *fakeLogic, _ func()) bool {
				c, _ := g.connect(t, "a", "")
				logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
					return nil, apperr.Overloaded(ctx, apperr.ErrBusy, time.Second, 10, 0.9)
				})
				c.send(profileFrame(1))
				wantError(t, c.recv(), 1, leveev2.ErrorCode_ERROR_CODE_BUSY)
				n := len(logic.requests())
				c.send(profileFrame(2))
				wantError(t, c.recv(), 2, leveev2.ErrorCode_ERROR_CODE_BUSY)
				return len(logic.requests()) == n // answered by the gate
			},
		},
	}
	for name, m := range mechanisms {
		for _, variant := range []struct {
			name string
			mod  func(*Config)
			want bool
		}{
			{"on", func(*Config) {}, true},
			{"switch-off", m.off, false},
			{"protection-off", func(c *Config) { c.Protection = false }, false},
		} {
			t.Run(name+"/"+variant.name, func(t *testing.T) {
				logic := startFakeLogic(t)
				release := blockLogins(t, logic)
				if name != "handshake-cap" {
					release()
				}
				g := startGate(t, func(c *Config) { m.limit(c); variant.mod(c) }, logic)
				if got := m.limited(t, g, logic, release); got != variant.want {
					t.Fatalf("limited = %v, want %v", got, variant.want)
				}
			})
		}
	}
}

func TestAcceptKeyAndSubprotocol(t *testing.T) {
	r := upgradeRequest("chat, levee.v2.json, levee.v2.proto")
	var dst [28]byte
	if !acceptKey(r, &dst) || string(dst[:]) != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" { // RFC 6455 §1.3's example
		t.Fatalf("accept %q", dst)
	}
	if sp := selectSubprotocol(r); sp != wire.JSONSubprotocol {
		t.Fatalf("subprotocol %q, want the player's first one the gate speaks", sp)
	}
	r.Header.Set("Connection", "keep-alive, Upgrade")
	if !acceptKey(r, &dst) {
		t.Fatal("Connection with several tokens")
	}
	for name, mod := range map[string]func(*http.Request){
		"post":        func(r *http.Request) { r.Method = http.MethodPost },
		"no upgrade":  func(r *http.Request) { r.Header.Del("Upgrade") },
		"version 8":   func(r *http.Request) { r.Header.Set("Sec-WebSocket-Version", "8") },
		"short key":   func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "abcd") },
		"bad base64":  func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "!!!!!!!!!!!!!!!!!!!!!!!!") },
		"no key":      func(r *http.Request) { r.Header.Del("Sec-WebSocket-Key") },
		"no conn hdr": func(r *http.Request) { r.Header.Del("Connection") },
	} {
		r := upgradeRequest("")
		mod(r)
		if acceptKey(r, &dst) {
			t.Errorf("%s: accepted", name)
		}
	}
	if sp := selectSubprotocol(upgradeRequest("")); sp != "" {
		t.Fatalf("no offer: %q", sp)
	}
}

func TestServerFullAnswersNonWebSocketRequestsWithHTTPErrors(t *testing.T) {
	g := startGate(t, func(c *Config) { c.MaxConns = 1 }, startFakeLogic(t))
	g.slots.Store(1)
	resp, err := http.Get("http://" + g.Addr().String() + "/ws")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain GET /ws at the cap: %d, want gorilla's 400", resp.StatusCode)
	}
	// Served by the fallback, which upgrades and refuses the same way.
	w := newHijackRecorder()
	g.refuseViaGorilla(w, upgradeRequest(wire.ProtoSubprotocol), g.fullFn)
	if w.conn.closed != 1 || w.conn.written == 0 {
		t.Fatalf("fallback wrote %d bytes, closed %d", w.conn.written, w.conn.closed)
	}
}
