package logic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/metrics"
	"github.com/leveehq/levee/internal/pgschema"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/serve"
	"github.com/leveehq/levee/logic/lease"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Server is one logic process: the shards it hosts, their stores, the
// battle client, and the gRPC and ops servers in front of them.
type Server struct {
	leveev2.UnimplementedLogicServer

	cfg Config
	log *slog.Logger
	reg *prometheus.Registry
	m   *tierMetrics

	grpcLis net.Listener
	opsLis  net.Listener
	grpcSrv *grpc.Server
	tier    *serve.Tier // health, readiness, the ops server and the stop

	// shards are the shards served here, by shard id (nil: not served);
	// read by every request, written by the lease hooks with dynamic
	// hosting. hosted are the shards of static hosting (-store=bolt),
	// opened by New for the server's life.
	shards []atomic.Pointer[shard]
	hosted []*shard

	// Dynamic hosting (-store=postgres): mgr is the lease manager, leases
	// the view of it each request asks, runLeases its Run (its hooks:
	// acquired, release, lost); openShard opens a shard's store fenced by
	// an epoch. hostMu orders the hooks against each other and the stop;
	// unserved[id] is an epoch at which shard id is held but not served
	// (its store failed to open, or the fence refused a commit), to be
	// tried again by the next request.
	mgr       *lease.Manager
	leases    leaseView
	runLeases func(ctx context.Context) error
	openShard func(id int, epoch int64) (shardStore, error)
	hostMu    sync.Mutex
	unserved  []atomic.Int64
	leaseStop context.CancelFunc
	leaseWG   sync.WaitGroup
	// pool and pg are the PostgreSQL store's (Config.Store postgres; nil
	// with bbolt): the pool is closed after every shard's store.
	pool *pgxpool.Pool
	pg   *pgStore
	// leasePool is the lease manager's own (leasePoolConns connections),
	// so that its renewals never wait behind the shards' commits; nodeID
	// is the process's name in the lease table (Config.NodeID resolved).
	leasePool *pgxpool.Pool
	nodeID    string

	// The overload mechanisms in force (Config.Protection and their own
	// switches).
	rejectEarly bool
	dropExpired bool

	// clk stamps arrivals for the dequeue guard, is the handlers' Ctx.Now
	// and the outcomes' time, ticks the purge and times the battle
	// instances' cooling (Config.Clock; tests swap in a clock.Fake). The
	// shards' measured time per request is always wall-clock time.
	clk clock.Clock

	// def is the game this server runs (Config.Game); handlers are its
	// actions' handler series, by action name ("login": the initial state).
	def      *gamedef.Def
	handlers map[string]*handlerMetrics

	// jobs runs the game's jobs: battleCli (the battle tier over gRPC) or
	// Config.Jobs.
	jobs      jobRunner
	battleCli *battleClient
	battleSem chan struct{}
	battleWG  sync.WaitGroup

	mu         sync.RWMutex // guards stopping against admissions
	stopping   bool
	stop       chan struct{} // closed: shards finish their channel and exit
	shardsDone chan struct{} // closed: every shard goroutine has exited
	shardWG    sync.WaitGroup

	// Test hooks, set before Run. hookBatch runs when a shard has taken the
	// first message of a batch (a request or an internal message), before
	// it looks at it; hookCommit runs inside every commit transaction and
	// fails it by returning an error.
	hookBatch  func(shard int)
	hookCommit func() error
}

var _ leveev2.LogicServer = (*Server)(nil)

