package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/serve/servetest"
	"github.com/leveehq/levee/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a Tier on loopback ports with a fake clock, a gRPC client, and
// a test service whose handler blocks on the fixture's hold.
type fixture struct {
	t     *testing.T
	tier  *Tier
	clk   *clock.Fake
	conn  *grpc.ClientConn
	ops   string // host:port
	grpc  string
	entry chan struct{} // a Block handler began
	hold  chan struct{} // closed: Block handlers return
	ctx   context.Context
	stop  context.CancelFunc
	done  chan error
}

// blockService is a gRPC service with one method, Block, whose handler
// waits for hold; ignoreCtx makes it wait for nothing else either.
func blockService(entry, hold chan struct{}, ignoreCtx bool) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "test.Block",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Block",
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				if err := dec(new(emptypb.Empty)); err != nil {
					return nil, err
				}
				entry <- struct{}{}
				if ignoreCtx {
					<-hold
					return new(emptypb.Empty), nil
				}
				select {
				case <-hold:
					return new(emptypb.Empty), nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			},
		}},
	}
}

type fixtureOpts struct {
	mod       func(*Config)
	ignoreCtx bool // the Block handler never returns until released
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{t: t, clk: clock.NewFake(time.Unix(1_700_000_000, 0)),
		entry: make(chan struct{}, 8), hold: make(chan struct{}), done: make(chan error, 1)}
	t.Cleanup(func() {
		select {
		case <-f.hold:
		default:
			close(f.hold)
		}
	})
	srv := grpc.NewServer()
	srv.RegisterService(blockService(f.entry, f.hold, o.ignoreCtx), struct{}{})
	cfg := Config{
		Name:         "test",
		GRPC:         srv,
		GRPCListener: listen(t),
		Services:     []string{"test.Block"},
		OpsListener:  listen(t),
		Ops:          map[string]http.Handler{"/metrics": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("test_up 1\n")) })},
		Grace:        time.Minute,
		Clock:        f.clk,
	}
	if o.mod != nil {
		o.mod(&cfg)
	}
	tier, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.tier, f.grpc, f.ops = tier, cfg.GRPCListener.Addr().String(), cfg.OpsListener.Addr().String()
	f.conn, err = grpc.NewClient(f.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.conn.Close() })
	f.ctx, f.stop = context.WithCancel(context.Background())
	t.Cleanup(f.stop)
	return f
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// run starts Run with steps; wait collects its result.
func (f *fixture) run(steps Steps) {
	go func() { f.done <- f.tier.Run(f.ctx, steps) }()
}

func (f *fixture) wait() error {
	f.t.Helper()
	select {
	case err := <-f.done:
		return err
	case <-time.After(20 * time.Second):
		f.t.Fatal("Run did not return")
		return nil
	}
}

// notReturned fails the test if Run has returned.
func (f *fixture) notReturned(when string) {
	f.t.Helper()
	select {
	case err := <-f.done:
		f.t.Fatalf("Run returned %v %s", err, when)
	default:
	}
}

