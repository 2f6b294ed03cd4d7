package logic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/testwait"
)

// epoch is where the fake clocks of these tests start.
var epoch = time.Unix(1_000_000, 0)

// A battle result that comes back while player requests are queued is
// applied before them: the queued profile reads already see the battle.
func TestBattleResultBeforeQueuedRequests(t *testing.T) {
	e := start(t, envOpts{})
	e.login("alice")
	release := e.battle.hold()
	fight := e.send(battleReq("alice", "first", 2, 10), deflt, 20*time.Second)
	testwait.Until(t, "the battle call", func() bool { return e.battle.calls.Load() == 1 })

	e.flushAndBlock("alice")
	var queued []<-chan answer
	for i := 1; i <= 3; i++ {
		queued = append(queued, e.enqueue(profileReq("alice", ""), deflt, i))
	}
	close(release)
	sh := e.srv.shards[0].Load()
	testwait.Until(t, "the result on the internal channel", func() bool { return len(sh.in) == 1 })
	if len(sh.ch) != 3 {
		t.Fatalf("request channel holds %d, want 3", len(sh.ch))
	}
	e.gate.release()

	if a := <-fight; a.err != nil || view(a.r).GetBattle() == nil {
		t.Fatalf("battle: %v %v", a.r, a.err)
	}
	for i, ch := range queued {
		a := <-ch
		p := view(a.r).GetProfile().GetPlayer()
		if a.err != nil || p.GetWins()+p.GetLosses() != 1 || p.GetVersion() != 2 {
			t.Fatalf("queued profile %d read %v (%v): the battle result was applied after it", i, p, a.err)
		}
	}
}

// newTestShard is a shard with no goroutine for admission tests.
func newTestShard(cfg Config) (*Server, *shard) {
	s := &Server{cfg: cfg, m: newMetrics(prometheus.NewRegistry()), rejectEarly: cfg.rejectEarly(), clk: clock.Real{}}
	return s, newShard(0, nil, s)
}

// fill puts n ops on sh's channel (bypassing admission).
func fill(sh *shard, n int) {
	for len(sh.ch) < n {
		sh.ch <- &op{class: priority.Default}
	}
	for len(sh.ch) > n {
		<-sh.ch
	}
}

