package logic

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/pgschema"
	"github.com/leveehq/levee/internal/pgtest"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// fakeBattle is an in-process battle tier (the Jobs service running
// arena's "simulate") that counts its calls. It wins when the seed is even. Set gate to hold every call until it is closed; set
// fail to answer with that error (and pushback) instead.
type fakeBattle struct {
	leveev2.UnimplementedJobsServer
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

func (f *fakeBattle) Run(ctx context.Context, jr *leveev2.JobRequest) (*leveev2.JobReply, error) {
	f.calls.Add(1)
	if jr.GetJob() != arena.JobSimulate {
		return nil, status.Errorf(codes.InvalidArgument, "no job %q", jr.GetJob())
	}
	req := &arenapb.SimulateRequest{}
	if err := proto.Unmarshal(jr.GetRequest(), req); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
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
	rep, err := proto.Marshal(&arenapb.SimulateReply{
		BattleId:   req.GetBattleId(),
		Winner:     winner,
		Ticks:      1,
		ResultHash: req.GetSeed() ^ uint64(len(req.GetTeamA())),
	})
	if err != nil {
		return nil, err
	}
	return &leveev2.JobReply{Reply: rep}, nil
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
	leveev2.RegisterJobsServer(srv, f)
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
	cfg func(*Config)
	// store is where the shards live; nil: bbolt files under dir (a new
	// temp dir when empty).
	store      *testStore
	dir        string
	battle     *fakeBattle
	hookCommit func() error
	clock      *clock.Fake // the server's clock (arrivals, battle cooling)
	log        *slog.Logger
	// shared: with -store postgres, other servers share the database, so
	// start does not wait for this one to serve every shard (only for
	// /readyz).
	shared bool
}

// testConfig is the default configuration on loopback with one shard,
// except that the queue's time bound (-queue-max-wait) is off: it depends
// on the measured pace and on wall-clock waits, which tests that park a
// shard cannot control. The tests of that bound turn it on with a known
// time per request and a fake clock.
func testConfig(dir string, battleAddr string) Config {
	cfg := DefaultConfig()
	cfg.Game = arena.Game()
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
	if o.dir == "" && o.store == nil {
		o.dir = t.TempDir()
	}
	cfg := testConfig(o.dir, startFakeBattle(t, o.battle))
	if o.store != nil {
		o.store.apply(&cfg)
	}
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
	if cfg.postgres() {
		// The shards come by lease: wait for the manager's first pass
		// and, when this server is the database's only one, for it to
		// serve every shard.
		testwait.Until(t, "logic ready", srv.tier.Ready)
		testwait.Until(t, "the shards' leases", func() bool {
			if o.shared {
				return true
			}
			for id := range srv.shards {
				if srv.shards[id].Load() == nil {
					return false
				}
			}
			return true
		})
	}
	return e
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// call sends req and fails the test on a status error.
func (e *env) call(req *leveev2.LogicRequest) *reply {
	e.t.Helper()
	r, err := e.cli.Do(ctxT(e.t), req)
	if err != nil {
		e.t.Fatalf("Do(%v): %v", req, err)
	}
	if r.GetBackpressure() == nil {
		e.t.Fatalf("Do(%v): reply without backpressure", req)
	}
	return view(r)
}

// startGold is a new arena player's gold.
const startGold = arena.StartGold

// newPlayer is a new arena player's state.
func newPlayer(id string) *arenapb.Player { return arena.NewPlayer(id) }

// callReq is a call of action with req, encoded.
func callReq(id string, rid uint64, action string, req proto.Message) *leveev2.LogicRequest {
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	return &leveev2.LogicRequest{PlayerId: id, RequestId: rid, Kind: &leveev2.LogicRequest_Call{Call: &leveev2.Call{Action: action, Request: b}}}
}

func loginReq(id string) *leveev2.LogicRequest {
	return &leveev2.LogicRequest{PlayerId: id, RequestId: 1, Kind: &leveev2.LogicRequest_Login{Login: &leveev2.LoginRequest{}}}
}

func profileReq(id, of string) *leveev2.LogicRequest {
	return callReq(id, 2, arena.ActionGetProfile, &arenapb.GetProfileRequest{PlayerId: of})
}

func buyReq(id string, rid uint64, item string, qty int32) *leveev2.LogicRequest {
	return callReq(id, rid, arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: item, Quantity: qty})
}

// battleReq is a battle request whose request id is derived from the battle
// id (a request id names one request, see TestKeyReusedForAnotherRequest).
func battleReq(id string, battleID string, units, ticks uint32) *leveev2.LogicRequest {
	return callReq(id, battleSeed("rid", battleID)>>11|1<<52, arena.ActionStartBattle,
		&arenapb.StartBattleRequest{BattleId: battleID, Units: units, Ticks: ticks})
}

// battleSeed is arena's seed of a battle: FNV-1a 64 of "<player>/<battle>".
func battleSeed(playerID, battleID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(playerID + "/" + battleID))
	return h.Sum64()
}

