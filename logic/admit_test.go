package logic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

const (
	critical  = priority.Critical
	deflt     = priority.Default
	sheddable = priority.Sheddable
)

func TestAdmitBelow(t *testing.T) {
	for _, c := range []struct {
		fill     float64
		capacity int
		want     int
	}{
		{0.9, 10, 9},       // refuse at len 9: the 9th request is in, the 10th out
		{0.9, 1024, 922},   // 921.6: refuse at 922
		{0.9, 4, 4},        // 3.6: refuse at 4, i.e. only when full
		{0.7, 10, 7},       // 0.7 × 10 = 7.000000000000001 in floats
		{0.57, 100, 57},    // 56.99999999999999
		{0.5, 10, 5},       //
		{0.5, 1, 1},        // never below one place
		{0.001, 10, 1},     //
		{1, 10, 10},        // only a full channel refuses
		{0.999, 1000, 999}, //
	} {
		if got := admitBelow(c.fill, c.capacity); got != c.want {
			t.Errorf("admitBelow(%v, %d) = %d, want %d", c.fill, c.capacity, got, c.want)
		}
	}
}

func TestDrainTime(t *testing.T) {
	for _, c := range []struct {
		depth int
		perOp time.Duration
		want  time.Duration
	}{
		{9, 0, minRetryAfter},                // nothing measured yet
		{0, time.Second, minRetryAfter},      //
		{9, time.Millisecond, minRetryAfter}, // 9 ms: clamped up
		{9, 20 * time.Millisecond, 180 * time.Millisecond},
		{1000, 20 * time.Millisecond, maxRetryAfter}, // 20 s: clamped down
		{1 << 30, time.Hour, maxRetryAfter},          // no overflow
	} {
		if got := drainTime(c.depth, c.perOp); got != c.want {
			t.Errorf("drainTime(%d, %v) = %v, want %v", c.depth, c.perOp, got, c.want)
		}
	}
	var sh shard
	sh.observeBatch(10, 10*time.Millisecond) // 1 ms each
	sh.observeBatch(1, 6*time.Millisecond)   // + (6-1)/5
	if got := time.Duration(sh.perOp.Load()); got != 2*time.Millisecond {
		t.Fatalf("perOp = %v, want 2ms", got)
	}
}

type answer struct {
	r   *leveev2.LogicReply
	err error
}

// send sends req with criticality c and the given timeout from a goroutine;
// the answer arrives on the returned channel.
func (e *env) send(req *leveev2.LogicRequest, c priority.Class, timeout time.Duration) <-chan answer {
	ch := make(chan answer, 1)
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r, err := e.cli.Do(priority.Outgoing(ctx, c), req)
		ch <- answer{r, err}
	}()
	return ch
}

// enqueue sends req with criticality c and returns once shard 0's queue
// has grown to depth.
func (e *env) enqueue(req *leveev2.LogicRequest, c priority.Class, depth int) <-chan answer {
	e.t.Helper()
	ch := e.send(req, c, 20*time.Second)
	testwait.Until(e.t, "the request queued", func() bool { return e.depth(0) == depth })
	return ch
}

// refused sends req with criticality c, expects it refused at admission
// with RESOURCE_EXHAUSTED, and returns the hints of its status details.
func (e *env) refused(req *leveev2.LogicRequest, c priority.Class) *leveev2.Backpressure {
	e.t.Helper()
	_, err := e.cli.Do(priority.Outgoing(ctxT(e.t), c), req)
	wantStatus(e.t, err, codes.ResourceExhausted, "queue is full")
	back := apperr.FromStatus(err)
	if !errors.Is(back, apperr.ErrBusy) || back.Backpressure == nil {
		e.t.Fatalf("refusal %+v: not BUSY with backpressure in its details", back)
	}
	if back.Backpressure.GetRetryAfterMs() != uint32(back.RetryAfter.Milliseconds()) {
		e.t.Fatalf("retry after %v, backpressure %v", back.RetryAfter, back.Backpressure)
	}
	return back.Backpressure
}

func wantHints(t *testing.T, bp *leveev2.Backpressure, depth uint32, ratio float64, retryAfterMs uint32) {
	t.Helper()
	if bp.GetQueueDepth() != depth || bp.GetRatio() != ratio || bp.GetRetryAfterMs() != retryAfterMs {
		t.Fatalf("hints = %v, want depth %d, ratio %v, retry after %d ms", bp, depth, ratio, retryAfterMs)
	}
}