// The time rule at admission with a known time per request (10 ms) and
// -queue-max-wait 50 ms: a default request is admitted while depth × 10 ms
// ≤ 50 ms, a sheddable one while it is ≤ 25 ms, a critical one up to the
// fill rule; the fill rule stays the ceiling.
func TestAdmitTimeBoundary(t *testing.T) {
	cfg := DefaultConfig()
	cfg.QueueSize, cfg.QueueMaxWait = 100, 50*time.Millisecond
	s, sh := newTestShard(cfg)
	sh.perOp.Store(int64(10 * time.Millisecond))
	sh.waitFloor = 0 // the boundary itself, not the short-queue exemption
	for _, c := range []struct {
		class priority.Class
		depth int
		want  error // nil: admitted
	}{
		{priority.Default, 0, nil},
		{priority.Default, 5, nil}, // 50 ms: not above
		{priority.Default, 6, sh.slow[priority.Default]},
		{priority.Sheddable, 2, nil}, // 20 ms
		{priority.Sheddable, 3, sh.slow[priority.Sheddable]},
		{priority.Critical, 6, nil},
		{priority.Critical, 99, nil},
		{priority.Critical, 100, sh.refusal[priority.Critical]}, // full
		{priority.Default, 90, sh.refusal[priority.Default]},    // the fill rule first
	} {
		fill(sh, c.depth)
		o := &op{class: c.class}
		depth, retryAfter, err := s.admit(sh, o)
		if err != c.want {
			t.Fatalf("%s at depth %d: err = %v, want %v", c.class, c.depth, err, c.want)
		}
		if err == nil {
			if len(sh.ch) != c.depth+1 {
				t.Fatalf("%s at depth %d: not queued", c.class, c.depth)
			}
			continue
		}
		if !errors.Is(err, apperr.ErrBusy) || depth != c.depth || retryAfter != drainTime(c.depth, 10*time.Millisecond) {
			t.Fatalf("%s at depth %d: refused with depth %d, retry after %v", c.class, c.depth, depth, retryAfter)
		}
	}
	for c, want := range map[priority.Class]float64{priority.Default: 1, priority.Sheddable: 1, priority.Critical: 0} {
		if got := testutil.ToFloat64(sh.rejectedWait[c]); got != want {
			t.Errorf("logic_rejections_total{wait_estimate,%s} = %v, want %v", c, got, want)
		}
	}

	// No measurement yet, or the rule off: only the fill rule.
	sh.perOp.Store(0)
	fill(sh, 50)
	if _, _, err := s.admit(sh, &op{class: priority.Default}); err != nil {
		t.Fatalf("refused before any measurement: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"queue-max-wait=0":   func(c *Config) { c.QueueMaxWait = 0 },
		"reject-early=false": func(c *Config) { c.RejectEarly = false },
	} {
		cfg := cfg
		mut(&cfg)
		if _, sh := newTestShard(cfg); sh.maxWait != [priority.NumClasses]int64{} {
			t.Errorf("%s: time rule still on: %v", name, sh.maxWait)
		}
	}
}

// The time rule over gRPC: the refusal names the rule and carries the
// hints; critical requests pass it.
func TestQueueWaitRefusedAtAdmission(t *testing.T) {
	e := start(t, envOpts{clock: clock.NewFake(epoch), cfg: func(c *Config) {
		c.QueueSize, c.QueueMaxWait = 100, 50*time.Millisecond
	}})
	e.login("alice")
	e.flushAndBlock("alice")
	sh := e.srv.shards[0].Load()
	sh.perOp.Store(int64(10 * time.Millisecond)) // the shard is parked: nothing overwrites it
	sh.waitFloor = 0                             // the boundary itself, not the short-queue exemption
	var queued []<-chan answer
	for i := 1; i <= 6; i++ { // the 6th finds 5 × 10 ms = 50 ms queued
		queued = append(queued, e.enqueue(profileReq("alice", ""), deflt, i))
	}
	for _, c := range []priority.Class{deflt, sheddable} {
		_, err := e.cli.Do(priority.Outgoing(ctxT(t), c), profileReq("alice", ""))
		wantStatus(t, err, codes.ResourceExhausted, "queue wait would exceed")
		wantHints(t, apperr.Backpressure(err), 6, 0.06, 60)
	}
	queued = append(queued, e.enqueue(profileReq("alice", ""), critical, 7))
	if e.rejections(0, reasonWaitEstimate, priority.Default) != 1 || e.rejections(0, reasonWaitEstimate, priority.Sheddable) != 1 {
		t.Fatal("wait_estimate refusals not counted")
	}
	e.gate.release()
	for _, ch := range queued {
		if a := <-ch; a.err != nil || view(a.r).GetProfile() == nil {
			t.Fatalf("queued request answered with %v, %v", a.r, a.err)
		}
	}
}

// The dequeue guard: after 2 × -queue-max-wait in the queue a default or
// sheddable request is answered busy unexecuted; a critical one is executed
// and a battle result (internal) is applied however long they waited.
func TestQueueWaitGuardAtDequeue(t *testing.T) {
	clk := clock.NewFake(epoch)
	e := start(t, envOpts{clock: clk, cfg: func(c *Config) { c.QueueMaxWait = 50 * time.Millisecond }})
	before := e.login("alice")
	release := e.battle.hold()
	fight := e.send(battleReq("alice", "slow", 2, 10), deflt, 20*time.Second)
	testwait.Until(t, "the battle call", func() bool { return e.battle.calls.Load() == 1 })

	e.flushAndBlock("alice")
	buyDefault := e.enqueue(buyReq("alice", 5, "sword", 1), deflt, 1)
	buyCritical := e.enqueue(buyReq("alice", 6, "sword", 1), critical, 2)
	shed := e.enqueue(profileReq("alice", ""), sheddable, 3)
	profile := e.enqueue(profileReq("alice", ""), deflt, 4)
	close(release)
	sh := e.srv.shards[0].Load()
	testwait.Until(t, "the result on the internal channel", func() bool { return len(sh.in) == 1 })
	clk.Advance(100 * time.Millisecond) // exactly 2 × 50 ms: not yet stale
	late := e.enqueue(profileReq("alice", ""), deflt, 5)
	clk.Advance(time.Millisecond)
	e.gate.release()

	for name, ch := range map[string]<-chan answer{"default purchase": buyDefault, "sheddable profile": shed, "default profile": profile} {
		a := <-ch
		if a.err == nil {
			t.Fatalf("stale %s executed: %v", name, a.r)
		}
		wantStatus(t, a.err, codes.ResourceExhausted, "waited in the queue longer than 100ms")
	}
	if a := <-late; a.err != nil || view(a.r).GetProfile() == nil {
		t.Fatalf("a request queued 1 ms: %v %v", a.r, a.err)
	}
	if a := <-buyCritical; a.err != nil || view(a.r).GetBuyItem() == nil {
		t.Fatalf("stale critical purchase: %v %v", a.r, a.err)
	}
	if a := <-fight; a.err != nil || view(a.r).GetBattle() == nil {
		t.Fatalf("battle: %v %v", a.r, a.err)
	}
	p := e.profile("alice")
	if p.GetInventory()["sword"] != 1 || p.GetGold() != before.GetGold()-100+int64(p.GetWins())*30 || p.GetWins()+p.GetLosses() != 1 {
		t.Fatalf("after one critical purchase and one battle: %v", p)
	}
	for c, want := range map[priority.Class]float64{priority.Default: 2, priority.Sheddable: 1, priority.Critical: 0} {
		if got := e.rejections(0, reasonQueueWait, c); got != want {
			t.Errorf("logic_rejections_total{queue_wait,%s} = %v, want %v", c, got, want)
		}
	}
	if r := e.call(buyReq("alice", 5, "potion", 1)).GetBuyItem(); r.GetReplayed() {
		t.Fatal("the refused purchase was executed")
	}
}

// -drop-expired off (or -protection off) turns the dequeue guard off.
func TestQueueWaitGuardSwitchedOff(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"drop-expired=false": func(c *Config) { c.DropExpired = false },
		"protection=false":   func(c *Config) { c.Protection = false },
		"queue-max-wait=0":   func(c *Config) { c.QueueMaxWait = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(epoch)
			e := start(t, envOpts{clock: clk, cfg: func(c *Config) { c.QueueMaxWait = 50 * time.Millisecond; mut(c) }})
			e.login("alice")
			e.flushAndBlock("alice")
			q := e.enqueue(profileReq("alice", ""), deflt, 1)
			clk.Advance(time.Second)
			e.gate.release()
			if a := <-q; a.err != nil || view(a.r).GetProfile() == nil {
				t.Fatalf("stale request: %v %v", a.r, a.err)
			}
		})
	}
}

