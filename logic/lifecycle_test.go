package logic

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/testwait"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.DataDir, ok.BattleAddrs = "/tmp/x", []string{"127.0.0.1:9100"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	pg := ok
	pg.Store, pg.DataDir, pg.PostgresURL = StorePostgres, "", "postgres://levee@db/levee"
	if err := pg.Validate(); err != nil {
		t.Fatalf("valid postgres config (no -data-dir): %v", err)
	}
	for _, c := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.GRPCAddr = "" }, "-grpc-addr"},
		{func(c *Config) { c.OpsAddr = "" }, "-ops-addr"},
		{func(c *Config) { c.DataDir = "" }, "-data-dir"},
		{func(c *Config) { c.Shards = 0 }, "-shards"},
		{func(c *Config) { c.Shards = 1 << 20 }, "-shards"},
		{func(c *Config) { c.Instances = 0 }, "-instances"},
		{func(c *Config) { c.Instance = 1 }, "-instance: must be in [0, 1), got 1"},
		{func(c *Config) { c.Instance = -1 }, "-instance"},
		{func(c *Config) { c.Shards, c.Instances, c.Instance = 2, 4, 3 }, "-instance: 3 hosts no shard"},
		{func(c *Config) { c.QueueSize = -3 }, "-queue-size: must be > 0, got -3"},
		{func(c *Config) { c.BattleAddrs = nil }, "-battle-addrs"},
		{func(c *Config) { c.BattleAddrs = []string{"a:1", " "} }, "-battle-addrs"},
		{func(c *Config) { c.BattleTimeout = 0 }, "-battle-timeout"},
		{func(c *Config) { c.MaxBatch = 0 }, "-max-batch"},
		{func(c *Config) { c.MaxBattles = 0 }, "-max-battles"},
		{func(c *Config) { c.ShutdownGrace = 0 }, "-shutdown-grace"},
		{func(c *Config) { c.Drain = -time.Second }, "-drain"},
		{func(c *Config) { c.RejectFill = 0 }, "-reject-fill: must be in (0, 1], got 0"},
		{func(c *Config) { c.RejectFill = 1.01 }, "-reject-fill: must be in (0, 1]"},
		{func(c *Config) { c.RejectFillSheddable = -0.1 }, "-reject-fill-sheddable: must be in (0, 1]"},
		{func(c *Config) { c.RejectFill, c.RejectFillSheddable = 0.6, 0.7 }, "-reject-fill-sheddable: must be <= -reject-fill (0.6), got 0.7"},
		{func(c *Config) { c.BattleRetryBudget = 0 }, "-battle-retry-budget"},
		{func(c *Config) { c.QueueMaxWait = -time.Millisecond }, "-queue-max-wait: must be >= 0"},
		{func(c *Config) { c.BattleRetryBudget = 1e6 }, "-battle-retry-budget"},
		{func(c *Config) { c.IdempotencyWindow = 0 }, "-idempotency-window: must be in [1s, 8784h0m0s], got 0s"},
		{func(c *Config) { c.IdempotencyWindow = 400 * 24 * time.Hour }, "-idempotency-window"},
		{func(c *Config) { c.Store = "sqlite" }, `-store: must be "bolt" or "postgres", got "sqlite"`},
		{func(c *Config) { c.Store = StorePostgres }, "-postgres-url: must be set with -store postgres"},
		{func(c *Config) { c.Store, c.PostgresURL, c.PostgresMaxConns = StorePostgres, "postgres://x/y", 0 }, "-postgres-max-conns: must be in 1..1000, got 0"},
		{func(c *Config) { c.Store, c.PostgresURL, c.Instances = StorePostgres, "postgres://x/y", 3 }, "-instances: not used with -store postgres"},
		{func(c *Config) { c.Store, c.PostgresURL, c.Instance = StorePostgres, "postgres://x/y", 1 }, "-instance: not used with -store postgres"},
		{func(c *Config) {
			c.Store, c.PostgresURL, c.InstanceFromHostname = StorePostgres, "postgres://x/y", true
		}, "-instance-from-hostname: not used"},
		{func(c *Config) { c.Store, c.PostgresURL, c.LeaseTTL = StorePostgres, "postgres://x/y", 2*time.Second }, "-lease-ttl: must be more than twice -lease-renew (1s), got 2s"},
		{func(c *Config) { c.Store, c.PostgresURL, c.LeaseRenew = StorePostgres, "postgres://x/y", 0 }, "-lease-renew: must be > 0"},
		{func(c *Config) { c.Store, c.PostgresURL, c.AdvertiseAddr = StorePostgres, "postgres://x/y", ":9000" }, "-advertise-addr: \":9000\" names no host"},
		{func(c *Config) { c.Store, c.PostgresURL, c.AdvertiseAddr = StorePostgres, "postgres://x/y", "logic-1" }, "-advertise-addr: want host:port"},
		{func(c *Config) { c.Store, c.PostgresURL, c.NodeID = StorePostgres, "postgres://x/y", "a b" }, "-node-id"},
	} {
		cfg := ok
		c.mut(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want it to contain %q", err, c.want)
		}
	}
}

