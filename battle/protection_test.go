package battle

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	arenapb "github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/cpu"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// These tests call the handler directly (no network), with an injected CPU
// reading, random source and clock, and a stand-in for arena's simulate job.

const (
	critical  = priority.Critical
	normal    = priority.Default
	sheddable = priority.Sheddable
)

// fastSeed marks a request the stand-in simulator completes at once, after
// moving the fake clock on by fastLatency; any other seed is held until the
// test releases it.
const (
	fastSeed    = 1
	fastLatency = 10 * time.Millisecond
)

// harness is a Server that is not Run, driven through its Jobs.Run handler.
type harness struct {
	s       *Server
	clk     *clock.Fake
	load    atomic.Uint64 // math.Float64bits of the CPU reading
	entered chan uint64   // seeds of simulations that started
	release chan struct{}
	sims    atomic.Int64 // simulations started

	mu    sync.Mutex
	draws []int64 // the n of every int64N call
	draw  func(n int64) int64
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.grpcLis.Close(); s.opsLis.Close() })
	h := &harness{
		s:       s,
		clk:     clock.NewFake(time.Unix(1000, 0)),
		entered: make(chan uint64, 64),
		release: make(chan struct{}),
		draw:    func(int64) int64 { return 0 },
	}
	s.clk = h.clk
	s.cpu = func() float64 { return math.Float64frombits(h.load.Load()) }
	s.int64N = func(n int64) int64 {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.draws = append(h.draws, n)
		return h.draw(n)
	}
	setRun(s, func(ctx context.Context, m proto.Message) (proto.Message, error) {
		req := m.(*arenapb.SimulateRequest)
		h.sims.Add(1)
		if req.GetSeed() == fastSeed {
			h.clk.Advance(fastLatency)
			return &arenapb.SimulateReply{BattleId: req.GetBattleId()}, nil
		}
		h.entered <- req.GetSeed()
		select {
		case <-h.release:
			return &arenapb.SimulateReply{BattleId: req.GetBattleId()}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	return h
}

func (h *harness) setCPU(u float64) { h.load.Store(math.Float64bits(u)) }

// drawsOf counts the int64N calls that asked for [0, n).
func (h *harness) drawsOf(n time.Duration) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := 0
	for _, d := range h.draws {
		if d == int64(n) {
			c++
		}
	}
	return c
}

// trailerStream stands in for the gRPC stream, to catch the trailer.
type trailerStream struct {
	mu      sync.Mutex
	trailer metadata.MD
}

func (*trailerStream) Method() string               { return "/levee.v2.Jobs/Run" }
func (*trailerStream) SetHeader(metadata.MD) error  { return nil }
func (*trailerStream) SendHeader(metadata.MD) error { return nil }
func (ts *trailerStream) SetTrailer(md metadata.MD) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.trailer = metadata.Join(ts.trailer, md)
	return nil
}

type result struct {
	rep     *leveev2.JobReply
	err     error
	trailer metadata.MD
}

// call runs the simulate job as a request of criticality crit would arrive.
func (h *harness) call(ctx context.Context, crit priority.Class, seed uint64) result {
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(priority.Key, crit.String()))
	ts := &trailerStream{}
	ctx = grpc.NewContextWithServerTransportStream(ctx, ts)
	b, err := proto.Marshal(skirmish(seed))
	if err != nil {
		panic(err)
	}
	rep, err := h.s.handle(ctx, &leveev2.JobRequest{Job: jobSimulate, Key: "k", Request: b})
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return result{rep, err, ts.trailer}
}

// hold starts a call that the simulator holds, and waits until it has
// started simulating.
func (h *harness) hold(t *testing.T, crit priority.Class) <-chan result {
	t.Helper()
	out := make(chan result, 1)
	go func() { out <- h.call(context.Background(), crit, 7) }()
	select {
	case <-h.entered:
	case r := <-out:
		t.Fatalf("held %v call did not start simulating: %v", crit, r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("held call did not start")
	}
	return out
}

// within waits for a call's result, failing the test after a deadline.
func within(t *testing.T, c <-chan result) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("call did not return")
		return result{}
	}
}

