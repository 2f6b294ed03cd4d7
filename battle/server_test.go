package battle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
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

	"github.com/leveehq/levee/examples/arena"
	arenapb "github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/examples/arena/sim"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/serve"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func testConfig() Config {
	c := DefaultConfig()
	c.Game = arena.Game()
	c.GRPCAddr, c.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	c.ShutdownGrace = 5 * time.Second
	return c
}

type running struct {
	srv    *Server
	conn   *grpc.ClientConn
	client leveev2.JobsClient
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
	return run(t, srv, tweak)
}

// run is start with a server already built.
func run(t *testing.T, srv *Server, tweak func(*Server)) *running {
	t.Helper()
	// The real CPU reading would make the throttle and the shedder depend on
	// how busy the test machine is; tests that want load set it.
	srv.cpu = func() float64 { return 0 }
	if tweak != nil {
		tweak(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: srv, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Run(ctx) }()
	var err error
	r.conn, err = grpc.NewClient(srv.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.client = leveev2.NewJobsClient(r.conn)
	t.Cleanup(func() {
		r.conn.Close()
		cancel()
		if err := r.wait(t); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
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

// latencySamples is battle_latency_seconds' count and sum, over every job.
func latencySamples(t *testing.T, s *Server) (count uint64, sum float64) {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "battle_latency_seconds" {
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				count += h.GetSampleCount()
				sum += h.GetSampleSum()
			}
			return count, sum
		}
	}
	t.Fatal("battle_latency_seconds not registered")
	return 0, 0
}

// jobSamples is the sample count of battle_latency_seconds' series whose
// JobLabel is job, as /metrics shows it; the test fails if there is none.
func jobSamples(t *testing.T, s *Server, job string) uint64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "battle_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == JobLabel && l.GetValue() == job {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	t.Fatalf("no battle_latency_seconds{%s=%q}", JobLabel, job)
	return 0
}

func TestSameReplyFromTwoServersOverGRPC(t *testing.T) {
	a := start(t, testConfig(), nil)
	b := start(t, testConfig(), nil)
	ctx := context.Background()
	req := skirmish(99)
	wantRep := want(t, req)
	for i, c := range []leveev2.JobsClient{a.client, b.client, a.client} {
		got, err := simulate(t, ctx, c, req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !proto.Equal(got, wantRep) {
			t.Fatalf("call %d: got %v, want %v", i, got, wantRep)
		}
	}
	other := proto.Clone(req).(*arenapb.SimulateRequest)
	other.Seed++
	got, err := simulate(t, ctx, b.client, other)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetResultHash() == wantRep.GetResultHash() {
		t.Fatal("a different seed gave the same hash")
	}
	if n := outcomes(a.srv, outcomeOK); n != 2 {
		t.Fatalf("server a: ok = %v, want 2", n)
	}
	// One series per declared job, labelled with its name (not "job",
	// which Prometheus keeps for the scrape job).
	if n := testutil.CollectAndCount(a.srv.Registry(), "battle_latency_seconds"); n != 1 {
		t.Fatalf("battle_latency_seconds series = %d, want 1", n)
	}
	if n, _ := latencySamples(t, a.srv); n != 2 {
		t.Fatalf("server a: %d latency samples, want 2", n)
	}
	if n := jobSamples(t, a.srv, jobSimulate); n != 2 {
		t.Fatalf("battle_latency_seconds{%s=%q}: %d samples, want 2", JobLabel, jobSimulate, n)
	}
}

func TestBadRequests(t *testing.T) {
	r := start(t, testConfig(), nil)
	ctx := context.Background()
	cases := badRequests()
	for _, c := range cases {
		req := skirmish(1)
		c.mutate(req)
		_, err := simulate(t, ctx, r.client, req)
		// The job's own validation: game.Invalid, with its reason.
		back := apperr.FromStatus(err)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.field) ||
			back.Code != leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST || back.Reason != arena.ReasonBadBattle {
			t.Errorf("%s: err = %v (%+v), want InvalidArgument naming %q, reason %q", c.name, err, back, c.field, arena.ReasonBadBattle)
		}
	}
	// A request that does not decode as the job's request.
	_, err := r.client.Run(ctx, &leveev2.JobRequest{Job: jobSimulate, Key: "k", Request: []byte{0xff, 0xff, 0xff}})
	if status.Code(err) != codes.InvalidArgument || apperr.FromStatus(err).Code != leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST ||
		!strings.Contains(status.Convert(err).Message(), "SimulateRequest") {
		t.Errorf("undecodable request: err = %v", err)
	}
	// An unknown job.
	_, err = r.client.Run(ctx, &leveev2.JobRequest{Job: "fish", Request: jobRequest(t, skirmish(1)).GetRequest()})
	if status.Code(err) != codes.Unimplemented || apperr.FromStatus(err).Code != leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE ||
		!strings.Contains(status.Convert(err).Message(), `"fish"`) {
		t.Errorf("unknown job: err = %v", err)
	}
	// An empty request is an empty SimulateRequest, which the job refuses.
	if _, err := r.client.Run(ctx, &leveev2.JobRequest{Job: jobSimulate}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("empty request: err = %v", err)
	}
	if got, want := outcomes(r.srv, outcomeBadRequest), float64(len(cases)+3); got != want {
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
	if _, err := simulate(t, context.Background(), r.client, req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("err = %v, want ResourceExhausted", err)
	}
}

// gatedSim is a stand-in for the simulate job that reports when a run
// starts and waits for the test to let it go (or for its caller to leave).
type gatedSim struct {
	entered chan struct{}
	release chan struct{}
}

func newGatedSim() *gatedSim {
	return &gatedSim{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gatedSim) run(ctx context.Context, req proto.Message) (proto.Message, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return sim.Simulate(ctx, req.(*arenapb.SimulateRequest))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// setRun replaces the simulate job's Run.
func setRun(s *Server, run func(context.Context, proto.Message) (proto.Message, error)) {
	s.jobs[jobSimulate].run = run
}

func TestMaxInFlightRefusesAtOnceWithPushback(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInFlight = 2
	g := newGatedSim()
	r := start(t, cfg, func(s *Server) {
		setRun(s, g.run)
		s.int64N = func(int64) int64 { return 0 } // no retry-after jitter
	})

	type result struct {
		rep *arenapb.SimulateReply
		err error
	}
	results := make(chan result, cfg.MaxInFlight)
	for range cfg.MaxInFlight {
		go func() {
			rep, err := simulate(t, context.Background(), r.client, skirmish(5))
			results <- result{rep, err}
		}()
		<-g.entered
	}
	if v := testutil.ToFloat64(r.srv.m.inflight); v != float64(cfg.MaxInFlight) {
		t.Fatalf("battle_inflight = %v, want %d", v, cfg.MaxInFlight)
	}

	var trailer metadata.MD
	_, err := simulate(t, context.Background(), r.client, skirmish(6), grpc.Trailer(&trailer))
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
	wantRep := want(t, skirmish(5))
	for range cfg.MaxInFlight {
		res := <-results
		if res.err != nil || !proto.Equal(res.rep, wantRep) {
			t.Fatalf("admitted call: rep = %v, err = %v", res.rep, res.err)
		}
	}
	// A slot frees when its call ends, so the cap admits again.
	if _, err := simulate(t, context.Background(), r.client, skirmish(6)); err != nil {
		t.Fatalf("after the burst: %v", err)
	}
	if v := testutil.ToFloat64(r.srv.m.inflight); v != 0 {
		t.Fatalf("battle_inflight = %v after all calls ended", v)
	}
	if n := outcomes(r.srv, outcomeOK); n != float64(cfg.MaxInFlight+1) {
		t.Fatalf("ok = %v", n)
	}
}

func TestCallerCancelStopsJob(t *testing.T) {
	g := newGatedSim()
	r := start(t, testConfig(), func(s *Server) { setRun(s, g.run) })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := simulate(t, ctx, r.client, skirmish(1))
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

func TestDeadlineTravelsToJob(t *testing.T) {
	r := start(t, testConfig(), nil)
	// The largest battle takes over a second; the caller gives it 100ms.
	// The server must stop it when the deadline it was sent passes, not
	// fight it to the end.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := simulate(t, ctx, r.client, sturdyRequest(sim.MaxTeamSize, sim.MaxTicks, 1)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	testwait.Until(t, "the server to drop the simulation", func() bool { return outcomes(r.srv, outcomeCancelled) == 1 })
	if n := outcomes(r.srv, outcomeOK); n != 0 {
		t.Fatalf("ok = %v: the simulation ran to the end", n)
	}
}

func TestJobErrorIsInternal(t *testing.T) {
	r := start(t, testConfig(), func(s *Server) {
		setRun(s, func(context.Context, proto.Message) (proto.Message, error) {
			// Even an error that wraps one of Levee's codes: only a
			// game error (game.Invalid, Reject, ...) is the game's answer.
			return nil, fmt.Errorf("disk on fire: %w", apperr.ErrBusy)
		})
	})
	_, err := simulate(t, context.Background(), r.client, skirmish(1))
	if status.Code(err) != codes.Internal || apperr.FromStatus(err).Code != leveev2.ErrorCode_ERROR_CODE_INTERNAL {
		t.Fatalf("err = %v, want Internal", err)
	}
	if n := outcomes(r.srv, outcomeError); n != 1 {
		t.Fatalf("error = %v, want 1", n)
	}
}

// A job that returns neither a reply nor an error is broken: INTERNAL, not
// an empty reply.
func TestJobWithoutReplyIsInternal(t *testing.T) {
	r := start(t, testConfig(), func(s *Server) {
		setRun(s, func(context.Context, proto.Message) (proto.Message, error) {
			return (*arenapb.SimulateReply)(nil), nil
		})
	})
	_, err := simulate(t, context.Background(), r.client, skirmish(1))
	if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "no reply") {
		t.Fatalf("err = %v, want Internal saying no reply", err)
	}
	if n := outcomes(r.srv, outcomeError); n != 1 {
		t.Fatalf("error = %v, want 1", n)
	}
}

// A job's game error is its answer: it travels with its code, message and
// reason, and the tier stays healthy.
func TestJobGameErrorTravelsWithReason(t *testing.T) {
	r := start(t, testConfig(), func(s *Server) {
		setRun(s, func(context.Context, proto.Message) (proto.Message, error) {
			return nil, game.Reject("arena_closed", "the arena is closed for repairs")
		})
	})
	_, err := simulate(t, context.Background(), r.client, skirmish(1))
	back := apperr.FromStatus(err)
	if status.Code(err) != codes.FailedPrecondition || back.Code != leveev2.ErrorCode_ERROR_CODE_REJECTED ||
		back.Reason != "arena_closed" || back.Message != "the arena is closed for repairs" {
		t.Fatalf("err = %v (%+v), want REJECTED with reason arena_closed", err, back)
	}
	if p := back.Player(); p.GetReason() != "arena_closed" || p.GetMessage() != "the arena is closed for repairs" {
		t.Fatalf("player error = %v", p)
	}
	if n := outcomes(r.srv, outcomeGameError); n != 1 {
		t.Fatalf("game_error = %v, want 1", n)
	}
	if n, _ := latencySamples(t, r.srv); n != 0 {
		t.Fatalf("%d latency samples, want 0", n)
	}
}

// A job that panics fails its own call with INTERNAL, is counted and
// logged with its name, and the tier serves the next call.
func TestJobPanicFailsOnlyItsCall(t *testing.T) {
	var logs syncBuffer
	cfg := testConfig()
	srv, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, srv, func(s *Server) {
		setRun(s, func(ctx context.Context, req proto.Message) (proto.Message, error) {
			if req.(*arenapb.SimulateRequest).GetSeed() == 13 {
				var units []*arenapb.Unit
				_ = units[3] // index out of range
			}
			return sim.Simulate(ctx, req.(*arenapb.SimulateRequest))
		})
	})
	ctx := context.Background()
	for range 2 {
		_, err := simulate(t, ctx, r.client, skirmish(13))
		if status.Code(err) != codes.Internal || apperr.FromStatus(err).Code != leveev2.ErrorCode_ERROR_CODE_INTERNAL {
			t.Fatalf("panicking job: err = %v, want Internal", err)
		}
		if strings.Contains(status.Convert(err).Message(), "index out of range") {
			t.Fatalf("the panic's text reached the caller: %v", err)
		}
	}
	if got, err := simulate(t, ctx, r.client, skirmish(14)); err != nil || !proto.Equal(got, want(t, skirmish(14))) {
		t.Fatalf("after the panics: %v, %v", got, err)
	}
	if n := testutil.ToFloat64(r.srv.m.panics.WithLabelValues(jobSimulate)); n != 2 {
		t.Fatalf("battle_job_panics_total{%s=%q} = %v, want 2", JobLabel, jobSimulate, n)
	}
	if n := outcomes(r.srv, outcomeError); n != 2 {
		t.Fatalf("error = %v, want 2", n)
	}
	if v := testutil.ToFloat64(r.srv.m.inflight); v != 0 {
		t.Fatalf("battle_inflight = %v: a panic kept its slot", v)
	}
	if n := r.srv.adm.running.Load(); n != 0 {
		t.Fatalf("%d admitted jobs still running", n)
	}
	out := logs.String()
	if strings.Count(out, "job panicked") != 2 || !strings.Contains(out, "job="+jobSimulate) ||
		!strings.Contains(out, "key=skirmish-1") || !strings.Contains(out, "index out of range") {
		t.Fatalf("log = %s", out)
	}
}

func TestLatencyIsObservedInSecondsPerJob(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	r := start(t, testConfig(), func(s *Server) {
		s.clk = fake
		setRun(s, func(ctx context.Context, req proto.Message) (proto.Message, error) {
			fake.Advance(250 * time.Millisecond)
			return sim.Simulate(ctx, req.(*arenapb.SimulateRequest))
		})
	})
	for range 3 {
		if _, err := simulate(t, context.Background(), r.client, skirmish(1)); err != nil {
			t.Fatal(err)
		}
	}
	if n, sum := latencySamples(t, r.srv); n != 3 || sum != 0.75 {
		t.Fatalf("latency samples = %d, sum = %v; want 3 and 0.75", n, sum)
	}
	if n := jobSamples(t, r.srv, jobSimulate); n != 3 {
		t.Fatalf("the job's series: %d samples, want 3", n)
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
	watch, err := healthpb.NewHealthClient(r.conn).Watch(wctx, &healthpb.HealthCheckRequest{Service: leveev2.Jobs_ServiceDesc.ServiceName})
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

func TestNewRefusesABadGame(t *testing.T) {
	cfg := testConfig()
	cfg.Game = nil
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "no game") {
		t.Fatalf("no game: err = %v", err)
	}
	g := game.New("broken", arena.NewPlayer)
	game.Query(g, "peek", game.Default, func(*game.Ctx, *arenapb.Player, *arenapb.GetProfileRequest) (*arenapb.ProfileReply, error) {
		return nil, nil
	})
	game.Job(g, "crunch", (func(context.Context, *arenapb.SimulateRequest) (*arenapb.SimulateReply, error))(nil))
	cfg.Game = g
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), `job "crunch" has no Run`) {
		t.Fatalf("bad game: err = %v", err)
	}
	// A flag error and a game error are both reported.
	cfg.MaxInFlight = 0
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "-max-in-flight") || !strings.Contains(err.Error(), "crunch") {
		t.Fatalf("both: err = %v", err)
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