// The advertised address defaults to -grpc-addr's host, or the hostname
// when it names none, with the port the listener got; the node id to the
// hostname and 6 random hex digits, another at each start.
func TestLeaseDefaults(t *testing.T) {
	// Never bound: the address a listener on -grpc-addr would report.
	lis := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 21234}
	host := func() (string, error) { return "logic-7", nil }
	for _, c := range []struct{ grpc, adv, want string }{
		{"127.0.0.1:0", "", "127.0.0.1:21234"},
		{":9000", "", "logic-7:21234"},
		{"0.0.0.0:9000", "", "logic-7:21234"},
		{"[::]:9000", "", "logic-7:21234"},
		{":9000", "10.1.2.3:9000", "10.1.2.3:9000"},
	} {
		cfg := DefaultConfig()
		cfg.GRPCAddr, cfg.AdvertiseAddr = c.grpc, c.adv
		if got, err := cfg.resolveAdvertise(lis, host); err != nil || got != c.want {
			t.Errorf("grpc %q advertise %q: %q, %v; want %q", c.grpc, c.adv, got, err, c.want)
		}
	}
	cfg := DefaultConfig()
	a, err1 := cfg.resolveNodeID(host)
	b, err2 := cfg.resolveNodeID(host)
	if err1 != nil || err2 != nil || !regexp.MustCompile(`^logic-7-[0-9a-f]{6}$`).MatchString(a) || a == b {
		t.Errorf("node ids %q, %q (%v, %v)", a, b, err1, err2)
	}
	cfg.NodeID = "n1"
	if id, _ := cfg.resolveNodeID(host); id != "n1" {
		t.Errorf("explicit node id became %q", id)
	}
}

func TestHostedShards(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Shards, cfg.Instances, cfg.Instance = 8, 3, 1
	if got := cfg.hosted(); len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 7 {
		t.Fatalf("hosted = %v", got)
	}
}

// A new Server on the same data dir finds every committed state, and
// replays stored outcomes instead of applying them again.
func TestRestartKeepsState(t *testing.T) { forEachStore(t, testRestartKeepsState) }

func testRestartKeepsState(t *testing.T, ts *testStore) {
	e := start(t, envOpts{store: ts, cfg: func(c *Config) { c.Shards = 4 }})
	e.login("alice")
	e.login("bob")
	buy := e.call(buyReq("alice", 1, "shield", 2)).GetBuyItem()
	fight := e.call(battleReq("bob", "b1", 3, 50)).GetBattle()
	alice, bob := e.profile("alice"), e.profile("bob")
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}

	e2 := start(t, envOpts{store: ts, battle: e.battle, cfg: func(c *Config) { c.Shards = 4 }})
	if p := e2.profile("alice"); !proto.Equal(p, alice) {
		t.Fatalf("alice after restart: %v, want %v", p, alice)
	}
	if p := e2.login("bob"); !proto.Equal(p, bob) {
		t.Fatalf("bob after restart: %v, want %v", p, bob)
	}
	if r := e2.call(buyReq("alice", 1, "shield", 2)).GetBuyItem(); !r.GetReplayed() || !proto.Equal(r.GetPlayer(), buy.GetPlayer()) {
		t.Fatalf("purchase replayed after restart = %v", r)
	}
	if r := e2.call(battleReq("bob", "b1", 3, 50)).GetBattle(); !r.GetReplayed() || r.GetResult().GetResultHash() != fight.GetResult().GetResultHash() {
		t.Fatalf("battle replayed after restart = %v", r)
	}
	if c := e.battle.calls.Load(); c != 1 {
		t.Fatalf("battle calls = %d, want 1", c)
	}
	if p := e2.profile("alice"); !proto.Equal(p, alice) {
		t.Fatalf("alice after replays: %v", p)
	}
}

// A second server on a data dir in use fails fast and says why.
func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	e := start(t, envOpts{dir: dir})
	cfg := e.cfg
	began := time.Now()
	_, err := New(cfg, nil)
	if err == nil || !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), "another logic process") {
		t.Fatalf("New on a busy data dir: %v", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("took %v to fail", d)
	}
	e.login("alice") // the first one is unharmed
}

// Shutdown lets an in-flight request finish (and commit), then refuses new
// ones with UNAVAILABLE.
func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	e := start(t, envOpts{dir: dir})
	e.login("alice")
	release := e.battle.hold()
	done := make(chan error, 1)
	go func() {
		r, err := e.cli.Do(ctxT(t), battleReq("alice", "last", 2, 10))
		if err == nil && view(r).GetBattle() == nil {
			err = errors.New("no battle reply")
		}
		done <- err
	}()
	testwait.Until(t, "the battle call", func() bool { return e.battle.calls.Load() == 1 })
	// Watch health on a stream opened before the stop: once GracefulStop
	// has begun, new RPCs on this connection are refused, but an open
	// stream still sees the change to NOT_SERVING.
	wctx, endWatch := context.WithCancel(ctxT(t))
	watch, err := healthpb.NewHealthClient(e.conn).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before stop: %v, %v", r, err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- e.stop() }()
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health during stop: %v, %v", r, err)
	}
	endWatch() // an open stream would hold GracefulStop
	select {
	case err := <-stopped:
		t.Fatalf("Run returned with a request in flight: %v", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("in-flight battle: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Run: %v", err)
	}
	// After the stop, the service refuses (called directly: the listener
	// is gone).
	_, err = e.srv.Do(context.Background(), loginReq("alice"))
	wantStatus(t, err, codes.Unavailable, apperr.ErrShuttingDown.Error())

	e2 := start(t, envOpts{dir: dir})
	if p := e2.profile("alice"); p.GetWins()+p.GetLosses() != 1 {
		t.Fatalf("in-flight battle not committed: %v", p)
	}
}

func TestOpsEndpoints(t *testing.T) {
	e := start(t, envOpts{})
	e.login("alice")
	base := "http://" + e.srv.OpsAddr().String()
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/readyz":  "ready",
		"/metrics": `logic_queue_depth{shard="0"}`,
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %q", path, resp.StatusCode, body)
		}
	}
	mf, err := e.srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range mf {
		names[f.GetName()] = true
	}
	for _, n := range []string{"logic_queue_depth", "logic_requests_total", "logic_request_duration_seconds", "logic_commit_batch_size", "logic_build_info"} {
		if !names[n] {
			t.Errorf("metric %s missing", n)
		}
	}
}