// learnLimitOne feeds the shedder ten completions of 10 ms in one 100 ms
// bucket, one after the other, at low CPU, then closes the bucket: maxPass
// 10 per bucket (100/s) × minRTT 10 ms gives a limit of 1 in flight.
func (h *harness) learnLimitOne(t *testing.T) {
	t.Helper()
	h.setCPU(0.1)
	for range 10 {
		if r := h.call(context.Background(), normal, fastSeed); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if got := testutil.ToFloat64(h.s.m.requests.WithLabelValues(outcomeOK)); got < 10 {
		t.Fatalf("ok = %v", got)
	}
	h.clk.Advance(100 * time.Millisecond)
	if got := h.limit(); got != 1 {
		t.Fatalf("battle_adaptive_limit = %v, want 1", got)
	}
}

func (h *harness) limit() float64 { return gaugeValue(h.s, "battle_adaptive_limit") }

func gaugeValue(s *Server, name string) float64 {
	mfs, err := s.Registry().Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	panic(name + " not registered")
}

func (h *harness) shed(reason, crit string) float64 {
	return testutil.ToFloat64(h.s.m.shed.WithLabelValues(reason, crit))
}

// wantExhausted checks a refusal: RESOURCE_EXHAUSTED, the pushback (with
// the harness's zero jitter) and the backpressure hints.
func wantExhausted(t *testing.T, what string, r result, pushback time.Duration, depth uint32, ratio float64) {
	t.Helper()
	if status.Code(r.err) != codes.ResourceExhausted {
		t.Fatalf("%s: err = %v, want ResourceExhausted", what, r.err)
	}
	back := apperr.FromStatus(r.err)
	if !errors.Is(back, apperr.ErrBusy) || back.RetryAfter != pushback.Truncate(time.Millisecond) {
		t.Errorf("%s: %v, retry after %v, want BUSY and %v", what, back.Code, back.RetryAfter, pushback)
	}
	if bp := back.Backpressure; bp.GetQueueDepth() != depth || bp.GetRatio() != ratio {
		t.Errorf("%s: backpressure = %v, want depth %d ratio %v", what, bp, depth, ratio)
	}
}

func TestAdaptiveShedding(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInFlight = 3
	h := newHarness(t, cfg)
	if got := h.limit(); got != 0 {
		t.Fatalf("battle_adaptive_limit before any completion = %v, want 0", got)
	}
	h.learnLimitOne(t)
	h.setCPU(0.95) // above -shed-cpu; the throttle draws 0, so no waiting
	if got := gaugeValue(h.s, "battle_cpu_utilization"); got != 0.95 {
		t.Fatalf("battle_cpu_utilization = %v, want 0.95", got)
	}

	a := h.hold(t, normal) // 0 in flight: admitted
	// 1 in flight: over a sheddable request's limit (0.8 × 1), within a
	// default one's.
	wantExhausted(t, "sheddable at 1 in flight", h.call(context.Background(), sheddable, 8), shedRetryAfter, 1, 1)
	b := h.hold(t, normal)
	wantExhausted(t, "default at 2 in flight", h.call(context.Background(), normal, 8), shedRetryAfter, 2, 1)
	// Critical work is never shed by the adaptive rule...
	c := h.hold(t, critical)
	// ...but the hard cap (3) refuses it, with a retry delay of about one
	// simulation (the smallest latency seen, 10 ms) instead of the shed's.
	wantExhausted(t, "critical at the cap", h.call(context.Background(), critical, 8), 10*time.Millisecond, 3, 1)

	for _, w := range []struct {
		reason, crit string
		n            float64
	}{
		{"adaptive", "sheddable", 1}, {"adaptive", "default", 1}, {"adaptive", "critical", 0},
		{"inflight_cap", "critical", 1}, {"inflight_cap", "default", 0},
	} {
		if got := h.shed(w.reason, w.crit); got != w.n {
			t.Errorf("battle_shed_total{reason=%q,criticality=%q} = %v, want %v", w.reason, w.crit, got, w.n)
		}
	}
	if got := outcomes(h.s, outcomeShed); got != 3 {
		t.Errorf(`battle_requests_total{outcome="shed"} = %v, want 3`, got)
	}
	if got := testutil.ToFloat64(h.s.m.inflight); got != 3 {
		t.Errorf("battle_inflight = %v, want 3", got)
	}
	if h.sims.Load() != 13 {
		t.Errorf("%d simulations started, want 13 (a refused request is never simulated)", h.sims.Load())
	}

	close(h.release)
	for _, ch := range []<-chan result{a, b, c} {
		if r := within(t, ch); r.err != nil {
			t.Fatalf("held call: %v", r.err)
		}
	}
	if n := h.s.adm.running.Load() + h.s.adm.shedder.InFlight(); n != 0 {
		t.Fatalf("in flight after all calls ended: %d", n)
	}
	// Nothing in flight: even at high CPU, the next one is admitted.
	if r := h.call(context.Background(), sheddable, fastSeed); r.err != nil {
		t.Fatalf("after the burst: %v", r.err)
	}
}

func TestRefusalRetryAfterIsJittered(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInFlight = 1
	cfg.Throttle = false
	h := newHarness(t, cfg)
	h.learnLimitOne(t) // smallest latency 10 ms
	h.draw = func(n int64) int64 { return n - 1 }

	h.setCPU(0.95)
	a := h.hold(t, normal)
	// Shed by the adaptive rule (a sheddable request over 0.8 × the
	// limit of 1): 100 ms + up to 100 ms of jitter.
	r := h.call(context.Background(), sheddable, 8)
	if d := apperr.FromStatus(r.err).RetryAfter; d != 199*time.Millisecond { // ms resolution
		t.Errorf("adaptive shed: pushback = %v, want 199ms", d)
	}
	// Refused at the cap (critical is never shed): one simulation, 10 ms,
	// + up to as much jitter.
	r = h.call(context.Background(), critical, 8)
	if d := apperr.FromStatus(r.err).RetryAfter; d != 19*time.Millisecond {
		t.Errorf("in-flight cap: pushback = %v, want 19ms", d)
	}
	close(h.release)
	within(t, a)
}

func TestCapRetryAfterBounds(t *testing.T) {
	for _, tc := range []struct {
		minRTT, want time.Duration
	}{
		{0, capRetryMin}, // no estimate yet
		{500 * time.Microsecond, capRetryMin},
		{7 * time.Millisecond, 7 * time.Millisecond},
		{time.Second, capRetryMax},
	} {
		if got := capRetryBase(tc.minRTT); got != tc.want {
			t.Errorf("capRetryBase(%v) = %v, want %v", tc.minRTT, got, tc.want)
		}
	}
}

func TestThrottleOnlyAboveThreshold(t *testing.T) {
	h := newHarness(t, testConfig())
	h.draw = func(n int64) int64 { return int64(30 * time.Millisecond) }

	h.setCPU(0.85) // at the threshold: not above it
	if r := h.call(context.Background(), normal, fastSeed); r.err != nil {
		t.Fatal(r.err)
	}
	if n := h.drawsOf(100 * time.Millisecond); n != 0 {
		t.Fatalf("throttle drew %d delays at 85%% CPU, want 0", n)
	}

	h.setCPU(0.86)
	done := make(chan result, 1)
	go func() { done <- h.call(context.Background(), critical, fastSeed) }()
	testwait.Until(t, "the throttle to wait", func() bool { return h.clk.Waiters() == 1 })
	if n := h.sims.Load(); n != 1 {
		t.Fatalf("%d simulations started while throttled, want 1 (the earlier call)", n)
	}
	h.clk.Advance(30*time.Millisecond - 1)
	select {
	case r := <-done:
		t.Fatalf("call returned before its delay: %v", r.err)
	default:
	}
	h.clk.Advance(1)
	if r := within(t, done); r.err != nil {
		t.Fatal(r.err)
	}
	if n := h.drawsOf(100 * time.Millisecond); n != 1 {
		t.Fatalf("throttle drew %d delays in [0, 100ms), want 1", n)
	}
	if n, sum := histogram(t, h.s, "battle_throttle_delay_seconds"); n != 1 || sum != 0.03 {
		t.Fatalf("battle_throttle_delay_seconds: count %d sum %v, want 1 and 0.03", n, sum)
	}
	// The delay is not simulation time: the latency is the fight's alone.
	if n, sum := latencySamples(t, h.s); n != 2 || sum != 2*fastLatency.Seconds() {
		t.Fatalf("latency: count %d sum %v", n, sum)
	}
}

func histogram(t *testing.T, s *Server, name string) (uint64, float64) {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("%s not registered", name)
	return 0, 0
}

func TestCallerGoneDuringThrottleIsNotSimulated(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInFlight = 1
	h := newHarness(t, cfg)
	h.draw = func(n int64) int64 { return int64(50 * time.Millisecond) }
	h.setCPU(0.99)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- h.call(ctx, critical, fastSeed) }()
	testwait.Until(t, "the throttle to wait", func() bool { return h.clk.Waiters() == 1 })
	// While it waits it holds no in-flight slot: another request (with a
	// zero delay) gets the only one.
	h.draw = func(int64) int64 { return 0 }
	other := h.hold(t, critical)
	cancel()
	if r := within(t, done); status.Code(r.err) != codes.Canceled {
		t.Fatalf("err = %v, want Canceled", r.err)
	}
	if h.clk.Waiters() != 0 {
		t.Fatal("the throttle's timer was not stopped")
	}

	// A deadline that passes during the wait drops the request too.
	h.draw = func(n int64) int64 { return int64(50 * time.Millisecond) }
	dctx, dcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer dcancel()
	if r := h.call(dctx, critical, fastSeed); status.Code(r.err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", r.err)
	}

	if n := h.sims.Load(); n != 1 {
		t.Fatalf("%d simulations, want only the held one", n)
	}
	if got := outcomes(h.s, outcomeCancelled); got != 2 {
		t.Fatalf("cancelled = %v, want 2", got)
	}
	close(h.release)
	within(t, other)
	if n := h.s.adm.running.Load() + h.s.adm.shedder.InFlight(); n != 0 {
		t.Fatalf("in flight after all calls ended: %d", n)
	}
}

