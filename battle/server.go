package battle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/cpu"
	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/metrics"
	"github.com/leveehq/levee/internal/serve"
	"github.com/leveehq/levee/internal/shed"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// MaxRecvMsgSize bounds a job request (its name, key and encoded request);
// a larger one is refused by gRPC with RESOURCE_EXHAUSTED.
const MaxRecvMsgSize = 64 << 10

// job is one of the game's jobs as the tier runs it: its declaration, the
// Run it calls (the declaration's; a controllable stand-in in tests) and its
// metrics' children, resolved once.
type job struct {
	def     *gamedef.Job
	run     func(context.Context, proto.Message) (proto.Message, error)
	latency prometheus.Observer
	panics  prometheus.Counter
}

// Server is the battle tier: the Jobs gRPC service (the game's compute
// jobs), its health service and its ops HTTP endpoints.
type Server struct {
	cfg     Config
	log     *slog.Logger
	reg     *prometheus.Registry
	m       *serverMetrics
	grpcLis net.Listener
	opsLis  net.Listener
	grpc    *grpc.Server
	tier    *serve.Tier // health, readiness, the ops server and the stop

	adm      *admission
	throttle *shed.Throttle
	sampler  *cpu.Sampler
	jobs     map[string]*job
	clk      clock.Clock
	// cpu reads the CPU utilisation (0..1): the sampler's in production, a
	// made-up one in tests.
	cpu func() float64
	// int64N draws the throttle's delays and the jitter of refusals'
	// retry-after: uniform in [0, n), safe for concurrent use.
	int64N func(n int64) int64
	// samplerErr is set once a failed CPU sample has been logged.
	samplerErr atomic.Bool
	// The sampler's goroutine, from Run's start until gRPC has stopped.
	samplerStop context.CancelFunc
	samplerWG   sync.WaitGroup
}

// New validates cfg and its game (refusing a declaration that cannot work,
// with the reason naming the action or job), opens both listeners (so ":0"
// works) and builds the server. A nil logger discards logs.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	if err := errors.Join(cfg.Validate(), cfg.ValidateGame()); err != nil {
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
		clk:     clock.Real{},
		int64N:  rand.Int64N,
	}
	if err := cfg.Security.RegisterMetrics(s.reg, "battle"); err != nil {
		grpcLis.Close()
		opsLis.Close()
		return nil, err
	}
	if err := s.build(); err != nil {
		grpcLis.Close()
		opsLis.Close()
		return nil, err
	}
	// The callers' keepalive pings (internal/grpcdial) are allowed.
	s.grpc = grpc.NewServer(append(cfg.Security.ServerOptions(grpcdial.BattleAccepts...),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: 5 * time.Minute,
			// Recycle connections so that callers spread over new replicas
			// when the autoscaler adds them.
			MaxConnectionAge:      2 * time.Minute,
			MaxConnectionAgeGrace: cfg.ShutdownGrace,
			Time:                  30 * time.Second,
			Timeout:               10 * time.Second,
		}),
	)...)
	leveev2.RegisterJobsServer(s.grpc, jobsService{s: s})
	s.tier, err = serve.New(serve.Config{
		Name:         "battle",
		GRPC:         s.grpc,
		GRPCListener: grpcLis,
		Services:     []string{leveev2.Jobs_ServiceDesc.ServiceName},
		OpsListener:  opsLis,
		Ops:          map[string]http.Handler{"/metrics": metrics.Handler(s.reg)},
		Drain:        cfg.Drain,
		Grace:        cfg.ShutdownGrace,
		Log:          logger,
	})
	if err != nil {
		grpcLis.Close()
		opsLis.Close()
		return nil, err
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
	s.jobs = make(map[string]*job)
	for _, d := range s.cfg.Game.Def().Jobs() {
		s.jobs[d.Name] = &job{
			def:     d,
			run:     d.Run,
			latency: s.m.latency.WithLabelValues(d.Name),
			panics:  s.m.panics.WithLabelValues(d.Name),
		}
	}
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

// Run serves until ctx is done, then stops as every tier does (package
// internal/serve): health NOT_SERVING and /readyz 503, the server keeps
// serving for Drain, in-flight jobs get ShutdownGrace to finish
// (GracefulStop, then Stop), the CPU sampler stops, and the ops endpoints
// stop last. It returns nil on a clean stop; a second call returns
// serve.ErrAlreadyRun.
func (s *Server) Run(ctx context.Context) error {
	return s.tier.Run(ctx, serve.Steps{Start: s.start, Stopped: s.stopSampler})
}

// start runs the CPU sampler until the gRPC server has stopped, so
// jobs still running during the drain see a live CPU reading.
func (s *Server) start(context.Context, func(error)) {
	ctx, stop := context.WithCancel(context.Background())
	s.samplerStop = stop
	s.samplerWG.Go(func() { s.sampler.Run(ctx, s.cfg.CPUInterval) })
	s.log.Info("battle serving", "game", s.cfg.Game.Name(), "jobs", len(s.jobs), "grpc_addr", s.GRPCAddr().String(), "ops_addr", s.OpsAddr().String(),
		"allowed_cpus", s.sampler.AllowedCPUs(),
		"throttle", s.cfg.throttleOn(), "adaptive_shed", s.cfg.adaptiveShedOn(),
		"in_flight_cap", s.cfg.inFlightCapOn(), "max_in_flight", s.cfg.MaxInFlight)
}

func (s *Server) stopSampler(context.Context) error {
	s.samplerStop()
	s.samplerWG.Wait()
	return nil
}
