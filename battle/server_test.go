package battle

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/serve"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func testConfig() Config {
	c := DefaultConfig()
	c.GRPCAddr, c.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	c.ShutdownGrace = 5 * time.Second
	return c
}

type running struct {
	srv    *Server
	conn   *grpc.ClientConn
	client leveev2.BattleClient
	stop   context.CancelFunc
	done   chan error // Run's result
}

// start runs a server (tweak, if given, adjusts it before Run) and dials it.
// Cleanup stops it and checks that Run returned nil.
func start(t *testing.T, cfg Config, tweak func(*Server)) *running {
	t.Helper()
	srv, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The real CPU reading would make the throttle and the shedder depend on
	// how busy the test machine is; tests that want load set it.
	srv.cpu = func() float64 { return 0 }
	if tweak != nil {
		tweak(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: srv, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Run(ctx) }()
	r.conn, err = grpc.NewClient(srv.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.client = leveev2.NewBattleClient(r.conn)
	t.Cleanup(func() {
		r.conn.Close()
		cancel()
		if err := r.wait(t); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r
}

// wait returns Run's result, failing the test if it takes too long.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // let a second wait see it too
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func outcomes(s *Server, o string) float64 {
	return testutil.ToFloat64(s.m.requests.WithLabelValues(o))
}

func latencySamples(t *testing.T, s *Server) (count uint64, sum float64) {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "battle_latency_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("battle_latency_seconds not registered")
	return 0, 0
}

func TestSameReplyFromTwoServersOverGRPC(t *testing.T) {
	a := start(t, testConfig(), nil)
	b := start(t, testConfig(), nil)
	ctx := context.Background()
	req := skirmish(99)
	want, err := Simulate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []leveev2.BattleClient{a.client, b.client, a.client} {
		got, err := c.Simulate(ctx, req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("call %d: got %v, want %v", i, got, want)
		}
	}
	other := proto.Clone(req).(*leveev2.SimulateRequest)
	other.Seed++
	got, err := b.client.Simulate(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetResultHash() == want.GetResultHash() {
		t.Fatal("a different seed gave the same hash")
	}
	if n := outcomes(a.srv, outcomeOK); n != 2 {
		t.Fatalf("server a: ok = %v, want 2", n)
	}
	if n := testutil.CollectAndCount(a.srv.Registry(), "battle_latency_seconds"); n != 1 {
		t.Fatalf("battle_latency_seconds series = %d, want 1", n)
	}
	if n, _ := latencySamples(t, a.srv); n != 2 {
		t.Fatalf("server a: %d latency samples, want 2", n)
	}
}

func TestBadRequestsAreInvalidArgument(t *testing.T) {
	r := start(t, testConfig(), nil)
	valid := func() *leveev2.SimulateRequest { return skirmish(1) }
	cases := badRequests()
	for _, c := range cases {
		_, err := r.client.Simulate(context.Background(), c.mutate(valid()))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.field) {
			t.Errorf("%s: err = %v, want InvalidArgument naming %q", c.name, err, c.field)
		}
	}
	if _, err := r.client.Simulate(context.Background(), &leveev2.SimulateRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("empty request: err = %v", err)
	}
	if got, want := outcomes(r.srv, outcomeBadRequest), float64(len(cases)+1); got != want {
		t.Errorf("bad_request = %v, want %v", got, want)
	}
	if n, _ := latencySamples(t, r.srv); n != 0 {
		t.Errorf("%d latency samples for refused requests, want 0", n)
	}
}

func TestOversizedRequestIsRefused(t *testing.T) {
	r := start(t, testConfig(), nil)
	req := skirmish(1)
	req.BattleId = strings.Repeat("x", MaxRecvMsgSize)
	if _, err := r.client.Simulate(context.Background(), req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("err = %v, want ResourceExhausted", err)
	}
}

// gatedSim is a simulator that reports when a simulation starts and waits
// for the test to let it go (or for its caller to leave).
type gatedSim struct {
	entered chan struct{}
	release chan struct{}
}

func newGatedSim() *gatedSim {
	return &gatedSim{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gatedSim) simulate(ctx context.Context, req *leveev2.SimulateRequest) (*leveev2.SimulateReply, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return Simulate(ctx, req)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestMaxInFlightRefusesAtOnceWithPushback(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInFlight = 2
	g := newGatedSim()
	r := start(t, cfg, func(s *Server) {
		s.sim = g.simulate
		s.int64N = func(int64) int64 { return 0 } // no retry-after jitter
	})

	type result struct {
		rep *leveev2.SimulateReply
		err error
	}
	results := make(chan result, cfg.MaxInFlight)
	for range cfg.MaxInFlight {
		go func() {
			rep, err := r.client.Simulate(context.Background(), skirmish(5))
			results <- result{rep, err}
		}()
		<-g.entered
	}
	if v := testutil.ToFloat64(r.srv.m.inflight); v != float64(cfg.MaxInFlight) {
		t.Fatalf("battle_inflight = %v, want %d", v, cfg.MaxInFlight)
	}

	var trailer metadata.MD
	_, err := r.client.Simulate(context.Background(), skirmish(6), grpc.Trailer(&trailer))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the cap: err = %v, want ResourceExhausted", err)
	}
	// No simulation has completed yet: the cap's retry delay is its least,
	// in the status details and, for gRPC's own retries, the trailer.
	back := apperr.FromStatus(err)
	if back.RetryAfter != capRetryMin {
		t.Fatalf("retry after = %v, want %v", back.RetryAfter, capRetryMin)
	}
	if got := trailer.Get(apperr.PushbackKey); len(got) != 1 || got[0] != "1" {
		t.Fatalf("pushback trailer %v, want 1 ms", got)
	}
	if bp := back.Backpressure; bp.GetQueueDepth() != 2 || bp.GetRatio() != 1 {
		t.Fatalf("backpressure = %v, want depth 2 and ratio 1", bp)
	}
	if e := back.Player(); e.GetCode() != leveev2.ErrorCode_ERROR_CODE_BUSY || e.GetRetryAfterMs() != 1 {
		t.Fatalf("player error = %v", e)
	}
	if n := outcomes(r.srv, outcomeShed); n != 1 {
		t.Fatalf("shed = %v, want 1", n)
	}
	if n := testutil.ToFloat64(r.srv.m.shed.WithLabelValues("inflight_cap", "default")); n != 1 {
		t.Fatalf(`battle_shed_total{reason="inflight_cap",criticality="default"} = %v, want 1`, n)
	}

	close(g.release)
	want, _ := Simulate(context.Background(), skirmish(5))
	for range cfg.MaxInFlight {
		res := <-results
		if res.err != nil || !proto.Equal(res.rep, want) {
			t.Fatalf("admitted call: rep = %v, err = %v", res.rep, res.err)
		}
	}
	// A slot frees when its call ends, so the cap admits again.
	if _, err := r.client.Simulate(context.Background(), skirmish(6)); err != nil {
		t.Fatalf("after the burst: %v", err)
	}
	if v := testutil.ToFloat64(r.srv.m.inflight); v != 0 {
		t.Fatalf("battle_inflight = %v after all calls ended", v)
	}
	if n := outcomes(r.srv, outcomeOK); n != float64(cfg.MaxInFlight+1) {
		t.Fatalf("ok = %v", n)
	}
}

func TestCallerCancelStopsSimulation(t *testing.T) {
	g := newGatedSim()
	r := start(t, testConfig(), func(s *Server) { s.sim = g.simulate })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.client.Simulate(ctx, skirmish(1))
		errc <- err
	}()
	<-g.entered
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("err = %v, want Canceled", err)
	}
	testwait.Until(t, "the cancelled outcome", func() bool { return outcomes(r.srv, outcomeCancelled) == 1 })
	if n, _ := latencySamples(t, r.srv); n != 0 {
		t.Fatalf("%d latency samples for a cancelled simulation, want 0", n)
	}
}

func TestDeadlineTravelsToSimulation(t *testing.T) {
	r := start(t, testConfig(), nil)
	// The largest battle takes over a second; the caller gives it 100ms.
	// The server must stop it when the deadline it was sent passes, not
	// fight it to the end.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := r.client.Simulate(ctx, sturdyRequest(MaxTeamSize, MaxTicks, 1)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	testwait.Until(t, "the server to drop the simulation", func() bool { return outcomes(r.srv, outcomeCancelled) == 1 })
	if n := outcomes(r.srv, outcomeOK); n != 0 {
		t.Fatalf("ok = %v: the simulation ran to the end", n)
	}
}

func TestSimulationErrorIsInternal(t *testing.T) {
	r := start(t, testConfig(), func(s *Server) {
		s.sim = func(context.Context, *leveev2.SimulateRequest) (*leveev2.SimulateReply, error) {
			return nil, errors.New("boom")
		}
	})
	if _, err := r.client.Simulate(context.Background(), skirmish(1)); status.Code(err) != codes.Internal {
		t.Fatalf("err = %v, want Internal", err)
	}
	if n := outcomes(r.srv, outcomeError); n != 1 {
		t.Fatalf("error = %v, want 1", n)
	}
}

func TestLatencyIsObservedInSeconds(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	r := start(t, testConfig(), func(s *Server) {
		s.clk = fake
		s.sim = func(ctx context.Context, req *leveev2.SimulateRequest) (*leveev2.SimulateReply, error) {
			fake.Advance(250 * time.Millisecond)
			return Simulate(ctx, req)
		}
	})
	for range 3 {
		if _, err := r.client.Simulate(context.Background(), skirmish(1)); err != nil {
			t.Fatal(err)
		}
	}
	if n, sum := latencySamples(t, r.srv); n != 3 || sum != 0.75 {
		t.Fatalf("latency samples = %d, sum = %v; want 3 and 0.75", n, sum)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestShutdownReportsNotServingThenStops(t *testing.T) {
	r := start(t, testConfig(), nil)
	ops := "http://" + r.srv.OpsAddr().String()
	if code, body := httpGet(t, ops+"/metrics"); code != 200 || !strings.Contains(body, "battle_requests_total") {
		t.Fatalf("/metrics: %d %q", code, body)
	}
	if code, _ := httpGet(t, ops+"/readyz"); code != 200 {
		t.Fatalf("/readyz = %d while serving", code)
	}

	// A Watch stream sees every status change, and as an open stream it
	// holds the graceful stop until the test lets go: no timing involved.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	watch, err := healthpb.NewHealthClient(r.conn).Watch(wctx, &healthpb.HealthCheckRequest{Service: leveev2.Battle_ServiceDesc.ServiceName})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first status = %v, %v; want SERVING", m, err)
	}
	r.stop()
	if m, err := watch.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("status on shutdown = %v, %v; want NOT_SERVING", m, err)
	}
	testwait.Until(t, "/readyz to fail", func() bool { code, _ := httpGet(t, ops+"/readyz"); return code == http.StatusServiceUnavailable })
	wcancel()

	if err := r.wait(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	for _, addr := range []net.Addr{r.srv.GRPCAddr(), r.srv.OpsAddr()} {
		if c, err := net.Dial("tcp", addr.String()); err == nil {
			c.Close()
			t.Fatalf("%s still accepts connections after Run returned", addr)
		}
	}
	if err := r.srv.Run(context.Background()); !errors.Is(err, serve.ErrAlreadyRun) {
		t.Fatalf("second Run = %v, want ErrAlreadyRun", err)
	}
}

func TestNewFailsOnBusyAddress(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	cfg := testConfig()
	cfg.OpsAddr = lis.Addr().String()
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "-ops-addr") {
		t.Fatalf("err = %v, want one naming -ops-addr", err)
	}
}
