package battle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"levee/internal/clock"
	"levee/internal/cpu"
	"levee/internal/metrics"
	"levee/internal/serve"
	"levee/internal/shed"
	leveev1 "levee/proto/leveev1"
)

// MaxRecvMsgSize bounds a request; the largest valid one is a few KiB.
const MaxRecvMsgSize = 64 << 10

// ErrAlreadyRun is returned by a second call to Run.
var ErrAlreadyRun = errors.New("battle: server already run")

// simulateFunc runs one validated battle; Simulate in production, a
// controllable stand-in in tests.
type simulateFunc func(context.Context, *leveev1.SimulateRequest) (*leveev1.SimulateReply, error)

// Server is the battle tier: the Battle gRPC service, its health service and
// its ops HTTP endpoints.
type Server struct {
	leveev1.UnimplementedBattleServer

	cfg     Config
	log     *slog.Logger
	reg     *prometheus.Registry
	m       *serverMetrics
	grpcLis net.Listener
	opsLis  net.Listener
	grpc    *grpc.Server
	health  *health.Server
	ops     *http.Server

	adm      *admission
	throttle *shed.Throttle
	sampler  *cpu.Sampler
	sim      simulateFunc
	clk      clock.Clock
	// cpu reads the CPU utilisation (0..1): the sampler's in production, a
	// made-up one in tests.
	cpu func() float64
	// int64N draws the throttle's delays and the jitter of refusals'
	// retry-after: uniform in [0, n), safe for concurrent use.
	int64N func(n int64) int64
	// samplerErr is set once a failed CPU sample has been logged.
	samplerErr atomic.Bool

	ready atomic.Bool // true while serving and not shutting down
	ran   atomic.Bool
}

var _ leveev1.BattleServer = (*Server)(nil)

// New validates cfg, opens both listeners (so ":0" works) and builds the
// server. A nil logger discards logs.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	grpcLis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("battle: listen -grpc-addr %s: %w", cfg.GRPCAddr, err)
	}
	opsLis, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		grpcLis.Close()
		return nil, fmt.Errorf("battle: listen -ops-addr %s: %w", cfg.OpsAddr, err)
	}
	s := &Server{
		cfg:     cfg,
		log:     logger,
		reg:     metrics.NewRegistry("battle"),
		grpcLis: grpcLis,
		opsLis:  opsLis,
		health:  health.NewServer(),
		sim:     Simulate,
		clk:     clock.Real{},
		int64N:  rand.Int64N,
	}
	if err := s.build(); err != nil {
		grpcLis.Close()
		opsLis.Close()
		return nil, err
	}
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             10 * time.Second,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: 5 * time.Minute,
			// Recycle connections so that callers spread over new replicas
			// when the autoscaler adds them.
			MaxConnectionAge:      2 * time.Minute,
			MaxConnectionAgeGrace: cfg.ShutdownGrace,
			Time:                  30 * time.Second,
			Timeout:               10 * time.Second,
		}),
	)
	leveev1.RegisterBattleServer(s.grpc, s)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	s.ops = &http.Server{
		Handler:           metrics.OpsMux(s.reg, s.ready.Load),
		ReadHeaderTimeout: 5 * time.Second,
	}
	return s, nil
}

// build makes the protection parts: the CPU sampler, the throttle, the
// admission decision, and the metrics that read them.
func (s *Server) build() error {
	var err error
	s.sampler, err = cpu.NewSampler(cpu.Options{Clock: clock.Real{}, OnError: s.logSampleError})
	if err != nil {
		return fmt.Errorf("battle: cpu sampler: %w", err)
	}
	s.cpu = s.sampler.Utilization
	s.throttle, err = shed.NewThrottle(shed.ThrottleConfig{
		CPUThreshold: s.cfg.ThrottleCPU,
		MaxDelay:     s.cfg.ThrottleMaxDelay,
		Int64N:       func(n int64) int64 { return s.int64N(n) },
	})
	if err != nil {
		return fmt.Errorf("battle: throttle: %w", err)
	}
	if s.adm, err = newAdmission(s.cfg); err != nil {
		return fmt.Errorf("battle: shedder: %w", err)
	}
	s.m = newServerMetrics(s.reg,
		func() float64 { return s.cpu() },
		func() float64 { return s.adm.shedder.Limit(s.clk.Now()) })
	return nil
}

// logSampleError logs the first failed CPU sample; the sampler keeps its last
// value until a sample succeeds.
func (s *Server) logSampleError(err error) {
	if s.samplerErr.CompareAndSwap(false, true) {
		s.log.Warn("cpu sampling failed; further failures are not logged", "err", err)
	}
}

// GRPCAddr is the address the gRPC services listen on.
func (s *Server) GRPCAddr() net.Addr { return s.grpcLis.Addr() }

// OpsAddr is the address the ops HTTP endpoints listen on.
func (s *Server) OpsAddr() net.Addr { return s.opsLis.Addr() }

// Registry is the server's own Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

func (s *Server) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(leveev1.Battle_ServiceDesc.ServiceName, st)
}

// Run serves until ctx is done, then shuts down: health goes NOT_SERVING,
// the server keeps serving for Drain, in-flight simulations get
// ShutdownGrace to finish, and the ops endpoints stop last. It returns nil on
// a clean stop. Run may be called once.
func (s *Server) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The ops endpoints outlive the gRPC server, so /readyz says 503 and
	// /metrics is scraped while the tier drains.
	opsCtx, opsCancel := context.WithCancel(context.Background())
	defer opsCancel()

	s.setHealth(healthpb.HealthCheckResponse_SERVING)
	s.ready.Store(true)
	s.log.Info("battle serving", "grpc_addr", s.GRPCAddr().String(), "ops_addr", s.OpsAddr().String(),
		"allowed_cpus", s.sampler.AllowedCPUs(),
		"throttle", s.cfg.throttleOn(), "adaptive_shed", s.cfg.adaptiveShedOn(),
		"in_flight_cap", s.cfg.inFlightCapOn(), "max_in_flight", s.cfg.MaxInFlight)

	// The sampler runs until the gRPC server has stopped, so simulations
	// still running during the drain see a live CPU reading.
	samplerCtx, samplerStop := context.WithCancel(context.Background())
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		s.sampler.Run(samplerCtx, s.cfg.CPUInterval)
	}()
	defer func() {
		samplerStop()
		<-samplerDone
	}()

	errc := make(chan error, 2)
	go func() {
		err := serve.GRPC(ctx, s.grpc, s.health, s.grpcLis, s.cfg.Drain, s.cfg.ShutdownGrace)
		cancel()
		opsCancel()
		if err != nil {
			err = fmt.Errorf("battle: grpc: %w", err)
		}
		errc <- err
	}()
	go func() {
		err := serve.HTTP(opsCtx, s.ops, s.opsLis, s.cfg.ShutdownGrace)
		cancel()
		if err != nil {
			err = fmt.Errorf("battle: ops http: %w", err)
		}
		errc <- err
	}()

	<-ctx.Done()
	s.ready.Store(false)
	s.log.Info("battle shutting down", "drain", s.cfg.Drain.String(), "grace", s.cfg.ShutdownGrace.String())
	err := errors.Join(<-errc, <-errc)
	if err != nil {
		s.log.Error("battle stopped with error", "err", err)
	} else {
		s.log.Info("battle stopped")
	}
	return err
}