// Capacity 10, -reject-fill 0.9: the 9th queued request is accepted, the
// 10th default one refused at once with the hints; a critical one may still
// take the last place; a refused purchase changes nothing.
func TestRejectAtNinetyPercent(t *testing.T) {
	e := start(t, envOpts{cfg: func(c *Config) { c.QueueSize = 10 }})
	before := e.login("alice")
	e.flushAndBlock("alice")
	sh := e.srv.shards[0].Load()
	if sh.limit != [priority.NumClasses]int{priority.Sheddable: 5, priority.Default: 9, priority.Critical: 10} {
		t.Fatalf("limits = %v", sh.limit)
	}
	var queued []<-chan answer
	for i := 1; i <= 9; i++ { // the 9th arrives with 8 queued and is accepted
		queued = append(queued, e.enqueue(profileReq("alice", ""), deflt, i))
	}
	sh.perOp.Store(int64(20 * time.Millisecond)) // as if measured
	sh.waitFloor = 0                             // the boundary itself, not the short-queue exemption

	// The 10th default request finds 9 = 0.9 × 10 queued.
	wantHints(t, e.refused(buyReq("alice", 7, "sword", 1), deflt), 9, 0.9, 180)
	wantHints(t, e.refused(profileReq("alice", ""), sheddable), 9, 0.9, 180)
	// A critical request takes the last place; then the channel is full.
	queued = append(queued, e.enqueue(buyReq("alice", 8, "sword", 1), critical, 10))
	wantHints(t, e.refused(buyReq("alice", 9, "sword", 1), critical), 10, 1, 200)
	wantHints(t, e.refused(buyReq("alice", 10, "sword", 1), deflt), 10, 1, 200)

	for c, want := range map[priority.Class]float64{priority.Default: 2, priority.Sheddable: 1, priority.Critical: 1} {
		if got := e.rejections(0, reasonQueueFull, c); got != want {
			t.Errorf("logic_rejections_total{0,queue_full,%s} = %v, want %v", c, got, want)
		}
	}
	if got := e.requests("buy_item", "busy") + e.requests("get_profile", "busy"); got != 4 {
		t.Errorf("busy requests = %d, want 4", got)
	}

	e.gate.release()
	for _, ch := range queued {
		if a := <-ch; a.err != nil || a.r.GetError() != nil {
			t.Fatalf("queued request answered with %v, %v", a.r, a.err)
		}
	}
	// Only purchase 8 (admitted) was applied; the refused ones are unknown.
	p := e.profile("alice")
	if p.GetGold() != before.GetGold()-100 || p.GetInventory()["sword"] != 1 || p.GetVersion() != before.GetVersion()+1 {
		t.Fatalf("after one admitted purchase: %v", p)
	}
	for _, rid := range []uint64{7, 9, 10} {
		if r := e.call(buyReq("alice", rid, "potion", 1)).GetBuyItem(); r.GetReplayed() {
			t.Fatalf("refused purchase %d was recorded: %v", rid, r)
		}
	}
}

// SHEDDABLE requests are refused from -reject-fill-sheddable (0.5 × 10 = 5
// queued), while default ones still get in.
func TestSheddableRefusedEarlier(t *testing.T) {
	e := start(t, envOpts{cfg: func(c *Config) { c.QueueSize = 10 }})
	e.login("alice")
	e.flushAndBlock("alice")
	for i := 1; i <= 5; i++ { // the 5th arrives with 4 queued and is accepted
		e.enqueue(profileReq("alice", ""), sheddable, i)
	}
	bp := e.refused(profileReq("alice", ""), sheddable)
	if bp.GetQueueDepth() != 5 || bp.GetRatio() != 0.5 {
		t.Fatalf("hints = %v", bp)
	}
	e.enqueue(profileReq("alice", ""), deflt, 6)
	if got := e.rejections(0, reasonQueueFull, priority.Sheddable); got != 1 {
		t.Errorf("logic_rejections_total{0,queue_full,sheddable} = %v, want 1", got)
	}
	if got := e.rejections(0, reasonQueueFull, priority.Default); got != 0 {
		t.Errorf("logic_rejections_total{0,queue_full,default} = %v, want 0", got)
	}
}

