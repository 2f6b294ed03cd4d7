package logic

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// fakeBattle is an in-process battle tier that counts its calls. It wins
// when the seed is even. Set gate to hold every call until it is closed; set
// fail to answer with that error (and pushback) instead.
type fakeBattle struct {
	leveev2.UnimplementedBattleServer
	calls    atomic.Int64
	gate     atomic.Pointer[chan struct{}]
	fail     atomic.Pointer[error]
	pushback string

	mu   sync.Mutex
	seen []seenCall // what each call arrived with
}

// seenCall is the metadata and deadline one call arrived with.
type seenCall struct {
	crit     priority.Class
	deadline time.Time // zero: none
}

func (f *fakeBattle) Simulate(ctx context.Context, req *leveev2.SimulateRequest) (*leveev2.SimulateReply, error) {
	f.calls.Add(1)
	dl, _ := ctx.Deadline()
	f.mu.Lock()
	f.seen = append(f.seen, seenCall{crit: priority.FromIncoming(ctx), deadline: dl})
	f.mu.Unlock()
	if g := f.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if e := f.fail.Load(); e != nil {
		if f.pushback != "" {
			// The refusal as battle sends it: the code and the retry
			// delay in the status details.
			ms, err := strconv.Atoi(f.pushback)
			if err != nil {
				return nil, err
			}
			return nil, apperr.ToStatus(ctx, apperr.FromStatus(*e), time.Duration(ms)*time.Millisecond)
		}
		return nil, *e
	}
	winner := uint32(2)
	if req.GetSeed()%2 == 0 {
		winner = 1
	}
	return &leveev2.SimulateReply{
		BattleId:   req.GetBattleId(),
		Winner:     winner,
		Ticks:      1,
		ResultHash: req.GetSeed() ^ uint64(len(req.GetTeamA())),
	}, nil
}

func (f *fakeBattle) seenCalls() []seenCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenCall(nil), f.seen...)
}

func (f *fakeBattle) hold() chan struct{} {
	c := make(chan struct{})
	f.gate.Store(&c)
	return c
}

func (f *fakeBattle) failWith(err error) {
	if err == nil {
		f.fail.Store(nil)
		return
	}
	f.fail.Store(&err)
}

// startFakeBattle serves f on 127.0.0.1:0 until the test ends.
func startFakeBattle(t testing.TB, f *fakeBattle) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	leveev2.RegisterBattleServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// loopGate parks a shard, while blocked, right after it took the first
// request of a batch; parked counts the times it did.
type loopGate struct {
	mu      sync.Mutex
	ch      chan struct{}
	blocked bool
	parked  atomic.Int64
}

func newLoopGate() *loopGate {
	c := make(chan struct{})
	close(c)
	return &loopGate{ch: c}
}

func (g *loopGate) wait(int) {
	g.mu.Lock()
	c, blocked := g.ch, g.blocked
	g.mu.Unlock()
	if blocked {
		g.parked.Add(1)
	}
	<-c
}

func (g *loopGate) block() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.blocked {
		g.ch, g.blocked = make(chan struct{}), true
	}
}

func (g *loopGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.blocked {
		close(g.ch)
		g.blocked = false
	}
}

// env is one logic server under test with a fake battle tier and a client.
type env struct {
	t      testing.TB
	srv    *Server
	cli    leveev2.LogicClient
	conn   *grpc.ClientConn
	battle *fakeBattle
	gate   *loopGate
	cfg    Config
	clk    *clock.Fake // nil: the server runs on the real clock
	stop   func() error
	cancel context.CancelFunc // ends Run's context without waiting (stop waits)
	bg     sync.WaitGroup     // requests started by helpers
}

type envOpts struct {
	cfg        func(*Config)
	dir        string
	battle     *fakeBattle
	hookCommit func() error
	clock      *clock.Fake // the server's clock (arrivals, battle cooling)
	log        *slog.Logger
}

// testConfig is the default configuration on loopback with one shard,
// except that the queue's time bound (-queue-max-wait) is off: it depends
// on the measured pace and on wall-clock waits, which tests that park a
// shard cannot control. The tests of that bound turn it on with a known
// time per request and a fake clock.
func testConfig(dir string, battleAddr string) Config {
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.Shards = 1
	cfg.BattleAddrs = []string{battleAddr}
	cfg.QueueMaxWait = 0
	return cfg
}

