// Package serve is the one lifecycle every Levee tier runs: the tier's gRPC
// server, its ops HTTP server (/metrics, /healthz, /readyz and the tier's own
// ops paths) and the tier's own work, started together and stopped in one
// order.
//
// A Tier serves until Run's context ends or one of its servers fails, then
// stops in this order:
//
//  1. /readyz answers 503 "draining" and gRPC health reports NOT_SERVING for
//     every service, so load balancers and the rollout take the tier out of
//     rotation. Everything else keeps working.
//  2. It keeps serving for the drain period (Config.Drain), so that they
//     notice (skipped when a server failed).
//  3. Steps.Drain, the tier's own drain, runs while gRPC still serves: the
//     gate stops its line, refuses new players and requests, lets the
//     requests in flight finish and closes every socket with 1012.
//  4. gRPC GracefulStop lets the calls in flight finish (battle's
//     simulations, logic's requests); past Config.Grace, Stop cancels the
//     rest.
//  5. Steps.Stopped runs once no gRPC call runs any more, so the work the
//     calls handed off can end and resources close: logic's shards finish
//     their queues and its stores close, battle's CPU sampler stops, the
//     gate closes its logic connections.
//  6. Only then does the ops server stop. /metrics, /healthz and /readyz
//     answer through the whole drain, when the autoscaler, the dashboards
//     and the rollout need them most.
//
// Every wait is bounded by Config.Grace, and every step gets a fresh
// deadline of its own, never the cancelled context. Run may be called once.
package serve

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

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leveehq/levee/internal/clock"
)

var (
	// ErrAlreadyRun is returned by a second call to a Tier's Run (and so by
	// every tier's Run).
	ErrAlreadyRun = errors.New("serve: Run called twice")
	// ErrConfig wraps every reason New refuses a Config.
	ErrConfig = errors.New("serve: bad config")
	// ErrStuckHandlers is returned by Run when gRPC handlers were still
	// running a grace period after the forced Stop cancelled their calls:
	// a handler that ignores its context. Run returns anyway; the stuck
	// goroutines end when their handlers do.
	ErrStuckHandlers = errors.New("serve: gRPC handlers still running after the forced stop")
)

// Config is what a tier hands to its lifecycle.
type Config struct {
	// Name is the tier ("gate", "logic", "battle"); it prefixes the errors
	// and log lines of the lifecycle.
	Name string
	// GRPC is the tier's gRPC server with its services registered; New
	// registers the health service on it, so it must not have served yet.
	GRPC         *grpc.Server
	GRPCListener net.Listener
	// Services are the gRPC service names whose health is reported besides
	// the server's overall health ("").
	Services []string
	// OpsListener is where the ops server listens. Ops maps the tier's own
	// ops paths (http.ServeMux patterns: /metrics, the gate's admin API) to
	// their handlers; /healthz and /readyz are the lifecycle's.
	OpsListener net.Listener
	Ops         map[string]http.Handler
	// Drain is how long the tier keeps serving after it reported NOT_SERVING
	// (>= 0); Grace bounds each step of the stop (> 0).
	Drain, Grace time.Duration
	// Clock times the drain period and the grace of the gRPC stop; nil is
	// the wall clock. (The steps' context deadlines are wall-clock time.)
	Clock clock.Clock
	// Log receives the lifecycle's lines; nil discards them.
	Log *slog.Logger
	// Started, when set, must also hold for /readyz to say ready: the
	// tier's own start-up has finished (logic on PostgreSQL: its lease
	// manager's first pass); until then /readyz answers 503 "starting".
	// nil: ready from Run's start.
	Started func() bool
}

// Steps are the tier's own parts of the lifecycle; each may be nil.
type Steps struct {
	// Start starts the tier's own work before its servers serve: logic's
	// shards, battle's CPU sampler, the gate's WebSocket server, keepalive
	// and line. ctx ends when the tier begins to stop, so a loop that must
	// stop first (the gate's line) can run on it. A part that fails calls
	// fail, which stops the tier and makes Run return the error; fail must
	// not be called once Stopped has returned. Every goroutine Start starts
	// must have ended when Stopped returns.
	Start func(ctx context.Context, fail func(error))
	// Drain is the tier's drain while gRPC still serves (step 3 of the
	// package doc); ctx expires after Config.Grace.
	Drain func(ctx context.Context) error
	// Stopped runs after gRPC has stopped (step 5); ctx expires after
	// Config.Grace.
	Stopped func(ctx context.Context) error
}

// Tier is one tier's lifecycle: its servers, health and readiness.
type Tier struct {
	cfg    Config
	clock  clock.Clock
	log    *slog.Logger
	health *health.Server
	ops    *http.Server
	ready  atomic.Bool // /readyz: true from Run's start until the stop begins
	ran    atomic.Bool
}

// New checks cfg, registers the health service on cfg.GRPC (NOT_SERVING
// until Run) and builds the ops server. Call Run to serve.
func New(cfg Config) (*Tier, error) {
	switch {
	case cfg.Name == "":
		return nil, fmt.Errorf("%w: no Name", ErrConfig)
	case cfg.GRPC == nil || cfg.GRPCListener == nil:
		return nil, fmt.Errorf("%w: %s: a gRPC server and its listener are required", ErrConfig, cfg.Name)
	case cfg.OpsListener == nil:
		return nil, fmt.Errorf("%w: %s: an ops listener is required", ErrConfig, cfg.Name)
	case cfg.Grace <= 0:
		return nil, fmt.Errorf("%w: %s: Grace must be > 0, got %v", ErrConfig, cfg.Name, cfg.Grace)
	case cfg.Drain < 0:
		return nil, fmt.Errorf("%w: %s: Drain must be >= 0, got %v", ErrConfig, cfg.Name, cfg.Drain)
	}
	t := &Tier{cfg: cfg, clock: cfg.Clock, log: cfg.Log, health: health.NewServer()}
	if t.clock == nil {
		t.clock = clock.Real{}
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", t.readyz)
	for pattern, h := range cfg.Ops {
		if err := handle(mux, pattern, h); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrConfig, cfg.Name, err)
		}
	}
	t.ops = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(t.log.Handler(), slog.LevelDebug),
	}
	t.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(cfg.GRPC, t.health)
	return t, nil
}

