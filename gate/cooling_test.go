package gate

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

const (
	critical  = leveev2.Criticality_CRITICALITY_CRITICAL
	dflt      = leveev2.Criticality_CRITICALITY_DEFAULT
	sheddable = leveev2.Criticality_CRITICALITY_SHEDDABLE
)

// playersOnTwoShards returns two player ids on different shards.
func playersOnTwoShards(t *testing.T, shards int) (string, string) {
	t.Helper()
	a := "alice"
	for i := range 1000 {
		b := fmt.Sprintf("bob%d", i)
		if shardmap.Shard(b, shards) != shardmap.Shard(a, shards) {
			return a, b
		}
	}
	t.Fatal("no second shard")
	return "", ""
}

// refusingLogic makes logic refuse every request for which refuse says so
// with RESOURCE_EXHAUSTED, a pushback and queue hints, and serve the rest.
func refusingLogic(logic *fakeLogic, pushback time.Duration, refuse func(*leveev2.LogicRequest) bool) {
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		if refuse(req) {
			return nil, apperr.Overloaded(ctx, apperr.ErrBusy, pushback, 40, 0.95)
		}
		return defaultReply(req), nil
	})
}

func ask(c *client, f *leveev2.ClientFrame, crit leveev2.Criticality) *leveev2.ServerFrame {
	c.t.Helper()
	f.Criticality = crit
	c.send(f)
	return c.recv()
}

// wantCooling checks a refusal by the gate's cooling: BUSY, retry_after
// within [left, left + 25 %] (rounded up to ms), and the hints.
func wantCooling(t *testing.T, f *leveev2.ServerFrame, id uint64, left time.Duration) {
	t.Helper()
	e := wantError(t, f, id, leveev2.ErrorCode_ERROR_CODE_BUSY)
	lo, hi := ceilMillis(left).Milliseconds(), ceilMillis(left+left/4).Milliseconds()
	if ms := int64(e.GetRetryAfterMs()); ms < lo || ms > hi {
		t.Fatalf("request %d: retry_after_ms = %d, want in [%d, %d]", id, ms, lo, hi)
	}
	if !strings.Contains(e.GetMessage(), "busy") {
		t.Fatalf("request %d: message %q", id, e.GetMessage())
	}
	if bp := f.GetBackpressure(); bp.GetRetryAfterMs() != e.GetRetryAfterMs() {
		t.Fatalf("request %d: backpressure %v, want retry_after_ms %d", id, bp, e.GetRetryAfterMs())
	}
}