// coolingClient is a battle client over two fake battle servers that ask
// for 200 ms of pushback when they refuse, on a fake clock, without
// retries.
func coolingClient(t *testing.T) (*battleClient, *clock.Fake, *fakeBattle, *fakeBattle, *tierMetrics) {
	f1, f2 := &fakeBattle{pushback: "200"}, &fakeBattle{pushback: "200"}
	a1, a2 := startFakeBattle(t, f1), startFakeBattle(t, f2)
	clk := clock.NewFake(epoch)
	m := newMetrics(prometheus.NewRegistry())
	c, err := dialBattle(grpcdial.Insecure(), []string{a1, a2}, 5*time.Second, nil, true, clk, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.close() })
	return c, clk, f1, f2, m
}

// Cooling, call by call: a refused instance is skipped until its pushback
// has passed; with both cooling a non-critical call fails locally at once
// (no RPC) with the time until the first is ready, and a critical one goes
// to the one ready first.
func TestBattleCooling(t *testing.T) {
	c, clk, f1, f2, m := coolingClient(t)
	req := simulateRequest(newPlayer("alice"), &arenapb.StartBattleRequest{BattleId: "b", Units: 1, Ticks: 1})
	call := func(cl priority.Class) (time.Duration, error) {
		t.Helper()
		_, pushback, err := c.Run(ctxT(t), arena.JobSimulate, "b", req, cl)
		return pushback, err
	}
	calls := func(want1, want2 int64) {
		t.Helper()
		if f1.calls.Load() != want1 || f2.calls.Load() != want2 {
			t.Fatalf("calls: f1 %d, f2 %d; want %d and %d", f1.calls.Load(), f2.calls.Load(), want1, want2)
		}
	}

	f1.failWith(statusBusy)
	if pb, err := call(priority.Default); !errors.Is(err, apperr.ErrBusy) || pb != 200*time.Millisecond { // round robin: f1
		t.Fatalf("first call: %v, pushback %v", err, pb)
	}
	calls(1, 0)
	// The refusal shrank f1's adaptive limit, and the gauge shows it.
	if got := testutil.ToFloat64(m.battleLimit.WithLabelValues(c.insts()[0].addr)); got != aimdInitial*aimdDecrease {
		t.Fatalf("logic_battle_limit{f1} = %v, want %v", got, aimdInitial*aimdDecrease)
	}
	for range 2 { // f2's turn, then f1's, which is cooling: f2 again
		if _, err := call(priority.Default); err != nil {
			t.Fatal(err)
		}
	}
	calls(1, 2)

	clk.Advance(50 * time.Millisecond)
	f2.failWith(statusBusy)
	if _, err := call(priority.Default); !errors.Is(err, apperr.ErrBusy) { // f2's turn: refused, cooling to +250 ms
		t.Fatalf("f2 did not refuse: %v", err)
	}
	calls(1, 3)

	// Both cooling: f1 until +200 ms, f2 until +250 ms; now is +50 ms.
	for _, cl := range []priority.Class{priority.Default, priority.Sheddable} {
		pb, err := call(cl)
		if !errors.Is(err, apperr.ErrBusy) || pb != 150*time.Millisecond {
			t.Fatalf("%s call with both cooling: %v, pushback %v; want busy after 150ms", cl, err, pb)
		}
	}
	calls(1, 3)
	if got := testutil.ToFloat64(m.battleCalls.WithLabelValues(outcomeCooling)); got != 2 {
		t.Fatalf("logic_battle_calls_total{cooling} = %v, want 2", got)
	}
	f1.failWith(nil)
	if _, err := call(priority.Critical); err != nil { // f1 is ready first
		t.Fatal(err)
	}
	calls(2, 3)

	clk.Advance(200 * time.Millisecond) // +250 ms: both ready
	f2.failWith(nil)
	for range 2 {
		if _, err := call(priority.Default); err != nil {
			t.Fatal(err)
		}
	}
	calls(3, 4)
}