func (f *fixture) health(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	r, err := healthpb.NewHealthClient(f.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return r.GetStatus(), err
}

// block calls Block and returns its result once it ends; it returns after
// the handler has begun.
func (f *fixture) block() <-chan error {
	errc := make(chan error, 1)
	go func() {
		errc <- f.conn.Invoke(context.Background(), "/test.Block/Block", new(emptypb.Empty), new(emptypb.Empty))
	}()
	select {
	case <-f.entry:
	case <-time.After(10 * time.Second):
		f.t.Fatal("the Block handler did not begin")
	}
	return errc
}

// The stop goes NOT_SERVING and /readyz 503 first, keeps serving for the
// drain period, runs the tier's drain while gRPC still takes calls, stops
// gRPC, runs Stopped, and only then stops the ops server; each step gets a
// fresh deadline, not the cancelled context.
func TestStopOrder(t *testing.T) {
	f := newFixture(t, fixtureOpts{mod: func(c *Config) { c.Drain = time.Hour }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	started := make(chan struct{})
	freshDeadline := func(step string, sctx context.Context) {
		if d, ok := sctx.Deadline(); !ok || sctx.Err() != nil || time.Until(d) < 50*time.Second {
			t.Errorf("%s: ctx err %v, deadline in %v; want a fresh one of Grace", step, sctx.Err(), time.Until(d))
		}
	}
	f.run(Steps{
		Start: func(ctx context.Context, fail func(error)) { note("start"); close(started) },
		Drain: func(sctx context.Context) error {
			note("drain")
			freshDeadline("Drain", sctx)
			// gRPC still takes calls, and says NOT_SERVING.
			for _, svc := range []string{"", "test.Block"} {
				if st, err := f.health(ctx, svc); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
					t.Errorf("health %q in Drain = %v, %v; want NOT_SERVING from a live server", svc, st, err)
				}
			}
			servetest.WantDraining(t, f.ops, "test_up 1")
			return nil
		},
		Stopped: func(sctx context.Context) error {
			note("stopped")
			freshDeadline("Stopped", sctx)
			// gRPC is gone; the ops server still answers.
			if _, err := f.health(ctx, ""); err == nil {
				t.Error("a health check succeeded after gRPC stopped")
			}
			if c, err := net.Dial("tcp", f.grpc); err == nil {
				c.Close()
				t.Error("the gRPC listener still accepts in Stopped")
			}
			servetest.WantDraining(t, f.ops, "test_up 1")
			return nil
		},
	})
	<-started
	testwait.Until(t, "SERVING", func() bool {
		st, err := f.health(ctx, "test.Block")
		return err == nil && st == healthpb.HealthCheckResponse_SERVING
	})
	if code, body := servetest.Get(t, "http://"+f.ops+"/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz while serving = %d %q", code, body)
	}
	if !f.tier.Ready() {
		t.Fatal("Ready() = false while serving")
	}

	f.stop()
	testwait.Until(t, "the drain timer", func() bool { return f.clk.Waiters() == 1 })
	// During the drain period: NOT_SERVING, 503, and new calls still served.
	if st, err := f.health(ctx, ""); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health during the drain period = %v, %v", st, err)
	}
	servetest.WantDraining(t, f.ops, "test_up 1")
	mu.Lock()
	if !slices.Equal(order, []string{"start"}) {
		t.Fatalf("steps before the drain period ended: %v", order)
	}
	mu.Unlock()
	f.notReturned("during the drain period")

	f.clk.Advance(time.Hour)
	if err := f.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if !slices.Equal(order, []string{"start", "drain", "stopped"}) {
		t.Fatalf("steps = %v", order)
	}
	if code, _ := servetest.Get(t, "http://"+f.ops+"/metrics"); code != 0 {
		t.Fatalf("/metrics answered %d after Run returned", code)
	}
}

// A call still running at the end of the grace is cancelled by Stop; Run
// does not return before that and returns nil after it.
func TestForcedStopAfterGrace(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.run(Steps{})
	call := f.block()
	f.stop()
	testwait.Until(t, "the grace timer", func() bool { return f.clk.Waiters() == 1 })
	f.notReturned("with a call in flight, before the grace")
	select {
	case err := <-call:
		t.Fatalf("the call ended before the grace: %v", err)
	default:
	}
	f.clk.Advance(time.Minute)
	if err := f.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if err := <-call; err == nil {
		t.Fatal("the cancelled call succeeded")
	}
}