// simulateRequest is arena's job request for p's battle b, encoded.
func simulateRequest(p *arenapb.Player, b *arenapb.StartBattleRequest) []byte {
	enc, err := proto.Marshal(arena.SimulateRequest(p, b))
	if err != nil {
		panic(err)
	}
	return enc
}

// reply is a LogicReply read as arena's: the tests ask for the reply of
// the action they sent (a view is nil when the reply is not one).
type reply struct{ *leveev2.LogicReply }

func view(r *leveev2.LogicReply) *reply { return &reply{r} }

// playerView is an arena player with the version Levee keeps for it.
type playerView struct {
	*arenapb.Player
	version uint64
}

func (p *playerView) GetVersion() uint64 {
	if p == nil {
		return 0
	}
	return p.version
}

func (p *playerView) msg() *arenapb.Player {
	if p == nil {
		return nil
	}
	return p.Player
}

func decodeAs[M proto.Message](r *leveev2.LogicReply, m M) (M, bool) {
	var zero M
	if r.GetError() != nil || r.GetWelcome() != nil || r == nil {
		return zero, false
	}
	if err := proto.Unmarshal(r.GetReply(), m); err != nil {
		return zero, false
	}
	return m, true
}

type buyView struct {
	*arenapb.BuyItemReply
	r *leveev2.LogicReply
}

func (v *buyView) GetReplayed() bool { return v != nil && v.r.GetReplayed() }
func (v *buyView) GetPlayer() *playerView {
	if v == nil || v.BuyItemReply.GetPlayer() == nil {
		return nil
	}
	return &playerView{v.BuyItemReply.GetPlayer(), v.r.GetVersion()}
}

func (r *reply) GetBuyItem() *buyView {
	m, ok := decodeAs(r.LogicReply, &arenapb.BuyItemReply{})
	if !ok {
		return nil
	}
	return &buyView{m, r.LogicReply}
}

type battleView struct {
	*arenapb.BattleReply
	r *leveev2.LogicReply
}

func (v *battleView) GetReplayed() bool { return v != nil && v.r.GetReplayed() }
func (v *battleView) GetPlayer() *playerView {
	if v == nil || v.BattleReply.GetPlayer() == nil {
		return nil
	}
	return &playerView{v.BattleReply.GetPlayer(), v.r.GetVersion()}
}

func (r *reply) GetBattle() *battleView {
	m, ok := decodeAs(r.LogicReply, &arenapb.BattleReply{})
	if !ok || m.GetBattleId() == "" {
		return nil
	}
	return &battleView{m, r.LogicReply}
}

type profileView struct {
	*arenapb.ProfileReply
	r *leveev2.LogicReply
}

func (v *profileView) GetPlayer() *playerView {
	if v == nil || v.ProfileReply.GetPlayer() == nil {
		return nil
	}
	return &playerView{v.ProfileReply.GetPlayer(), v.r.GetVersion()}
}

func (r *reply) GetProfile() *profileView {
	m, ok := decodeAs(r.LogicReply, &arenapb.ProfileReply{})
	if !ok || m.GetPlayer() == nil {
		return nil
	}
	return &profileView{m, r.LogicReply}
}

type welcomeView struct {
	*leveev2.Welcome
}

func (v *welcomeView) GetPlayer() *playerView {
	if v == nil {
		return nil
	}
	p := &arenapb.Player{}
	if err := proto.Unmarshal(v.Welcome.GetState(), p); err != nil {
		return nil
	}
	return &playerView{p, v.Welcome.GetVersion()}
}

func (r *reply) GetWelcome() *welcomeView {
	if r.LogicReply.GetWelcome() == nil {
		return nil
	}
	return &welcomeView{r.LogicReply.GetWelcome()}
}

