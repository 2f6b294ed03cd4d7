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

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"levee/internal/clock"
	"levee/internal/metrics"
	"levee/internal/serve"
	leveev1 "levee/proto/leveev1"
)

// Server is one logic process: the shards it hosts, their stores, the
// battle client, and the gRPC and ops servers in front of them.
type Server struct {
	leveev1.UnimplementedLogicServer

	cfg Config
	log *slog.Logger
	reg *prometheus.Registry
	m   *tierMetrics

	grpcLis net.Listener
	opsLis  net.Listener
	grpcSrv *grpc.Server
	health  *health.Server
	opsSrv  *http.Server
	serving atomic.Bool

	shards []*shard // indexed by shard id; nil where not hosted
	hosted []*shard

	// The overload mechanisms in force (Config.Protection and their own
	// switches).
	rejectEarly bool
	dropExpired bool

	// clk stamps arrivals for the dequeue guard and times the battle
	// instances' cooling (tests swap in a clock.Fake with setClock). The
	// shards' measured time per request is always wall-clock time.
	clk clock.Clock

	battle    simulator
	battleCli *battleClient
	battleSem chan struct{}
	battleWG  sync.WaitGroup

	mu         sync.RWMutex // guards stopping against admissions
	stopping   bool
	stop       chan struct{} // closed: shards finish their channel and exit
	shardsDone chan struct{} // closed: every shard goroutine has exited
	shardWG    sync.WaitGroup
	ran        atomic.Bool

	// Test hooks, set before Run. hookBatch runs when a shard has taken the
	// first message of a batch (a request or an internal message), before
	// it looks at it; hookCommit runs inside every commit transaction and
	// fails it by returning an error.
	hookBatch  func(shard int)
	hookCommit func() error
}

var _ leveev1.LogicServer = (*Server)(nil)

// New validates cfg, opens the stores of the hosted shards and the
// listeners, and builds the server. Run starts it.
func New(cfg Config, logger *slog.Logger) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := ensureDir(cfg.DataDir); err != nil {
		return nil, err
	}
	reg := metrics.NewRegistry("logic")
	s := &Server{
		cfg:         cfg,
		log:         logger,
		reg:         reg,
		m:           newMetrics(reg),
		shards:      make([]*shard, cfg.Shards),
		rejectEarly: cfg.rejectEarly(),
		dropExpired: cfg.dropExpired(),
		clk:         clock.Real{},
		battleSem:   make(chan struct{}, cfg.maxBattles()),
		stop:        make(chan struct{}),
		shardsDone:  make(chan struct{}),
	}
	defer func() {
		if err != nil {
			s.closeResources()
		}
	}()
	for _, id := range cfg.hosted() {
		st, err := openStore(cfg.DataDir, id)
		if err != nil {
			return nil, err
		}
		sh := newShard(id, st, s)
		s.shards[id] = sh
		s.hosted = append(s.hosted, sh)
	}
	var retry *retryThrottle
	if cfg.battleRetry() {
		retry = newRetryThrottle(cfg.BattleRetryBudget, retryTokenRatio)
	}
	s.battleCli, err = dialBattle(cfg.BattleAddrs, cfg.BattleTimeout, retry, cfg.battlePushback(), s.clk, s.m)
	if err != nil {
		return nil, err
	}
	s.battleCli.slotWait, s.battleCli.maxWaiters = cfg.BattleWait, int64(cfg.BattleWaiters)
	for _, in := range s.battleCli.insts {
		in.limit.tolerance = cfg.BattleRTTTolerance
	}
	s.battle = s.battleCli
	if s.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, fmt.Errorf("-grpc-addr: %w", err)
	}
	if s.opsLis, err = net.Listen("tcp", cfg.OpsAddr); err != nil {
		return nil, fmt.Errorf("-ops-addr: %w", err)
	}
	s.grpcSrv = grpc.NewServer()
	leveev1.RegisterLogicServer(s.grpcSrv, s)
	s.health = health.NewServer()
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	s.health.SetServingStatus(leveev1.Logic_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(s.grpcSrv, s.health)
	s.opsSrv = &http.Server{
		Handler:           metrics.OpsMux(reg, s.serving.Load),
		ReadHeaderTimeout: 5 * time.Second,
	}
	return s, nil
}

// setClock replaces the server's clock (arrival stamps, battle cooling);
// tests call it before Run.
func (s *Server) setClock(c clock.Clock) {
	s.clk = c
	s.battleCli.clk = c
}

// GRPCAddr is the address the Logic service listens on.
func (s *Server) GRPCAddr() net.Addr { return s.grpcLis.Addr() }

// OpsAddr is the address of /metrics, /healthz and /readyz.
func (s *Server) OpsAddr() net.Addr { return s.opsLis.Addr() }

// Registry is the server's own metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// ErrRunTwice is returned by a second call to Run.
var ErrRunTwice = errors.New("logic: Run called twice")

// Run serves until ctx is done, then shuts down: NOT_SERVING, GracefulStop
// (in-flight requests finish), new requests refused with UNAVAILABLE, the
// shards finish what they accepted, and the stores close. It returns nil on
// a clean stop.
func (s *Server) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	for _, sh := range s.hosted {
		s.shardWG.Add(1)
		go func() {
			defer s.shardWG.Done()
			sh.run(s.stop)
		}()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopReady := context.AfterFunc(ctx, func() { s.serving.Store(false) })
	defer stopReady()

	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(leveev1.Logic_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.serving.Store(true)
	s.log.Info("logic serving", "grpc", s.GRPCAddr().String(), "ops", s.OpsAddr().String(),
		"shards", s.cfg.Shards, "hosted", len(s.hosted), "instance", s.cfg.Instance, "data_dir", s.cfg.DataDir)

	httpErr := make(chan error, 1)
	go func() { httpErr <- serve.HTTP(ctx, s.opsSrv, s.opsLis, s.cfg.ShutdownGrace) }()
	grpcErr := serve.GRPC(ctx, s.grpcSrv, s.health, s.grpcLis, s.cfg.Drain, s.cfg.ShutdownGrace)
	s.serving.Store(false)
	cancel()

	// The ops server must be down before closeResources closes its
	// listener, or its Serve would report the close as an error.
	opsErr := <-httpErr
	s.stopShards()
	err := errors.Join(grpcErr, opsErr, s.closeResources())
	if err != nil {
		s.log.Error("logic stopped with errors", "err", err)
	} else {
		s.log.Info("logic stopped")
	}
	return err
}

// stopShards refuses new requests, lets every shard finish what it accepted,
// and waits for the shards and then the battle goroutines.
func (s *Server) stopShards() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	close(s.stop)
	s.shardWG.Wait()
	close(s.shardsDone)
	s.battleWG.Wait()
}

// closeResources closes the stores (after the shards stopped) and the
// battle connection.
func (s *Server) closeResources() error {
	var errs []error
	for _, sh := range s.hosted {
		if err := sh.store.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.battleCli != nil {
		if err := s.battleCli.close(); err != nil {
			errs = append(errs, fmt.Errorf("logic: close battle client: %w", err))
		}
	}
	for _, l := range []net.Listener{s.grpcLis, s.opsLis} {
		if l != nil {
			_ = l.Close() // already closed by the servers after Run
		}
	}
	return errors.Join(errs...)
}