func TestCallerGoneOnArrivalIsNotSimulated(t *testing.T) {
	h := newHarness(t, testConfig())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := h.call(ctx, critical, fastSeed); status.Code(r.err) != codes.Canceled {
		t.Fatalf("err = %v, want Canceled", r.err)
	}
	if n := h.sims.Load(); n != 0 {
		t.Fatalf("%d simulations, want 0", n)
	}
	if got := outcomes(h.s, outcomeCancelled); got != 1 {
		t.Fatalf("cancelled = %v, want 1", got)
	}
}

// TestSwitches drives one scenario through each combination of switches:
// CPU high, the adaptive limit at 1 and the cap at 2, four requests held in
// turn (default, default, default, critical).
func TestSwitches(t *testing.T) {
	const throttleMax = 50 * time.Millisecond // tells the throttle's draws from the retry jitter's
	type want struct {
		throttle bool   // the throttle drew a delay
		third    string // what refused the third default request ("" = admitted)
		fourth   string // what refused the critical one
		late     bool   // a request whose caller has gone is simulated
	}
	for _, c := range []struct {
		name string
		mod  func(*Config)
		want want
	}{
		{"all on", func(*Config) {}, want{true, "adaptive", "inflight_cap", false}},
		{"throttle off", func(c *Config) { c.Throttle = false }, want{false, "adaptive", "inflight_cap", false}},
		{"adaptive shed off", func(c *Config) { c.AdaptiveShed = false }, want{true, "inflight_cap", "inflight_cap", false}},
		{"in-flight cap off", func(c *Config) { c.InFlightCap = false }, want{true, "adaptive", "", false}},
		{"protection off", func(c *Config) { c.Protection = false }, want{false, "", "", true}},
		{"each off", func(c *Config) { c.Throttle, c.AdaptiveShed, c.InFlightCap = false, false, false },
			want{false, "", "", false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.MaxInFlight = 2
			cfg.ThrottleMaxDelay = throttleMax
			c.mod(&cfg)
			h := newHarness(t, cfg)
			h.learnLimitOne(t)
			h.setCPU(0.99)

			var held []<-chan result
			held = append(held, h.hold(t, normal), h.hold(t, normal))
			// try sends one more request and checks what became of it.
			try := func(crit priority.Class, want string) {
				t.Helper()
				out := make(chan result, 1)
				go func() { out <- h.call(context.Background(), crit, 7) }()
				select {
				case <-h.entered:
					held = append(held, out)
					if want != "" {
						t.Errorf("%s request admitted, want it refused by %s", crit, want)
					}
				case r := <-out:
					if want == "" {
						t.Errorf("%s request refused (%v), want it admitted", crit, r.err)
						return
					}
					if status.Code(r.err) != codes.ResourceExhausted {
						t.Errorf("%s request: err = %v, want ResourceExhausted", crit, r.err)
					}
					if got := h.shed(want, crit.String()); got != 1 {
						t.Errorf("battle_shed_total{reason=%q,criticality=%q} = %v, want 1", want, crit, got)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("call neither started nor returned")
				}
			}
			try(normal, c.want.third)
			try(critical, c.want.fourth)

			if got := h.drawsOf(throttleMax) > 0; got != c.want.throttle {
				t.Errorf("throttle drew a delay: %v, want %v", got, c.want.throttle)
			}
			if got := h.limit(); got != 1 {
				t.Errorf("battle_adaptive_limit = %v, want 1 (the estimate is kept whatever the switches)", got)
			}

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			r := h.call(ctx, normal, fastSeed)
			if got := r.err == nil; got != c.want.late {
				t.Errorf("request whose caller had gone: err = %v, simulated = %v, want %v", r.err, got, c.want.late)
			}
			close(h.release)
			for _, ch := range held {
				within(t, ch)
			}
		})
	}
}

func TestSamplerFeedsCPUGaugeAndStops(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	var used atomic.Int64 // CPU time, ns
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cpu.max"), []byte("100000 100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sampler, err := cpu.NewSampler(cpu.Options{
		Clock:      fake,
		CPUTime:    func() (time.Duration, error) { return time.Duration(used.Load()), nil },
		CgroupRoot: root,
		HalfLife:   time.Nanosecond, // no smoothing: the gauge shows the last sample
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.CPUInterval = 100 * time.Millisecond
	r := start(t, cfg, func(s *Server) {
		s.sampler = sampler
		s.cpu = sampler.Utilization
	})
	testwait.Until(t, "the sampler to start", func() bool { return fake.Waiters() == 1 })
	used.Add(int64(90 * time.Millisecond)) // 90 ms of CPU in 100 ms on one CPU
	fake.Advance(100 * time.Millisecond)
	testwait.Until(t, "battle_cpu_utilization to follow the sampler", func() bool {
		return math.Abs(gaugeValue(r.srv, "battle_cpu_utilization")-0.9) < 1e-9
	})
	r.stop()
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if n := fake.Waiters(); n != 0 {
		t.Fatalf("sampler ticker still registered after Run returned (%d waiters)", n)
	}
}