// New validates cfg, opens the stores of the hosted shards and the
// listeners, and builds the server. Run starts it.
func New(cfg Config, logger *slog.Logger) (_ *Server, err error) {
	if cfg.Game == nil {
		return nil, errors.New("logic: Config.Game is nil: logic serves a declared game (package game)")
	}
	if err := cfg.Game.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg, err = cfg.resolveInstance(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if !cfg.postgres() {
		if err := ensureDir(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	reg := metrics.NewRegistry("logic")
	if err := cfg.Security.RegisterMetrics(reg, "logic"); err != nil {
		return nil, err
	}
	def := cfg.Game.Def()
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	m := newMetrics(reg)
	s := &Server{
		cfg:         cfg,
		log:         logger,
		reg:         reg,
		m:           m,
		def:         def,
		handlers:    m.handlerSeries(def),
		shards:      make([]atomic.Pointer[shard], cfg.Shards),
		unserved:    make([]atomic.Int64, cfg.Shards),
		rejectEarly: cfg.rejectEarly(),
		dropExpired: cfg.dropExpired(),
		clk:         clk,
		battleSem:   make(chan struct{}, cfg.maxBattles()),
		stop:        make(chan struct{}),
		shardsDone:  make(chan struct{}),
	}
	defer func() {
		if err != nil {
			_ = s.closeResources()
			s.closeListeners()
		}
	}()
	if err := s.openStores(); err != nil {
		return nil, err
	}
	if cfg.Jobs != nil {
		s.jobs = inProcessJobs{cfg.Jobs}
	} else if err := s.dialJobs(); err != nil {
		return nil, err
	}
	if s.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, fmt.Errorf("-grpc-addr: %w", err)
	}
	if s.opsLis, err = net.Listen("tcp", cfg.OpsAddr); err != nil {
		return nil, fmt.Errorf("-ops-addr: %w", err)
	}
	var started func() bool
	if s.openShard != nil {
		if started, err = s.startLeases(); err != nil {
			return nil, err
		}
	}
	s.grpcSrv = grpc.NewServer(cfg.Security.ServerOptions(grpcdial.LogicAccepts...)...)
	leveev2.RegisterLogicServer(s.grpcSrv, s)
	if s.tier, err = serve.New(serve.Config{
		Name:         "logic",
		GRPC:         s.grpcSrv,
		GRPCListener: s.grpcLis,
		Services:     []string{leveev2.Logic_ServiceDesc.ServiceName},
		OpsListener:  s.opsLis,
		Ops:          map[string]http.Handler{"/metrics": metrics.Handler(reg)},
		Drain:        cfg.Drain,
		Grace:        cfg.ShutdownGrace,
		Log:          logger,
		Started:      started,
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// pgSetupTimeout bounds connecting to PostgreSQL and migrating its schema
// at start-up (waiting for another process's migration lock included).
const pgSetupTimeout = 60 * time.Second

// openStores opens the stores of the hosted shards: their bbolt files
// (hosted statically, -instance of -instances), or (StorePostgres) the
// pool and the migrated schema, on which the shards whose leases this
// process acquires get their stores, fenced by the lease's epoch.
func (s *Server) openStores() error {
	cfg, def := s.cfg, s.def
	if cfg.postgres() {
		ctx, cancel := context.WithTimeout(context.Background(), pgSetupTimeout)
		defer cancel()
		pool, err := pgschema.Connect(ctx, cfg.PostgresURL, int32(cfg.PostgresMaxConns))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
		s.pool = pool
		if err := pgschema.Migrate(ctx, pool, cfg.Shards, s.log); err != nil {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
		s.pg = newPGStore(pool, def.State)
	}
	if cfg.postgres() && !cfg.staticPG {
		// The shards come and go by their leases (startLeases).
		s.openShard = func(id int, epoch int64) (shardStore, error) {
			ctx, cancel := context.WithTimeout(context.Background(), shardOpenTimeout(cfg))
			defer cancel()
			return s.pg.forShard(ctx, id, fence{node: s.nodeID, epoch: epoch})
		}
		return nil
	}
	for _, id := range cfg.hosted() {
		var st shardStore
		var err error
		if s.pg != nil {
			ctx, cancel := context.WithTimeout(context.Background(), pgSetupTimeout)
			st, err = s.pg.forShard(ctx, id, fence{})
			cancel()
		} else {
			st, err = openBoltStore(cfg.DataDir, id, def.State)
		}
		if err != nil {
			return err
		}
		sh := newShard(id, st, s)
		s.shards[id].Store(sh)
		s.hosted = append(s.hosted, sh)
	}
	return nil
}

// dialJobs builds the client of the battle tier, which runs the game's
// jobs (Jobs.Run).
func (s *Server) dialJobs() (err error) {
	cfg := s.cfg
	var retry *retryThrottle
	if cfg.battleRetry() {
		retry = newRetryThrottle(cfg.BattleRetryBudget, retryTokenRatio)
	}
	target, dns, _ := battleDNSTarget(cfg.BattleAddrs) // Validate has checked it
	if dns {
		s.battleCli = newBattleClient(cfg.Security, cfg.BattleTimeout, retry, cfg.battlePushback(), s.clk, s.m)
	} else if s.battleCli, err = dialBattle(cfg.Security, cfg.BattleAddrs, cfg.BattleTimeout, retry, cfg.battlePushback(), s.clk, s.m); err != nil {
		return err
	}
	s.battleCli.slotWait, s.battleCli.maxWaiters = cfg.BattleWait, int64(cfg.BattleWaiters)
	s.battleCli.setRTTTolerance(cfg.BattleRTTTolerance)
	if dns {
		host, port, _ := net.SplitHostPort(target)
		s.battleCli.discover(battleDiscovery{host: host, port: port, resolver: net.DefaultResolver,
			interval: cfg.BattleResolveInterval, clk: clock.Real{}, log: s.log})
	}
	s.jobs = s.battleCli
	return nil
}

// inProcessJobs runs the game's jobs through Config.Jobs.
type inProcessJobs struct{ r JobRunner }

func (j inProcessJobs) Run(ctx context.Context, job, key string, req []byte, _ priority.Class) ([]byte, time.Duration, error) {
	rep, err := j.r.Run(ctx, job, key, req)
	if err != nil && apperr.Code(err) == leveev2.ErrorCode_ERROR_CODE_INTERNAL && !errors.Is(err, apperr.ErrInternal) {
		err = fmt.Errorf("%w: job %q: %w", apperr.ErrInternal, job, err)
	}
	return rep, 0, err
}

// setClock replaces the server's clock (arrival stamps, battle cooling);
// tests call it before Run.
func (s *Server) setClock(c clock.Clock) {
	s.clk = c
	if s.battleCli != nil {
		s.battleCli.clk = c
	}
}

// GRPCAddr is the address the Logic service listens on.
func (s *Server) GRPCAddr() net.Addr { return s.grpcLis.Addr() }

// OpsAddr is the address of /metrics, /healthz and /readyz.
func (s *Server) OpsAddr() net.Addr { return s.opsLis.Addr() }

// Registry is the server's own metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Run serves until ctx is done, then stops as every tier does (package
// internal/serve): health NOT_SERVING and /readyz 503, the server keeps
// serving for Drain, GracefulStop lets in-flight requests finish (new ones
// are refused with UNAVAILABLE; past ShutdownGrace they are cancelled),
// then the shards finish what they accepted and the stores close, and the
// ops endpoints stop last: /metrics and /readyz answer through the whole
// drain. It returns nil on a clean stop; a second call returns
// serve.ErrAlreadyRun.
func (s *Server) Run(ctx context.Context) error {
	return s.tier.Run(ctx, serve.Steps{Start: s.start, Drain: s.drain, Stopped: s.stopped})
}

// start starts the shards of static hosting, or the lease manager, which
// starts the shards it acquires, before the gRPC server takes requests.
func (s *Server) start(_ context.Context, fail func(error)) {
	for _, sh := range s.hosted {
		s.shardWG.Go(sh.run)
	}
	if s.runLeases != nil {
		ctx, cancel := context.WithCancel(context.Background())
		s.leaseStop = cancel
		s.leaseWG.Go(func() {
			if err := s.runLeases(ctx); err != nil {
				fail(fmt.Errorf("logic: lease manager: %w", err))
			}
		})
	}
	s.log.Info("logic serving", "grpc", s.GRPCAddr().String(), "ops", s.OpsAddr().String(),
		"shards", s.cfg.Shards, "hosted", len(s.hosted), "instance", s.cfg.Instance, "store", s.storeName(), "data_dir", s.cfg.DataDir)
}

// storeName is Config.Store, "" read as StoreBolt.
func (s *Server) storeName() string {
	if s.cfg.postgres() {
		return StorePostgres
	}
	return StoreBolt
}

// drain runs while gRPC still serves: with dynamic hosting the lease
// manager hands every shard off (each finishes what it accepted, then its
// lease is freed for the other processes, to which the gate is redirected
// from then on) and stops.
func (s *Server) drain(ctx context.Context) error {
	if s.leaseStop == nil {
		return nil
	}
	began := time.Now()
	s.leaseStop()
	done := make(chan struct{})
	go func() {
		s.leaseWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.log.Info("logic handed its shards off", "took", time.Since(began).Round(time.Millisecond))
		return nil
	case <-ctx.Done():
		// Stopped waits for it; its shards stop with the server's.
		return fmt.Errorf("logic: handing the shards off: %w", ctx.Err())
	}
}

// stopped runs once no gRPC call runs any more: the lease manager has
// stopped, the shards finish what they accepted, then the stores and the
// battle connection close.
func (s *Server) stopped(context.Context) error {
	if s.leaseStop != nil {
		s.leaseStop()
		s.leaseWG.Wait()
	}
	s.stopShards()
	return s.closeResources()
}

// stopShards refuses new requests, lets every shard finish what it accepted,
// and waits for the shards and then the battle goroutines.
func (s *Server) stopShards() {
	s.hostMu.Lock()
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	dyn := s.dynamicShards()
	s.hostMu.Unlock()
	close(s.stop)
	for _, sh := range dyn {
		sh.halt(false)
	}
	s.shardWG.Wait()
	close(s.shardsDone)
	s.battleWG.Wait()
}

// closeResources closes the stores (after the shards stopped), then the
// PostgreSQL pool, and the battle connection.
func (s *Server) closeResources() error {
	var errs []error
	for _, sh := range s.hosted {
		if err := sh.store.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.leasePool != nil {
		s.leasePool.Close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.battleCli != nil {
		if err := s.battleCli.close(); err != nil {
			errs = append(errs, fmt.Errorf("logic: close battle client: %w", err))
		}
	}
	return errors.Join(errs...)
}

// closeListeners closes the listeners when New fails; after New, the
// servers own them.
func (s *Server) closeListeners() {
	for _, l := range []net.Listener{s.grpcLis, s.opsLis} {
		if l != nil {
			_ = l.Close()
		}
	}
}