func TestLogicPushbackCoolsTheShard(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	a, b := playersOnTwoShards(t, g.cfg.Shards)
	ca, _ := g.connect(t, a, wire.ProtoSubprotocol)
	cb, _ := g.connect(t, b, wire.JSONSubprotocol)
	var refuse atomic.Bool
	refuse.Store(true)
	refusingLogic(logic, 200*time.Millisecond, func(*leveev2.LogicRequest) bool { return refuse.Load() })
	calls := func() int { return len(logic.requests()) }

	n := calls()
	if e := wantError(t, ask(ca, profileFrame(1), dflt), 1, leveev2.ErrorCode_ERROR_CODE_BUSY); e.GetRetryAfterMs() != 200 {
		t.Fatalf("logic's refusal: retry_after_ms = %d", e.GetRetryAfterMs())
	}
	if calls() != n+1 {
		t.Fatal("the first refusal did not come from logic")
	}
	refuse.Store(false) // logic would serve now: only the gate refuses

	// Shard a is cooling for default and sheddable: the gate answers, with
	// logic's last hints, and logic sees nothing.
	n = calls()
	for id, crit := range map[uint64]leveev2.Criticality{2: dflt, 3: sheddable} {
		f := ask(ca, profileFrame(id), crit)
		wantCooling(t, f, id, 200*time.Millisecond)
		if bp := f.GetBackpressure(); bp.GetQueueDepth() != 40 || bp.GetRatio() != 0.95 {
			t.Fatalf("backpressure %v, want logic's depth 40, ratio 0.95", bp)
		}
	}
	wantCooling(t, ask(ca, battleFrame(4, "b1"), dflt), 4, 200*time.Millisecond) // a refused profile cools battles too
	if calls() != n {
		t.Fatalf("logic saw %d requests while the shard was cooling", calls()-n)
	}
	// A profile read asking for critical is default all the same, and
	// cooled; a purchase (critical) always goes to logic; so does another
	// shard's default.
	wantCooling(t, ask(ca, profileFrame(5), critical), 5, 200*time.Millisecond)
	if f := ask(ca, buyOne(50), 0); replyOf(f, &arenapb.BuyItemReply{}) == nil {
		t.Fatalf("critical while cooling: %v", f)
	}
	if f := ask(cb, profileFrame(6), dflt); !isProfile(f) {
		t.Fatalf("another shard while cooling: %v", f)
	}
	if calls() != n+2 {
		t.Fatalf("logic saw %d requests, want 2", calls()-n)
	}

	g.clock.Advance(150 * time.Millisecond)
	wantCooling(t, ask(ca, profileFrame(7), dflt), 7, 50*time.Millisecond)
	g.clock.Advance(50 * time.Millisecond)
	if f := ask(ca, profileFrame(8), dflt); !isProfile(f) {
		t.Fatalf("after the cooling: %v", f)
	}
	if f := ask(ca, profileFrame(9), sheddable); !isProfile(f) {
		t.Fatalf("sheddable after the cooling: %v", f)
	}

	for crit, want := range map[string]float64{"default": 4, "sheddable": 1, "critical": 0} {
		if got := testutil.ToFloat64(g.m.reqRejects.WithLabelValues(reasonCooling, crit)); got != want {
			t.Errorf("gate_request_rejections_total{logic_cooling,%s} = %v, want %v", crit, got, want)
		}
	}
	if got := testutil.ToFloat64(g.m.rejectRequest[reqCooling]); got != 5 {
		t.Errorf("gate_rejections_total{logic_cooling} = %v, want 5", got)
	}
	if got := testutil.ToFloat64(g.m.requests.WithLabelValues(arena.ActionGetProfile, "busy")); got != 5 {
		t.Errorf("gate_requests_total{get_profile,busy} = %v, want 5", got)
	}
}

// A refusal cools its own class and the lower ones only, and a refused
// battle cools the shard's battles only.
func TestLogicPushbackCoolsTheClassAndKindRefused(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	var refuse atomic.Bool
	refuse.Store(true)
	refusingLogic(logic, time.Second, func(*leveev2.LogicRequest) bool { return refuse.Load() })

	wantError(t, ask(c, profileFrame(1), sheddable), 1, leveev2.ErrorCode_ERROR_CODE_BUSY)
	refuse.Store(false)
	if f := ask(c, profileFrame(2), dflt); !isProfile(f) {
		t.Fatalf("default after a sheddable refusal: %v", f)
	}
	wantCooling(t, ask(c, profileFrame(3), sheddable), 3, time.Second)

	g.clock.Advance(time.Second)
	refuse.Store(true)
	wantError(t, ask(c, battleFrame(4, "b1"), dflt), 4, leveev2.ErrorCode_ERROR_CODE_BUSY)
	refuse.Store(false)
	if f := ask(c, profileFrame(5), sheddable); !isProfile(f) {
		t.Fatalf("a profile after a refused battle: %v", f)
	}
	wantCooling(t, ask(c, battleFrame(6, "b1"), sheddable), 6, time.Second)
	// A battle is default whatever its frame asks for: cooled too.
	wantCooling(t, ask(c, battleFrame(7, "b1"), critical), 7, time.Second)
}

func TestLogicPushbackSwitch(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"logic-pushback=false": func(c *Config) { c.LogicPushback = false },
		"protection=false":     func(c *Config) { c.Protection = false },
	} {
		t.Run(name, func(t *testing.T) {
			logic := startFakeLogic(t)
			g := startGate(t, mod, logic)
			c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
			refusingLogic(logic, time.Second, func(*leveev2.LogicRequest) bool { return true })
			n := len(logic.requests())
			for id := uint64(1); id <= 3; id++ {
				wantError(t, ask(c, profileFrame(id), sheddable), id, leveev2.ErrorCode_ERROR_CODE_BUSY)
			}
			if got := len(logic.requests()) - n; got != 3 {
				t.Fatalf("logic saw %d requests, want all 3", got)
			}
			if got := testutil.ToFloat64(g.m.rejectRequest[reqCooling]); got != 0 {
				t.Fatalf("gate_rejections_total{logic_cooling} = %v", got)
			}
		})
	}
}