// An instance that cannot be reached cools too (100 ms, as it sends no
// pushback), and a retry is not sent to a cooling instance.
func TestBattleCoolingWithoutPushbackAndRetry(t *testing.T) {
	f1 := &fakeBattle{pushback: "200"}
	a1 := startFakeBattle(t, f1)
	dead := freeAddr(t)
	clk := clock.NewFake(epoch)
	m := newMetrics(prometheus.NewRegistry())
	c, err := dialBattle(grpcdial.Insecure(), []string{dead, a1}, 5*time.Second, newRetryThrottle(10, 0.1), true, clk, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.close() })
	req := simulateRequest(newPlayer("alice"), &arenapb.StartBattleRequest{BattleId: "b", Units: 1, Ticks: 1})
	f1.failWith(statusBusy)
	// dead (unavailable) then f1 (busy): both cool; the retry went out.
	_, pb, err := c.Run(ctxT(t), arena.JobSimulate, "b", req, priority.Default)
	if !errors.Is(err, apperr.ErrBusy) || pb != 200*time.Millisecond || f1.calls.Load() != 1 {
		t.Fatalf("first call: %v, pushback %v, f1 calls %d", err, pb, f1.calls.Load())
	}
	if wait, all := c.allCooling(clk.Now()); !all || wait != 100*time.Millisecond {
		t.Fatalf("allCooling = %v, %v; want the dead one ready in 100ms", wait, all)
	}
	clk.Advance(100 * time.Millisecond) // dead is ready again, f1 cools to +200 ms
	// First attempt at dead (the only one not cooling) fails; the retry
	// would go to f1, which is cooling: not sent.
	_, pb, err = c.Run(ctxT(t), arena.JobSimulate, "b", req, priority.Default)
	if !errors.Is(err, apperr.ErrUnavailable) || f1.calls.Load() != 1 || pb != 100*time.Millisecond {
		t.Fatalf("second call: %v, pushback %v, f1 calls %d", err, pb, f1.calls.Load())
	}
	if got := testutil.ToFloat64(m.retries.WithLabelValues(retryCooling)); got != 1 {
		t.Fatalf("logic_battle_retries_total{cooling} = %v, want 1", got)
	}
}

