package gate

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/gate/waitpage"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/serve/servetest"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func TestWelcomeOnConnect(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	for _, sp := range []string{"", wire.ProtoSubprotocol, wire.JSONSubprotocol} {
		t.Run("subprotocol="+sp, func(t *testing.T) {
			c, w := g.connect(t, "alice", sp)
			if sp != "" && c.ws.Subprotocol() != sp {
				t.Fatalf("negotiated %q, want %q", c.ws.Subprotocol(), sp)
			}
			if w.GetPlayerId() != "alice" || stateOf(t, w).GetId() != "alice" {
				t.Fatalf("welcome for %q", w.GetPlayerId())
			}
		})
	}
	// The token may come in the Authorization header instead.
	h := http.Header{"Authorization": {"Bearer " + g.tokenFor(t, "bob")}}
	c := dialRaw(t, g.wsURL(""), wire.ProtoSubprotocol, h)
	if f := c.recv(); f.GetWelcome().GetPlayerId() != "bob" {
		t.Fatalf("header token: got %v", f)
	}
	if got := testutil.ToFloat64(g.m.connections.WithLabelValues(resultAccepted)); got != 4 {
		t.Fatalf("gate_connections_total{accepted} = %v, want 4", got)
	}
	for _, r := range logic.requests() {
		if r.GetLogin() == nil || r.GetRequestId() != 0 {
			t.Fatalf("logic got %v, want logins only", r)
		}
	}
}

func TestRequestsRoutedAndAnswered(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)

	var deadline time.Duration
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		if req.GetRequestId() == 12 {
			d, _ := ctx.Deadline()
			deadline = time.Until(d)
		}
		return defaultReply(req), nil
	})
	c.send(profileFrame(10))
	if f := c.recv(); f.GetRequestId() != 10 || replyOf(f, &arenapb.ProfileReply{}).GetPlayer().GetId() != "alice" || f.GetBackpressure().GetQueueDepth() != 3 {
		t.Fatalf("get_profile reply: %v", f)
	}
	buy := buyFrame(11, "sword", 1)
	buy.Criticality = leveev2.Criticality_CRITICALITY_CRITICAL
	c.send(buy)
	if f := c.recv(); f.GetRequestId() != 11 || replyOf(f, &arenapb.BuyItemReply{}).GetGoldSpent() != 10 {
		t.Fatalf("buy_item reply: %v", f)
	}
	battle := battleFrame(12, "b1")
	battle.TimeoutMs, battle.Criticality = 1500, leveev2.Criticality_CRITICALITY_SHEDDABLE
	c.send(battle)
	if f := c.recv(); f.GetRequestId() != 12 || replyOf(f, &arenapb.BattleReply{}).GetBattleId() != "b1" {
		t.Fatalf("start_battle reply: %v", f)
	}
	if deadline <= 0 || deadline > 1500*time.Millisecond {
		t.Fatalf("logic saw a deadline %v away, want within the client's 1.5 s", deadline)
	}

	reqs := logic.requests()
	if len(reqs) != 4 { // login + 3
		t.Fatalf("logic got %d requests", len(reqs))
	}
	if r := reqs[2]; r.GetRequestId() != 11 || r.GetCall().GetAction() != arena.ActionBuyItem ||
		!proto.Equal(decodeAs(r.GetCall().GetRequest(), &arenapb.BuyItemRequest{}), &arenapb.BuyItemRequest{ItemId: "sword", Quantity: 1}) || r.GetPlayerId() != "alice" {
		t.Fatalf("logic request: %v", r)
	}
	logic.mu.Lock()
	crits := append([]priority.Class(nil), logic.crits...)
	logic.mu.Unlock()
	want := []priority.Class{priority.Critical, priority.Default, priority.Critical, priority.Sheddable}
	for i := range want {
		if crits[i] != want[i] {
			t.Fatalf("criticalities %v, want %v", crits, want)
		}
	}
	if got := testutil.ToFloat64(g.m.requests.WithLabelValues(arena.ActionBuyItem, outcomeOK)); got != 1 {
		t.Fatalf("gate_requests_total{buy_item,ok} = %v", got)
	}
	if n := testutil.CollectAndCount(g.m.duration); n != 4 { // login + 3 actions
		t.Fatalf("duration series = %d", n)
	}
}