// The criticality and the remaining deadline reach battle.
func TestCriticalityForwardedToBattle(t *testing.T) {
	e := start(t, envOpts{})
	e.login("alice")
	sent := time.Now()
	// The last call carries no class: it is default.
	for i, c := range []priority.Class{critical, sheddable, priority.Class(99)} {
		ctx := ctxT(t)
		if c.Valid() {
			ctx = priority.Outgoing(ctx, c)
		}
		if _, err := e.cli.Do(ctx, battleReq("alice", "crit-"+string(rune('a'+i)), 2, 10)); err != nil {
			t.Fatal(err)
		}
	}
	seen := e.battle.seenCalls()
	want := []priority.Class{critical, sheddable, deflt}
	if len(seen) != len(want) {
		t.Fatalf("battle saw %d calls", len(seen))
	}
	for i, s := range seen {
		if s.crit != want[i] {
			t.Errorf("call %d arrived as %v, want %v", i, s.crit, want[i])
		}
		// ctxT gives 10 s; the battle timeout (5 s) is the tighter cap.
		if s.deadline.IsZero() || s.deadline.After(sent.Add(10*time.Second)) {
			t.Errorf("call %d deadline %v", i, s.deadline)
		}
	}
}

// twoBattles starts logic with two battle instances, f1 first, on a fake
// clock (e.clk), so that a refusing instance cools until the test advances
// the clock past its pushback.
func twoBattles(t *testing.T, mut func(*Config)) (*env, *fakeBattle, *fakeBattle) {
	return twoBattlesPushback(t, "100", mut)
}

// twoBattlesPushback is twoBattles with instances that send pushback (ms)
// when they refuse.
func twoBattlesPushback(t *testing.T, pushback string, mut func(*Config)) (*env, *fakeBattle, *fakeBattle) {
	f1, f2 := &fakeBattle{pushback: pushback}, &fakeBattle{pushback: pushback}
	a1, a2 := startFakeBattle(t, f1), startFakeBattle(t, f2)
	e := start(t, envOpts{battle: f1, clock: clock.NewFake(time.Unix(1_000_000, 0)), cfg: func(c *Config) {
		c.BattleAddrs = []string{a1, a2}
		if mut != nil {
			mut(c)
		}
	}})
	e.login("alice")
	return e, f1, f2
}

func (e *env) retries(outcome string) float64 {
	return testutil.ToFloat64(e.srv.m.retries.WithLabelValues(outcome))
}

// A battle call refused by one instance is retried once, on the other, at
// once (not after the 100 ms pushback), with the same criticality. (The
// clock moves past the refusing instance's cooling before each call, so
// that every other call tries it first again.)
func TestBattleRetryOnOtherInstance(t *testing.T) {
	e, f1, f2 := twoBattles(t, nil)
	f1.failWith(statusBusy)
	const n = 6
	for i := range n {
		e.clk.Advance(time.Second)
		ctx := priority.Outgoing(ctxT(t), critical)
		r, err := e.cli.Do(ctx, battleReq("alice", "retry-"+string(rune('a'+i)), 2, 10))
		if err != nil || view(r).GetBattle() == nil {
			t.Fatalf("battle %d: %v %v", i, r, err)
		}
	}
	// First attempts alternate: half went to f1, were refused and retried
	// on f2; every battle was fought by f2.
	if f1.calls.Load() != n/2 || f2.calls.Load() != n {
		t.Fatalf("calls: f1 %d, f2 %d; want %d and %d", f1.calls.Load(), f2.calls.Load(), n/2, n)
	}
	if got := e.retries(retryOK); got != n/2 {
		t.Errorf("logic_battle_retries_total{ok} = %v, want %d", got, n/2)
	}
	if got := e.retries(retryFailed) + e.retries(retryThrottled); got != 0 {
		t.Errorf("failed or throttled retries: %v", got)
	}
	if got := testutilValue(e.srv.m.battleCalls.WithLabelValues("busy")); got != n/2 {
		t.Errorf("logic_battle_calls_total{busy} = %v", got)
	}
	for _, s := range append(f1.seenCalls(), f2.seenCalls()...) {
		if s.crit != critical {
			t.Fatalf("an attempt arrived as %v", s.crit)
		}
	}
}