// Through the server: after a refusal with 200 ms of pushback the next
// calls go to the other instance; with both cooling a new default battle is
// refused at admission (no RPC, no queue place) with the retry delay, a
// critical one still reaches an instance, and once the clock passes the
// cooling both are used again.
func TestBattleCoolingThroughServer(t *testing.T) {
	e, f1, f2 := twoBattlesPushback(t, "200", nil)
	f1.failWith(statusBusy)
	for i := range 3 { // f1 refuses, retried on f2; then f2's turn; then f1's, cooling: f2
		if r, err := e.cli.Do(ctxT(t), battleReq("alice", "c"+string(rune('a'+i)), 2, 10)); err != nil || view(r).GetBattle() == nil {
			t.Fatalf("battle %d: %v %v", i, r, err)
		}
	}
	if f1.calls.Load() != 1 || f2.calls.Load() != 3 {
		t.Fatalf("calls: f1 %d, f2 %d; want 1 and 3", f1.calls.Load(), f2.calls.Load())
	}

	e.clk.Advance(50 * time.Millisecond)
	f2.failWith(statusBusy)
	_, err := e.cli.Do(ctxT(t), battleReq("alice", "cd", 2, 10)) // f2 refuses; f1 cooling: no retry
	wantStatus(t, err, codes.ResourceExhausted, "")
	if f1.calls.Load() != 1 || f2.calls.Load() != 4 {
		t.Fatalf("calls: f1 %d, f2 %d; want 1 and 4", f1.calls.Load(), f2.calls.Load())
	}

	_, err = e.cli.Do(priority.Outgoing(ctxT(t), deflt), battleReq("alice", "ce", 2, 10))
	wantStatus(t, err, codes.ResourceExhausted, "cooling")
	if got := apperr.FromStatus(err).RetryAfter; got != 150*time.Millisecond {
		t.Fatalf("pushback = %v, want 150ms (f1's cooling ends first)", got)
	}
	if f1.calls.Load()+f2.calls.Load() != 5 {
		t.Fatal("a battle was called with every instance cooling")
	}
	if e.rejections(0, reasonBattleCooling, priority.Default) != 1 {
		t.Fatal("logic_rejections_total{battle_cooling,default} not counted")
	}
	// Other requests are not affected.
	e.profile("alice")

	f1.failWith(nil)
	if r, err := e.cli.Do(priority.Outgoing(ctxT(t), critical), battleReq("alice", "cf", 2, 10)); err != nil || view(r).GetBattle() == nil {
		t.Fatalf("critical battle: %v %v", r, err)
	}
	if f1.calls.Load() != 2 || f2.calls.Load() != 4 {
		t.Fatalf("calls: f1 %d, f2 %d; want 2 and 4", f1.calls.Load(), f2.calls.Load())
	}

	e.clk.Advance(200 * time.Millisecond)
	f2.failWith(nil)
	for i := range 2 {
		if r, err := e.cli.Do(ctxT(t), battleReq("alice", "cg"+string(rune('a'+i)), 2, 10)); err != nil || view(r).GetBattle() == nil {
			t.Fatalf("battle after the cooling: %v %v", r, err)
		}
	}
	if f1.calls.Load() != 3 || f2.calls.Load() != 5 {
		t.Fatalf("calls: f1 %d, f2 %d; want 3 and 5", f1.calls.Load(), f2.calls.Load())
	}
}

// -battle-pushback off (or -protection off): a refusing instance keeps
// getting its round-robin turns.
func TestBattlePushbackSwitchedOff(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"battle-pushback=false": func(c *Config) { c.BattlePushback = false },
		"protection=false":      func(c *Config) { c.Protection = false },
	} {
		t.Run(name, func(t *testing.T) {
			e, f1, f2 := twoBattles(t, mut)
			if e.srv.battleCli.pushback {
				t.Fatal("cooling on")
			}
			f1.failWith(statusBusy)
			f2.failWith(statusBusy)
			for i := range 4 {
				_, err := e.cli.Do(ctxT(t), battleReq("alice", "off"+string(rune('a'+i)), 2, 10))
				wantStatus(t, err, codes.ResourceExhausted, "")
			}
			// Without retries (protection off) each call reaches one
			// instance; with them (the first two calls, until the
			// throttle stops them) two. Every call reached a server.
			if f1.calls.Load() < 2 || f2.calls.Load() < 2 {
				t.Fatalf("calls: f1 %d, f2 %d; want both used every turn", f1.calls.Load(), f2.calls.Load())
			}
			if got := testutilValue(e.srv.m.battleCalls.WithLabelValues(outcomeCooling)); got != 0 {
				t.Fatalf("logic_battle_calls_total{cooling} = %v", got)
			}
			if e.rejections(0, reasonBattleCooling, priority.Default) != 0 {
				t.Fatal("refused at admission for cooling")
			}
		})
	}
}