func (e *env) login(id string) *playerView {
	e.t.Helper()
	w := e.call(loginReq(id)).GetWelcome()
	if w == nil {
		e.t.Fatalf("login %s: no welcome", id)
	}
	return w.GetPlayer()
}

func (e *env) profile(id string) *playerView {
	e.t.Helper()
	r := e.call(profileReq(id, ""))
	if r.GetProfile() == nil {
		e.t.Fatalf("profile %s: %v", id, r)
	}
	return r.GetProfile().GetPlayer()
}

// samePlayer says whether a and b are the same state at the same version.
func samePlayer(a, b *playerView) bool {
	return proto.Equal(a.msg(), b.msg()) && a.GetVersion() == b.GetVersion()
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
	// The gauge still shows the held request, set when it was queued (the
	// parked shard has not yet set it again): tests that wait for requests
	// to queue behind it read the channel as it is.
	sh := e.srv.shards[shardOf(player, e.cfg.Shards)].Load()
	sh.depth.Set(float64(len(sh.ch)))
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
func wantError(t testing.TB, r interface{ GetError() *leveev2.Error }, code leveev2.ErrorCode) {
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

// testStore is where a test server's shards live, kept across the
// server's restarts: a directory of bbolt files, or a PostgreSQL database
// of its own on pgtest's shared server.
type testStore struct {
	kind string // StoreBolt or StorePostgres
	dir  string
	url  string
}

// newTestStore is a fresh, empty store of kind for t.
func newTestStore(t testing.TB, kind string) *testStore {
	t.Helper()
	ts := &testStore{kind: kind}
	switch kind {
	case StoreBolt:
		ts.dir = t.TempDir()
	case StorePostgres:
		ts.url = pgtest.Database(t)
	default:
		t.Fatalf("no store %q", kind)
	}
	return ts
}

// testStores are the stores forEachStore runs a test on.
var testStores = []string{StoreBolt, StorePostgres}

// forEachStore runs f as a subtest on each store (bolt, postgres), each
// with a fresh one: the behaviour tests of the commit boundary hold for
// both.
func forEachStore(t *testing.T, f func(t *testing.T, ts *testStore)) {
	for _, kind := range testStores {
		t.Run(kind, func(t *testing.T) { f(t, newTestStore(t, kind)) })
	}
}

// apply points c at the store.
func (ts *testStore) apply(c *Config) {
	c.Store, c.DataDir, c.PostgresURL = ts.kind, ts.dir, ts.url
}

// arenaState is the type of arena's player state.
var arenaState = (&arenapb.Player{}).ProtoReflect().Type()

// open opens shard 0 of the store directly, as the only shard of a
// one-shard cluster (the tests' default), until the returned close.
func (ts *testStore) open(t testing.TB) (shardStore, func()) {
	t.Helper()
	if ts.kind == StoreBolt {
		st, err := openBoltStore(ts.dir, 0, arenaState)
		if err != nil {
			t.Fatal(err)
		}
		return st, func() {
			if err := st.close(); err != nil {
				t.Error(err)
			}
		}
	}
	pool := ts.pool(t)
	st, err := newPGStore(pool, arenaState).forShard(context.Background(), 0, fence{})
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	return st, pool.Close
}

// pool is a pool on the store's database, migrated for one shard; closed
// when t ends.
func (ts *testStore) pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return migratedPool(t, ts.url, 1)
}

// migratedPool connects to url and migrates it for shards; closed when t
// ends.
func migratedPool(t testing.TB, url string, shards int) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgschema.Connect(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgschema.Migrate(ctx, pool, shards, nil); err != nil {
		t.Fatal(err)
	}
	return pool
}

// outcomeCount is how many outcomes st holds (for bbolt, after checking
// that its time index holds as many).
func outcomeCount(t testing.TB, st shardStore) int {
	t.Helper()
	switch st := st.(type) {
	case *boltStore:
		n, idx := keyCount(t, st, outcomesBucket), keyCount(t, st, outcomeTimesBucket)
		if n != idx {
			t.Fatalf("%d outcomes but %d keys in their time index", n, idx)
		}
		return n
	case *pgShard:
		var n int
		if err := st.pool.QueryRow(context.Background(), `SELECT count(*) FROM outcomes WHERE shard = $1`, st.shard).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Fatalf("no store %T", st)
	return 0
}

// keyCount is how many keys bucket holds in st.
func keyCount(t testing.TB, st *boltStore, bucket []byte) int {
	t.Helper()
	var n int
	if err := st.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucket).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}