func TestJSONSubprotocolRoundTrip(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	c, _ := g.connect(t, "alice", wire.JSONSubprotocol)
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(`{"requestId":"7","action":"get_profile","request":{}}`)); err != nil {
		t.Fatal(err)
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	mt, b, err := c.ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if mt != websocket.TextMessage {
		t.Fatalf("message type %d, want text", mt)
	}
	// The reply is the action's reply message as a JSON object.
	var got struct {
		RequestID string `json:"requestId"`
		Version   string `json:"version"`
		Reply     struct {
			Player struct{ ID string } `json:"player"`
		} `json:"reply"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if got.RequestID != "7" || got.Reply.Player.ID != "alice" || got.Version != "1" {
		t.Fatalf("reply %s", b)
	}
}

func TestBadTokensGetErrorThen1008(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	forged, _ := token.Sign([]byte("not-the-secret"), "mallory", t0.Add(time.Hour))
	expired, _ := token.Sign([]byte(testSecret), "alice", t0.Add(-time.Second))
	for name, tok := range map[string]string{"forged": forged, "expired": expired, "missing": ""} {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, g.wsURL(tok), wire.ProtoSubprotocol, nil)
			wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED)
			if code := c.recvClose(); code != websocket.ClosePolicyViolation {
				t.Fatalf("close code %d, want 1008", code)
			}
		})
	}
	if got := testutil.ToFloat64(g.m.connections.WithLabelValues(resultUnauthorized)); got != 3 {
		t.Fatalf("gate_connections_total{unauthorized} = %v", got)
	}
	if n := len(logic.requests()); n != 0 {
		t.Fatalf("logic saw %d requests from unauthorized players", n)
	}
}

func TestOversizedFrameCloses1009(t *testing.T) {
	g := startGate(t, nil, startFakeLogic(t))
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	c.sendRaw(make([]byte, wire.MaxFrame+1))
	if code := c.recvClose(); code != websocket.CloseMessageTooBig {
		t.Fatalf("close code %d, want 1009", code)
	}
}

func TestMalformedFrameThenValidRequest(t *testing.T) {
	g := startGate(t, nil, startFakeLogic(t))
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	c.sendRaw([]byte{0xff, 0xff, 0xff})
	wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST)
	c.send(profileFrame(0))
	wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST) // no request id
	c.send(profileFrame(2))
	if f := c.recv(); f.GetRequestId() != 2 || !isProfile(f) {
		t.Fatalf("valid request after malformed ones: %v", f)
	}
	if got := testutil.ToFloat64(g.m.requests.WithLabelValues(actionInvalid, "bad_request")); got != 2 {
		t.Fatalf("gate_requests_total{invalid,bad_request} = %v", got)
	}
}

func TestUnknownPayload(t *testing.T) {
	g := startGate(t, nil, startFakeLogic(t))
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	// Field 31 (length 0): a payload from a newer protocol.
	c.sendRaw(append(mustMarshal(t, &leveev2.ClientFrame{RequestId: 5}), 0xfa, 0x01, 0x00))
	wantError(t, c.recv(), 5, leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE)
	c.send(&leveev2.ClientFrame{RequestId: 6}) // no payload at all
	wantError(t, c.recv(), 6, leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE)
}

func TestLogicBusyPushbackBecomesBusy(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		return nil, apperr.ToStatus(ctx, apperr.ErrBusy, 250*time.Millisecond)
	})
	c.send(profileFrame(9))
	if e := wantError(t, c.recv(), 9, leveev2.ErrorCode_ERROR_CODE_BUSY); e.GetRetryAfterMs() != 250 {
		t.Fatalf("retry_after_ms = %d, want 250", e.GetRetryAfterMs())
	}
	if got := testutil.ToFloat64(g.m.requests.WithLabelValues(arena.ActionGetProfile, "busy")); got != 1 {
		t.Fatalf("gate_requests_total{get_profile,busy} = %v", got)
	}
}

func TestLoginRefusedCloses1013(t *testing.T) {
	logic := startFakeLogic(t)
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		return nil, status.Error(codes.Unavailable, "logic is restarting")
	})
	g := startGate(t, nil, logic)
	c := dialRaw(t, g.wsURL(g.tokenFor(t, "alice")), "", nil)
	if e := wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE); e.GetRetryAfterMs() == 0 {
		t.Fatalf("no retry_after on %v", e)
	}
	if code := c.recvClose(); code != websocket.CloseTryAgainLater {
		t.Fatalf("close code %d, want 1013", code)
	}
	if got := testutil.ToFloat64(g.m.connections.WithLabelValues(resultLogicRefused)); got != 1 {
		t.Fatalf("gate_connections_total{logic_refused} = %v", got)
	}
}

func TestRoutingFollowsShardmap(t *testing.T) {
	logics := []*fakeLogic{startFakeLogic(t), startFakeLogic(t)}
	g := startGate(t, nil, logics...)
	players := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}
	want := map[string]int{}
	for i, p := range players {
		want[p] = shardmap.Instance(shardmap.Shard(p, g.cfg.Shards), len(logics))
		c, w := g.connect(t, p, wire.ProtoSubprotocol)
		if w.GetPlayerId() != p {
			t.Fatalf("welcome for %q, want %q", w.GetPlayerId(), p)
		}
		// A client cannot act as someone else: the id in the payload is not
		// the caller's identity.
		c.send(callFrame(uint64(100+i), arena.ActionGetProfile, &arenapb.GetProfileRequest{PlayerId: "someone-else"}))
		if f := c.recv(); replyOf(f, &arenapb.ProfileReply{}).GetPlayer().GetId() != p {
			t.Fatalf("profile reply %v for %s", f, p)
		}
	}
	seen := map[int]bool{}
	for inst, l := range logics {
		for _, r := range l.requests() {
			if want[r.GetPlayerId()] != inst {
				t.Fatalf("player %s reached instance %d, shardmap says %d", r.GetPlayerId(), inst, want[r.GetPlayerId()])
			}
			seen[inst] = true
		}
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("both instances should get players, got %v", seen)
	}
}

func TestInFlightLimit(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, func(c *Config) { c.MaxInFlight = 2 }, logic)
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	release := make(chan struct{})
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		<-release
		return defaultReply(req), nil
	})
	for id := uint64(1); id <= 3; id++ {
		c.send(profileFrame(id))
	}
	if e := wantError(t, c.recv(), 3, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED); e.GetRetryAfterMs() == 0 {
		t.Fatalf("no retry_after on %v", e)
	}
	close(release)
	got := map[uint64]bool{}
	for range 2 {
		f := c.recv()
		if !isProfile(f) {
			t.Fatalf("want a profile, got %v", f)
		}
		got[f.GetRequestId()] = true
	}
	if !got[1] || !got[2] {
		t.Fatalf("replies %v, want 1 and 2", got)
	}
	// The slots are free again.
	c.send(profileFrame(4))
	if f := c.recv(); f.GetRequestId() != 4 || !isProfile(f) {
		t.Fatalf("after release: %v", f)
	}
}

// TestGracefulShutdown: while the gate drains (a request still in flight
// at logic) new requests and connections are refused, the in-flight one is
// answered, players are closed with 1012, and the ops server keeps
// answering until gRPC has stopped.
func TestGracefulShutdown(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	release := make(chan struct{})
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		<-release
		return defaultReply(req), nil
	})
	<-logic.got // the login
	c.send(profileFrame(1))
	<-logic.got

	g.cancel()
	testwait.Until(t, "draining", g.isDraining)
	// The ops server answers while the gate drains: /readyz 503, /metrics
	// with the connection gauge.
	servetest.WantDraining(t, g.OpsAddr().String(), "gate_active_connections 1")
	// New requests are refused while the in-flight one finishes.
	c.send(profileFrame(2))
	if e := wantError(t, c.recv(), 2, leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN); e.GetRetryAfterMs() == 0 {
		t.Fatalf("no retry_after on %v", e)
	}
	// New connections are refused.
	if _, _, err := (&websocket.Dialer{}).Dial(g.wsURL(g.tokenFor(t, "bob")), nil); err == nil {
		t.Fatal("a new connection was accepted while shutting down")
	}
	close(release)
	if f := c.recv(); f.GetRequestId() != 1 || !isProfile(f) {
		t.Fatalf("in-flight request: %v", f)
	}
	if code := c.recvClose(); code != websocket.CloseServiceRestart {
		t.Fatalf("close code %d, want 1012", code)
	}
	g.stop(t)
	if got := testutil.ToFloat64(g.m.active); got != 0 {
		t.Fatalf("gate_active_connections = %v after shutdown", got)
	}
	// The ops server stops only after the players are gone and gRPC has
	// stopped.
	if code, _ := servetest.Get(t, "http://"+g.OpsAddr().String()+"/metrics"); code != 0 {
		t.Fatalf("/metrics answered %d after Run returned", code)
	}
}

func TestActiveConnectionsGauge(t *testing.T) {
	g := startGate(t, nil, startFakeLogic(t))
	var clients []*client
	for _, p := range []string{"a", "b", "c"} {
		c, _ := g.connect(t, p, wire.ProtoSubprotocol)
		clients = append(clients, c)
	}
	testwait.Until(t, "3 active connections", func() bool { return testutil.ToFloat64(g.m.active) == 3 })
	// One leaves politely, one drops the TCP connection.
	_ = clients[0].ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(time.Second))
	_ = clients[1].ws.Close()
	testwait.Until(t, "1 active connection", func() bool { return testutil.ToFloat64(g.m.active) == 1 })
	_ = clients[2].ws.Close()
	testwait.Until(t, "0 active connections", func() bool { return testutil.ToFloat64(g.m.active) == 0 })
}

func TestWaitingPageAtRoot(t *testing.T) {
	g := startGate(t, nil, startFakeLogic(t))
	resp, err := http.Get("http://" + g.Addr().String() + "/?token=x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(b), "data-state") {
		t.Fatalf("GET / = %d %s %.200q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	resp3, err := http.Get("http://" + g.Addr().String() + waitpage.AssetPrefix + "app.js")
	if err != nil {
		t.Fatal(err)
	}
	resp3.Body.Close()
	if resp3.StatusCode != 200 {
		t.Fatalf("GET %sapp.js = %d", waitpage.AssetPrefix, resp3.StatusCode)
	}
	resp2, err := http.Get("http://" + g.OpsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	b, _ = io.ReadAll(resp2.Body)
	if !strings.Contains(string(b), "gate_active_connections") {
		t.Fatal("/metrics lacks gate_active_connections")
	}
}

func TestDecodeFrameAlwaysAnswers(t *testing.T) {
	g := startGate(t, nil, startFakeLogic(t))
	f, req, reply := g.decodeFrame(&g.codecs[0], mustMarshal(t, profileFrame(3)))
	if reply != nil || f.GetRequestId() != 3 || req == nil {
		t.Fatalf("valid frame: %v %v %v", f, req, reply)
	}
	if _, _, reply := g.decodeFrame(&g.codecs[1], []byte(`{"requestId":"4","bogus":1}`)); reply.GetRequestId() != 4 || reply.GetError().GetCode() != leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE {
		t.Fatalf("unknown JSON field: %v", reply)
	}
	if _, _, reply := g.decodeFrame(&g.codecs[1], []byte(`{"requestId":"5","action":"trade","request":{}}`)); reply.GetRequestId() != 5 || reply.GetError().GetCode() != leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE {
		t.Fatalf("unknown action: %v", reply)
	}
}

func TestShutdownGraceExpiredStillAnswers(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, func(c *Config) { c.ShutdownGrace = 50 * time.Millisecond }, logic)
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		<-ctx.Done() // never finishes on its own
		return nil, ctx.Err()
	})
	<-logic.got // the login
	c.send(profileFrame(1))
	<-logic.got
	g.cancel()
	if e := wantError(t, c.recv(), 1, leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN); e.GetRetryAfterMs() == 0 {
		t.Fatalf("no retry_after on %v", e)
	}
	if code := c.recvClose(); code != websocket.CloseServiceRestart {
		t.Fatalf("close code %d, want 1012", code)
	}
	g.stop(t)
}

// A request whose logic instance is unreachable (the connection's last
// attempt failed) is refused at once with BUSY and a retry delay: it was
// not sent, so it is safe to retry and nothing is left unresolved.
func TestUnreachableLogicRefusedBusy(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	logic.stop()
	// Calls find the connection gone (UNAVAILABLE: they may have been
	// sent) and make gRPC try a new one, which fails: the connection is
	// failing then.
	id := uint64(100)
	testwait.Until(t, "the logic connection to fail", func() bool {
		if g.logic.unreachable(0) {
			return true
		}
		id++
		c.send(profileFrame(id))
		if f := c.recv(); f.GetRequestId() != id || f.GetError() == nil {
			t.Fatalf("while logic is down: %v", f)
		}
		return false
	})
	before := len(logic.requests())
	c.send(profileFrame(9))
	e := wantError(t, c.recv(), 9, leveev2.ErrorCode_ERROR_CODE_BUSY)
	if e.GetRetryAfterMs() != uint32(logicUnreachableRetryAfter.Milliseconds()) {
		t.Fatalf("retry_after_ms = %d, want %d", e.GetRetryAfterMs(), logicUnreachableRetryAfter.Milliseconds())
	}
	if len(logic.requests()) != before {
		t.Fatal("the request reached logic")
	}
	if got := testutil.ToFloat64(g.m.logicUnreachable); got != 1 {
		t.Fatalf("gate_logic_unreachable_total = %v, want 1", got)
	}
}