// An instance that cannot be reached (UNAVAILABLE) is retried around too.
func TestBattleRetryAroundDeadInstance(t *testing.T) {
	f2 := &fakeBattle{}
	dead, a2 := freeAddr(t), startFakeBattle(t, f2)
	e := start(t, envOpts{battle: f2, cfg: func(c *Config) { c.BattleAddrs = []string{dead, a2} }})
	e.login("alice")
	for i := range 4 {
		if r, err := e.cli.Do(ctxT(t), battleReq("alice", "dead-"+string(rune('a'+i)), 2, 10)); err != nil || view(r).GetBattle() == nil {
			t.Fatalf("battle %d: %v %v", i, r, err)
		}
	}
	if f2.calls.Load() != 4 {
		t.Fatalf("f2 fought %d battles, want 4", f2.calls.Load())
	}
	if got := e.retries(retryOK); got < 1 {
		t.Fatalf("logic_battle_retries_total{ok} = %v, want the dead instance's calls retried", got)
	}
}

// When battle is broadly unhealthy the throttle stops the retries: with 10
// tokens, the first two failed calls are retried (4 failed attempts leave
// 6), the third failure leaves 5, not more than half, and from then on
// nothing is retried. (The clock moves past the cooling before each call.)
func TestBattleRetryThrottled(t *testing.T) {
	e, f1, f2 := twoBattles(t, nil)
	f1.failWith(statusBusy)
	f2.failWith(statusBusy)
	for i := range 5 {
		e.clk.Advance(time.Second)
		_, err := e.cli.Do(ctxT(t), battleReq("alice", "down-"+string(rune('a'+i)), 2, 10))
		wantStatus(t, err, codes.ResourceExhausted, "")
	}
	if got := f1.calls.Load() + f2.calls.Load(); got != 2*2+3 {
		t.Fatalf("attempts = %d, want 7", got)
	}
	if e.retries(retryFailed) != 2 || e.retries(retryThrottled) != 3 || e.retries(retryOK) != 0 {
		t.Fatalf("retries: failed %v, throttled %v, ok %v; want 2, 3, 0",
			e.retries(retryFailed), e.retries(retryThrottled), e.retries(retryOK))
	}
	if got := e.srv.battleCli.retry.level(); got != 3 {
		t.Fatalf("tokens = %v, want 3", got)
	}
}

func TestRetryThrottleRefills(t *testing.T) {
	th := newRetryThrottle(10, 0.1)
	for i := range 4 {
		if !th.failure() {
			t.Fatalf("failure %d: retry refused with %v tokens", i+1, th.level())
		}
	}
	if th.failure() { // 5 left: not more than half
		t.Fatal("retry allowed at half the tokens")
	}
	for range 11 {
		th.success()
	}
	if got := th.level(); got < 6.09 || got > 6.11 {
		t.Fatalf("tokens = %v, want 6.1", got)
	}
	if !th.failure() { // 5.1 left
		t.Fatal("no retry after the bucket refilled")
	}
	for range 1000 {
		th.success()
	}
	if th.level() != 10 {
		t.Fatalf("tokens = %v, want capped at 10", th.level())
	}
}

// -battle-retry off (or -protection off): a refused battle call is not
// retried.
func TestBattleRetrySwitchedOff(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"battle-retry=false": func(c *Config) { c.BattleRetry = false },
		"protection=false":   func(c *Config) { c.Protection = false },
	} {
		t.Run(name, func(t *testing.T) {
			e, f1, f2 := twoBattles(t, mut)
			if e.srv.battleCli.retry != nil {
				t.Fatal("retry throttle built")
			}
			f1.failWith(statusBusy)
			// The first attempt goes to the first address.
			_, err := e.cli.Do(ctxT(t), battleReq("alice", "b1", 2, 10))
			wantStatus(t, err, codes.ResourceExhausted, "")
			if f1.calls.Load() != 1 || f2.calls.Load() != 0 {
				t.Fatalf("calls: f1 %d, f2 %d", f1.calls.Load(), f2.calls.Load())
			}
		})
	}
}

// With one battle address there is no other instance: no retries.
func TestBattleNoRetryWithOneInstance(t *testing.T) {
	e := start(t, envOpts{})
	if e.srv.battleCli.retry != nil {
		t.Fatal("retry throttle with one instance")
	}
	e.login("alice")
	e.battle.failWith(statusBusy)
	_, err := e.cli.Do(ctxT(t), battleReq("alice", "b1", 2, 10))
	wantStatus(t, err, codes.ResourceExhausted, "")
	if e.battle.calls.Load() != 1 {
		t.Fatalf("calls = %d, want 1", e.battle.calls.Load())
	}
}