func TestCoolingTable(t *testing.T) {
	clk := clock.NewFake(t0)
	tab := newCoolingTable(4)
	left := func(s, kind int, crit priority.Class) time.Duration {
		d, ok := tab.cooling(s, kind, crit, clk)
		if ok != (d > 0) {
			t.Fatalf("cooling = %v, %v", d, ok)
		}
		return d
	}
	if left(1, kindOther, priority.Sheddable) != 0 {
		t.Fatal("cooling before any refusal")
	}
	tab.cool(1, kindOther, priority.Default, clk.Now(), 0)
	if left(1, kindOther, priority.Sheddable) != 0 {
		t.Fatal("a refusal without pushback cools")
	}
	tab.cool(1, kindOther, priority.Default, clk.Now(), time.Minute)
	if d := left(1, kindOther, priority.Default); d != maxLogicCooling {
		t.Fatalf("cooling %v, want capped at %v", d, maxLogicCooling)
	}
	// Never shortened by a later, shorter pushback.
	clk.Advance(500 * time.Millisecond)
	tab.cool(1, kindOther, priority.Sheddable, clk.Now(), 100*time.Millisecond)
	if d := left(1, kindOther, priority.Sheddable); d != 1500*time.Millisecond {
		t.Fatalf("cooling %v after a shorter pushback, want 1.5 s", d)
	}
	// A critical refusal cools every lower class of both kinds, never
	// critical itself, and only its shard.
	tab.cool(2, kindOther, priority.Critical, clk.Now(), 300*time.Millisecond)
	for _, k := range []int{kindOther, kindJob} {
		for _, c := range []priority.Class{priority.Default, priority.Sheddable, priority.Class(5)} {
			if d := left(2, k, c); d != 300*time.Millisecond {
				t.Fatalf("kind %d class %v: cooling %v", k, c, d)
			}
		}
		if left(2, k, priority.Critical) != 0 {
			t.Fatal("critical refused")
		}
	}
	if left(3, kindOther, priority.Sheddable) != 0 || left(0, kindOther, priority.Sheddable) != 0 {
		t.Fatal("another shard cools")
	}
	clk.Advance(300 * time.Millisecond)
	if left(2, kindOther, priority.Sheddable) != 0 {
		t.Fatal("still cooling once the pushback has passed")
	}

	// The refusal: retry_after in [left, left+25 %], the hints last seen.
	tab.hints(1, &leveev2.Backpressure{QueueDepth: 7, Ratio: 0.5})
	for range 200 {
		f := tab.refusal(9, 1, 1200*time.Millisecond)
		ms := f.GetError().GetRetryAfterMs()
		if ms < 1200 || ms > 1500 || f.GetRequestId() != 9 || f.GetError().GetCode() != leveev2.ErrorCode_ERROR_CODE_BUSY {
			t.Fatalf("refusal %v", f)
		}
		if bp := f.GetBackpressure(); bp.GetQueueDepth() != 7 || bp.GetRatio() != 0.5 || bp.GetRetryAfterMs() != ms {
			t.Fatalf("backpressure %v", bp)
		}
	}
	if f := tab.refusal(1, 1, 100*time.Microsecond); f.GetError().GetRetryAfterMs() != 1 {
		t.Fatalf("a sub-millisecond cooling: retry_after_ms = %d, want 1", f.GetError().GetRetryAfterMs())
	}
}

// BenchmarkLogicCoolingCheck is the check every request pays with
// -logic-pushback on, with the wall clock: on a shard never refused, on a
// shard cooling (the refusal answered by the gate), and on one whose
// cooling has ended.
func BenchmarkLogicCoolingCheck(b *testing.B) {
	tab := newCoolingTable(8)
	clk := clock.Real{}
	tab.cool(1, kindOther, priority.Default, clk.Now(), time.Hour)
	tab.cool(2, kindOther, priority.Default, clk.Now().Add(-time.Hour), time.Second)
	for name, s := range map[string]int{"idle": 0, "cooling": 1, "ended": 2} {
		b.Run(name, func(b *testing.B) {
			want := s == 1
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := tab.cooling(s, kindOther, priority.Default, clk); ok != want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}