// start runs a logic server (1 shard unless o.cfg says otherwise) and
// stops it when the test ends.
func start(t testing.TB, o envOpts) *env {
	t.Helper()
	if o.battle == nil {
		o.battle = &fakeBattle{}
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	cfg := testConfig(o.dir, startFakeBattle(t, o.battle))
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	srv, err := New(cfg, o.log)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv, battle: o.battle, gate: newLoopGate(), cfg: cfg, clk: o.clock}
	if o.clock != nil {
		srv.setClock(o.clock)
	}
	srv.hookBatch = e.gate.wait
	srv.hookCommit = o.hookCommit
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	e.conn, err = grpc.NewClient(srv.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var stopErr error
	e.stop = func() error {
		once.Do(func() {
			e.gate.release()
			e.bg.Wait()
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = fmt.Errorf("Run did not return within 30s")
			}
			e.conn.Close()
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	e.cli = leveev2.NewLogicClient(e.conn)
	return e
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// call sends req and fails the test on a status error.
func (e *env) call(req *leveev2.LogicRequest) *leveev2.LogicReply {
	e.t.Helper()
	r, err := e.cli.Do(ctxT(e.t), req)
	if err != nil {
		e.t.Fatalf("Do(%v): %v", req, err)
	}
	if r.GetBackpressure() == nil {
		e.t.Fatalf("Do(%v): reply without backpressure", req)
	}
	return r
}

func loginReq(id string) *leveev2.LogicRequest {
	return &leveev2.LogicRequest{PlayerId: id, RequestId: 1, Action: &leveev2.LogicRequest_Login{Login: &leveev2.LoginRequest{}}}
}

func profileReq(id, of string) *leveev2.LogicRequest {
	return &leveev2.LogicRequest{PlayerId: id, RequestId: 2, Action: &leveev2.LogicRequest_GetProfile{GetProfile: &leveev2.GetProfileRequest{PlayerId: of}}}
}

func buyReq(id string, rid uint64, item string, qty int32) *leveev2.LogicRequest {
	return &leveev2.LogicRequest{PlayerId: id, RequestId: rid, Action: &leveev2.LogicRequest_BuyItem{BuyItem: &leveev2.BuyItemRequest{ItemId: item, Quantity: qty}}}
}

// battleReq is a battle request whose request id is derived from the battle
// id (a request id names one request, see TestKeyReusedForAnotherRequest).
func battleReq(id string, battleID string, units, ticks uint32) *leveev2.LogicRequest {
	return &leveev2.LogicRequest{PlayerId: id, RequestId: battleSeed("rid", battleID)>>11 | 1<<52, Action: &leveev2.LogicRequest_StartBattle{StartBattle: &leveev2.StartBattleRequest{BattleId: battleID, Units: units, Ticks: ticks}}}
}

func (e *env) login(id string) *leveev2.Player {
	e.t.Helper()
	w := e.call(loginReq(id)).GetWelcome()
	if w == nil {
		e.t.Fatalf("login %s: no welcome", id)
	}
	return w.GetPlayer()
}

func (e *env) profile(id string) *leveev2.Player {
	e.t.Helper()
	r := e.call(profileReq(id, ""))
	if r.GetProfile() == nil {
		e.t.Fatalf("profile %s: %v", id, r)
	}
	return r.GetProfile().GetPlayer()
}

// flushAndBlock parks the (only) shard: it sends a profile request for
// player, which the shard takes and then holds until the gate is released,
// and returns once the shard is parked. Requests sent after it stay in the
// channel, in order, behind the held one. The held request is CRITICAL, so
// that the dequeue guard (-queue-max-wait) never refuses it.
func (e *env) flushAndBlock(player string) {
	e.t.Helper()
	n := e.gate.parked.Load()
	e.gate.block()
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := e.cli.Do(priority.Outgoing(ctx, priority.Critical), profileReq(player, "")); err != nil {
			e.t.Errorf("held request: %v", err)
		}
	}()
	testwait.Until(e.t, "the shard to park", func() bool { return e.gate.parked.Load() > n })
}

// depth is shard's logic_queue_depth.
func (e *env) depth(shard int) int {
	return int(testutil.ToFloat64(e.srv.m.queueDepth.WithLabelValues(fmt.Sprint(shard))))
}

// rejections is logic_rejections_total{shard,reason,criticality}.
func (e *env) rejections(shard int, reason string, c priority.Class) float64 {
	return testutil.ToFloat64(e.srv.m.rejections.WithLabelValues(fmt.Sprint(shard), reason, c.String()))
}

func (e *env) requests(action, outcome string) int {
	return int(testutil.ToFloat64(e.srv.m.requests.WithLabelValues(action, outcome)))
}

// histogram returns h's sample count and sum.
func histogram(t testing.TB, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// wantError checks that r is a business error with code.
func wantError(t testing.TB, r *leveev2.LogicReply, code leveev2.ErrorCode) {
	t.Helper()
	if r.GetError().GetCode() != code {
		t.Fatalf("reply = %v, want business error %v", r, code)
	}
}

// wantStatus checks that err is a gRPC status with code and, if msg is not
// empty, a message containing it.
func wantStatus(t testing.TB, err error, code codes.Code, msg string) {
	t.Helper()
	s, ok := status.FromError(err)
	if !ok || s.Code() != code || !strings.Contains(s.Message(), msg) {
		t.Fatalf("err = %v, want status %v containing %q", err, code, msg)
	}
}

func shardOf(id string, shards int) int { return shardmap.Shard(id, shards) }

func testutilValue(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// statusBusy is what an overloaded battle instance answers.
var statusBusy = status.Error(codes.ResourceExhausted, "battle busy")

// insts is the client's current instances.
func (c *battleClient) insts() []*battleInstance { return c.set.Load().insts }

// pick is the picker's choice over the current instances at the client's
// now (see battlePicker.pick), without holding the instance.
func (c *battleClient) pick(avoid int, critical bool) (int, time.Duration, bool) {
	return c.set.Load().picker.pick(c.clk.Now(), avoid, critical)
}

// awaitSlotIndex is awaitSlot with the instance as its index in the
// current set (-1: none); the instance is let go at once.
func (c *battleClient) awaitSlotIndex(ctx context.Context) (int, time.Duration) {
	in, wait := c.awaitSlot(ctx)
	if in == nil {
		return -1, wait
	}
	in.release()
	return c.set.Load().index(in), wait
}