// -reject-early off (or -protection off): a request that finds the queue
// full waits for room instead of being refused, and its wait ends with its
// caller's deadline.
func TestRejectEarlyOffBlocks(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"reject-early=false": func(c *Config) { c.RejectEarly = false },
		"protection=false":   func(c *Config) { c.Protection = false },
	} {
		t.Run(name, func(t *testing.T) {
			e := start(t, envOpts{cfg: func(c *Config) { c.QueueSize = 2; mut(c) }})
			e.login("alice")
			e.flushAndBlock("alice")
			q1 := e.enqueue(profileReq("alice", ""), deflt, 1)
			q2 := e.enqueue(profileReq("alice", ""), deflt, 2) // past 90 %: would be refused
			waiter := e.send(profileReq("alice", ""), critical, 20*time.Second)
			testwait.Until(t, "a request waiting for room", func() bool { return testutilValue(e.srv.m.blocked) == 1 })

			late := e.send(buyReq("alice", 5, "sword", 1), deflt, 100*time.Millisecond)
			testwait.Until(t, "a second waiter", func() bool { return testutilValue(e.srv.m.blocked) == 2 })
			wantStatus(t, (<-late).err, codes.DeadlineExceeded, "")
			testwait.Until(t, "the late waiter to give up", func() bool {
				return testutilValue(e.srv.m.blocked) == 1 && e.rejections(0, reasonExpired, priority.Default) == 1
			})

			e.gate.release()
			for _, ch := range []<-chan answer{q1, q2, waiter} {
				if a := <-ch; a.err != nil || view(a.r).GetProfile() == nil {
					t.Fatalf("answer %v, %v", a.r, a.err)
				}
			}
			if got := e.requests("get_profile", "busy"); got != 0 {
				t.Fatalf("%d refused", got)
			}
			if p := e.profile("alice"); len(p.GetInventory()) != 0 {
				t.Fatalf("the purchase that gave up was executed: %v", p)
			}
		})
	}
}

// -drop-expired off: a request whose caller has gone is executed anyway.
func TestDropExpiredOffExecutes(t *testing.T) {
	e := start(t, envOpts{cfg: func(c *Config) { c.DropExpired = false }})
	before := e.login("alice")
	e.flushAndBlock("alice")
	late := e.send(buyReq("alice", 5, "sword", 1), deflt, 100*time.Millisecond)
	testwait.Until(t, "the purchase queued", func() bool { return e.depth(0) == 1 })
	wantStatus(t, (<-late).err, codes.DeadlineExceeded, "")
	testwait.Until(t, "the handler to give up", func() bool { return e.requests("buy_item", "expired") == 1 })
	e.gate.release()
	if p := e.profile("alice"); p.GetGold() != before.GetGold()-100 || p.GetInventory()["sword"] != 1 {
		t.Fatalf("expired purchase not executed: %v", p)
	}
	if got := e.rejections(0, reasonExpired, priority.Default); got != 0 {
		t.Fatalf("logic_rejections_total{expired} = %v", got)
	}
}

func TestProtectionSwitches(t *testing.T) {
	cfg := DefaultConfig()
	if !cfg.rejectEarly() || !cfg.dropExpired() || !cfg.battleRetry() || !cfg.battlePushback() {
		t.Fatal("a mechanism is off by default")
	}
	if cfg.admitMaxWait() != 50*time.Millisecond || cfg.staleAfter() != 100*time.Millisecond {
		t.Fatalf("time bounds %v and %v, want 50ms and 100ms", cfg.admitMaxWait(), cfg.staleAfter())
	}
	cfg.Protection = false
	if cfg.rejectEarly() || cfg.dropExpired() || cfg.battleRetry() || cfg.battlePushback() || cfg.admitMaxWait() != 0 || cfg.staleAfter() != 0 {
		t.Fatal("-protection=false left a mechanism on")
	}
	cfg = DefaultConfig()
	cfg.DropExpired = false
	if !cfg.rejectEarly() || cfg.dropExpired() || !cfg.battleRetry() || cfg.staleAfter() != 0 || cfg.admitMaxWait() == 0 {
		t.Fatal("-drop-expired=false: wrong switches")
	}
	cfg = DefaultConfig()
	cfg.RejectEarly = false
	if cfg.admitMaxWait() != 0 || cfg.staleAfter() == 0 {
		t.Fatal("-reject-early=false: wrong time bounds")
	}
	cfg = DefaultConfig()
	cfg.BattlePushback = false
	if cfg.battlePushback() || !cfg.battleRetry() {
		t.Fatal("-battle-pushback=false: wrong switches")
	}
}