// handle registers h, turning the mux's panic on a bad or duplicate
// pattern (/healthz and /readyz are taken) into an error.
func handle(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	if h == nil {
		return fmt.Errorf("ops path %q: nil handler", pattern)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ops path %q: %v", pattern, r)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// Ready reports what /readyz says: true while the tier serves (and
// Config.Started holds), false before Run and from the moment its stop
// begins.
func (t *Tier) Ready() bool {
	return t.ready.Load() && (t.cfg.Started == nil || t.cfg.Started())
}

func (t *Tier) readyz(w http.ResponseWriter, _ *http.Request) {
	if !t.ready.Load() {
		// The ops server answers only during Run, so not ready is draining.
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	if t.cfg.Started != nil && !t.cfg.Started() {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

func (t *Tier) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	t.health.SetServingStatus("", st)
	for _, name := range t.cfg.Services {
		t.health.SetServingStatus(name, st)
	}
}

// Run starts the tier (steps.Start, then its servers), serves until ctx is
// done or a part fails, then stops in the order of the package doc. It
// returns nil on a clean stop, else every failure joined: a server's Serve
// error, a step's error, ErrStuckHandlers. A second call returns
// ErrAlreadyRun.
func (t *Tier) Run(ctx context.Context, steps Steps) error {
	if !t.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var errs failures
	fail := func(err error) {
		if err != nil {
			errs.add(err)
			stop()
		}
	}

	if steps.Start != nil {
		steps.Start(runCtx, fail)
	}
	t.setHealth(healthpb.HealthCheckResponse_SERVING)
	t.ready.Store(true)
	var grpcWG, opsWG sync.WaitGroup
	grpcWG.Go(func() {
		if err := t.cfg.GRPC.Serve(t.cfg.GRPCListener); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			fail(fmt.Errorf("%s: grpc server: %w", t.cfg.Name, err))
		}
	})
	opsWG.Go(func() {
		if err := t.ops.Serve(t.cfg.OpsListener); !errors.Is(err, http.ErrServerClosed) {
			fail(fmt.Errorf("%s: ops server: %w", t.cfg.Name, err))
		}
	})

	<-runCtx.Done()
	t.ready.Store(false)
	t.health.Shutdown() // NOT_SERVING for every service, for good
	t.log.Info(t.cfg.Name+" draining", "drain", t.cfg.Drain.String(), "grace", t.cfg.Grace.String())
	if errs.empty() && t.cfg.Drain > 0 {
		timer := t.clock.NewTimer(t.cfg.Drain)
		<-timer.C()
	}
	if steps.Drain != nil {
		errs.add(t.step(steps.Drain))
	}
	errs.add(t.stopGRPC())
	grpcWG.Wait()
	if steps.Stopped != nil {
		errs.add(t.step(steps.Stopped))
	}
	t.stopOps()
	opsWG.Wait()

	err := errs.join()
	if err != nil {
		t.log.Error(t.cfg.Name+" stopped with errors", "err", err)
	} else {
		t.log.Info(t.cfg.Name + " stopped")
	}
	return err
}

// step runs f with a fresh deadline of Grace.
func (t *Tier) step(f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Grace)
	defer cancel()
	return f(ctx)
}

// stopGRPC stops the gRPC server gracefully, or by force past the grace.
// The goroutine that runs GracefulStop ends when the last handler returns;
// if handlers still run a grace after the forced Stop, it is left to end
// with them and ErrStuckHandlers is returned.
func (t *Tier) stopGRPC() error {
	done := make(chan struct{})
	go func() {
		t.cfg.GRPC.GracefulStop()
		close(done)
	}()
	if t.within(done, t.cfg.Grace) {
		return nil
	}
	t.log.Warn(t.cfg.Name+": shutdown grace expired; cancelling the gRPC calls still running", "grace", t.cfg.Grace.String())
	t.cfg.GRPC.Stop()
	if t.within(done, t.cfg.Grace) {
		return nil
	}
	return fmt.Errorf("%s: %w (%v after Stop)", t.cfg.Name, ErrStuckHandlers, t.cfg.Grace)
}

// within reports whether done is closed within d on the tier's clock.
func (t *Tier) within(done <-chan struct{}, d time.Duration) bool {
	timer := t.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C():
		return false
	}
}

// stopOps stops the ops server with a fresh deadline, closing it past that.
func (t *Tier) stopOps() {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Grace)
	defer cancel()
	if err := t.ops.Shutdown(ctx); err != nil {
		_ = t.ops.Close()
	}
}

// failures collects a run's errors from several goroutines.
type failures struct {
	mu   sync.Mutex
	errs []error
}

func (f *failures) add(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

func (f *failures) empty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.errs) == 0
}

func (f *failures) join() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}

// HTTP serves srv on lis until ctx is done, then shuts it down with a fresh
// timeout of grace (never the cancelled ctx). It is for a lone HTTP server
// (cmd/barews); the tiers run a Tier.
func HTTP(ctx context.Context, srv *http.Server, lis net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http serve: %w", err)
	}
	return nil
}