// A handler that ignores its cancelled context cannot hold the stop: a grace
// after the forced Stop, Run returns ErrStuckHandlers.
func TestStuckHandlerDoesNotHoldTheStop(t *testing.T) {
	f := newFixture(t, fixtureOpts{ignoreCtx: true})
	stopped := make(chan struct{})
	f.run(Steps{Stopped: func(context.Context) error { close(stopped); return nil }})
	call := f.block()
	f.stop()
	testwait.Until(t, "the grace timer", func() bool { return f.clk.Waiters() == 1 })
	f.clk.Advance(time.Minute) // grace over: Stop
	<-call                     // Stop closed the connection under the handler
	testwait.Until(t, "the wait after Stop", func() bool { return f.clk.Waiters() == 1 })
	f.notReturned("before the wait after Stop ended")
	f.clk.Advance(time.Minute)
	if err := f.wait(); !errors.Is(err, ErrStuckHandlers) {
		t.Fatalf("Run = %v, want ErrStuckHandlers", err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("Stopped did not run")
	}
	close(f.hold) // the stuck handler, and GracefulStop's goroutine, end
}

func TestRunOnce(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	starts := 0
	steps := Steps{Start: func(context.Context, func(error)) { starts++ }}
	f.run(steps)
	testwait.Until(t, "serving", f.tier.Ready)
	if err := f.tier.Run(context.Background(), steps); !errors.Is(err, ErrAlreadyRun) {
		t.Fatalf("Run while running = %v, want ErrAlreadyRun", err)
	}
	f.stop()
	if err := f.wait(); err != nil {
		t.Fatal(err)
	}
	if err := f.tier.Run(context.Background(), steps); !errors.Is(err, ErrAlreadyRun) {
		t.Fatalf("Run after Run = %v, want ErrAlreadyRun", err)
	}
	if starts != 1 {
		t.Fatalf("Start ran %d times", starts)
	}
}

var errBoom = errors.New("boom")

// failingListener fails every Accept, as a broken socket does.
type failingListener struct{ net.Listener }

func (failingListener) Accept() (net.Conn, error) { return nil, errBoom }

// A part that fails (a server's Serve, or the tier's own through fail)
// stops the tier without waiting for the drain period, runs the rest of the
// stop, and Run returns the failure.
func TestFailureStopsTheTier(t *testing.T) {
	for _, c := range []struct {
		name  string
		mod   func(*Config)
		start func(ctx context.Context, fail func(error))
		want  string
	}{
		{"grpc serve", func(c *Config) { c.GRPCListener = failingListener{c.GRPCListener} }, nil, "test: grpc server: boom"},
		{"ops serve", func(c *Config) { c.OpsListener = failingListener{c.OpsListener} }, nil, "test: ops server: boom"},
		{"tier's own", nil, func(_ context.Context, fail func(error)) { fail(errBoom) }, "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{mod: func(cfg *Config) {
				cfg.Drain = time.Hour // never waited for: a failure skips it
				if c.mod != nil {
					c.mod(cfg)
				}
			}})
			stopped := false
			f.run(Steps{Start: c.start, Stopped: func(context.Context) error { stopped = true; return nil }})
			err := f.wait()
			if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run = %v, want %q", err, c.want)
			}
			if !stopped {
				t.Fatal("Stopped did not run")
			}
		})
	}
}

// A step's error is returned, and the rest of the stop still runs.
func TestStepErrorReturned(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	stopped := false
	f.run(Steps{
		Drain:   func(context.Context) error { return errBoom },
		Stopped: func(context.Context) error { stopped = true; return nil },
	})
	testwait.Until(t, "serving", f.tier.Ready)
	f.stop()
	if err := f.wait(); !errors.Is(err, errBoom) {
		t.Fatalf("Run = %v, want boom", err)
	}
	if !stopped {
		t.Fatal("Stopped did not run after a failed Drain")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	h := http.NotFoundHandler()
	for _, c := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Name = "" }, "no Name"},
		{func(c *Config) { c.GRPC = nil }, "gRPC server"},
		{func(c *Config) { c.GRPCListener = nil }, "gRPC server"},
		{func(c *Config) { c.OpsListener = nil }, "ops listener"},
		{func(c *Config) { c.Grace = 0 }, "Grace must be > 0"},
		{func(c *Config) { c.Drain = -time.Second }, "Drain must be >= 0"},
		{func(c *Config) { c.Ops = map[string]http.Handler{"/readyz": h} }, `ops path "/readyz"`},
		{func(c *Config) { c.Ops = map[string]http.Handler{"/x": nil} }, "nil handler"},
		{func(c *Config) { c.Ops = map[string]http.Handler{"BAD PATTERN x": h} }, "ops path"},
	} {
		cfg := Config{Name: "test", GRPC: grpc.NewServer(), GRPCListener: listen(t), OpsListener: listen(t), Grace: time.Second}
		c.mod(&cfg)
		tier, err := New(cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New = %v, want ErrConfig with %q", err, c.want)
		}
		if tier != nil {
			t.Errorf("New returned a Tier with error %v", err)
		}
	}
}

// With Config.Started, /readyz answers 503 "starting" until it holds,
// while health and everything else already serve.
func TestReadyWaitsForStarted(t *testing.T) {
	var started atomic.Bool
	f := newFixture(t, fixtureOpts{mod: func(c *Config) { c.Started = started.Load }})
	f.run(Steps{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	testwait.Until(t, "health SERVING", func() bool {
		st, err := f.health(ctx, "")
		return err == nil && st == healthpb.HealthCheckResponse_SERVING
	})
	if code, body := servetest.Get(t, "http://"+f.ops+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Fatalf("/readyz before Started = %d %q, want 503 starting", code, body)
	}
	if f.tier.Ready() {
		t.Fatal("Ready() before Started")
	}
	started.Store(true)
	if code, body := servetest.Get(t, "http://"+f.ops+"/readyz"); code != http.StatusOK || !strings.Contains(body, "ready") {
		t.Fatalf("/readyz after Started = %d %q, want 200 ready", code, body)
	}
	f.stop()
	if err := f.wait(); err != nil {
		t.Fatal(err)
	}
}