// fullClient is a battle client of two instances, both at their adaptive
// limit, on a fake clock, with -battle-wait wait and -battle-waiters n.
func fullClient(t *testing.T, wait time.Duration, n int64) (*battleClient, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(0, 0))
	c, err := dialBattle(grpcdial.Insecure(), []string{"127.0.0.1:1", "127.0.0.1:2"}, time.Second, nil, true, clk, newMetrics(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.close() })
	c.slotWait, c.maxWaiters = wait, n
	for _, in := range c.insts() {
		in.limit.inflight.Store(aimdInitial)
	}
	return c, clk
}

type slotResult struct {
	i    int
	wait time.Duration
}

// goAwait runs awaitSlot on its own goroutine and waits (with a deadline)
// until it is waiting on the fake clock's timer.
func goAwait(t *testing.T, c *battleClient, clk *clock.Fake, ctx context.Context) <-chan slotResult {
	t.Helper()
	before := clk.Waiters()
	ch := make(chan slotResult, 1)
	go func() {
		i, w := c.awaitSlotIndex(ctx)
		ch <- slotResult{i, w}
	}()
	testwait.Until(t, "the call to wait for a slot", func() bool { return clk.Waiters() > before })
	return ch
}

func waitCount(c *battleClient, outcome string) float64 {
	return testutilValue(c.waits.WithLabelValues(outcome))
}

// With every instance at its limit, a call waits for the first slot that
// frees and takes it, instead of being refused.
func TestAwaitSlotTakesAFreedSlot(t *testing.T) {
	c, clk := fullClient(t, 20*time.Millisecond, 8)
	res := goAwait(t, c, clk, context.Background())
	select {
	case r := <-res:
		t.Fatalf("returned %+v before any slot freed", r)
	default:
	}
	c.insts()[1].limit.inflight.Add(-1) // a call to instance 1 ends
	c.signalFreed()
	select {
	case r := <-res:
		if r.i != 1 || r.wait != 0 {
			t.Fatalf("got %+v, want instance 1", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot did not wake the waiting call")
	}
	if got := waitCount(c, waitSlot); got != 1 {
		t.Fatalf("waits{slot} = %v", got)
	}
	if n := c.waiters.Load(); n != 0 {
		t.Fatalf("waiters after = %d", n)
	}
}

// No slot within -battle-wait: refused with the usual retry delay.
func TestAwaitSlotTimesOut(t *testing.T) {
	c, clk := fullClient(t, 20*time.Millisecond, 8)
	res := goAwait(t, c, clk, context.Background())
	clk.Advance(19 * time.Millisecond)
	select {
	case r := <-res:
		t.Fatalf("returned %+v before -battle-wait passed", r)
	default:
	}
	clk.Advance(time.Millisecond)
	r := <-res
	if r.i != -1 || r.wait != fullWait {
		t.Fatalf("got %+v, want a refusal after %v", r, fullWait)
	}
	if got := waitCount(c, waitTimeout); got != 1 {
		t.Fatalf("waits{timeout} = %v", got)
	}
}

// At most -battle-waiters wait; the next is refused at once. -battle-wait
// 0 refuses at once too, and a caller that goes stops waiting.
func TestAwaitSlotBounds(t *testing.T) {
	c, clk := fullClient(t, 20*time.Millisecond, 1)
	ctx, cancel := context.WithCancel(context.Background())
	res := goAwait(t, c, clk, ctx)
	if i, w := c.awaitSlotIndex(context.Background()); i != -1 || w != fullWait {
		t.Fatalf("second waiter: got %d, %v; want a refusal", i, w)
	}
	if got := waitCount(c, waitFull); got != 1 {
		t.Fatalf("waits{full} = %v", got)
	}
	cancel()
	if r := <-res; r.i != -1 {
		t.Fatalf("cancelled waiter got instance %d", r.i)
	}

	c.slotWait = 0
	if i, _ := c.awaitSlotIndex(context.Background()); i != -1 {
		t.Fatalf("-battle-wait 0: got instance %d", i)
	}
	if n := c.waiters.Load(); n != 0 {
		t.Fatalf("waiters after = %d", n)
	}
}
