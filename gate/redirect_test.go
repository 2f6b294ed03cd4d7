package gate

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// ownerConns is how many owner connections p holds.
func (p *logicPool) ownerConns() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.dialed)
}

// cachedOwner is shard's cached owner's address, "" when it has none.
func (p *logicPool) cachedOwner(shard int) string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if o := p.owners[shard]; o != nil {
		return o.addr
	}
	return ""
}

// redirectTo makes f answer every request NotOwner(shard, owner's address).
func redirectTo(f *fakeLogic, shard int, owner *fakeLogic) {
	f.setHandle(func(context.Context, *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		return nil, apperr.NotOwner(shard, owner.addr)
	})
}

// countOf is how many of f's requests had id (0: logins).
func countOf(f *fakeLogic, id uint64) int {
	n := 0
	for _, r := range f.requests() {
		if r.GetRequestId() == id {
			n++
		}
	}
	return n
}

// cachedAtB starts a gate whose one entry point A redirects alice's shard
// to B, and connects alice: her login was served by B, now the shard's
// cached owner.
func cachedAtB(t *testing.T) (a, b *fakeLogic, g *testGate, c *client, shard int) {
	t.Helper()
	a, b = startFakeLogic(t), startFakeLogic(t)
	g = startGate(t, nil, a)
	shard = g.logic.shardOf("alice")
	redirectTo(a, shard, b)
	c, _ = g.connect(t, "alice", wire.ProtoSubprotocol)
	return a, b, g, c, shard
}

// A shard served by B, asked at the entry point A: A's redirect is
// followed (the request, not executed by A, is served once, by B) and the
// owner is cached, so the next request goes to B directly.
func TestRedirectFollowedAndCached(t *testing.T) {
	a, b := startFakeLogic(t), startFakeLogic(t)
	g := startGate(t, nil, a) // A is the only entry point
	shard := g.logic.shardOf("alice")
	redirectTo(a, shard, b)

	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol) // the login: A, then B
	if len(a.requests()) != 1 || len(b.requests()) != 1 {
		t.Fatalf("login: A saw %d, B saw %d requests; want 1 and 1", len(a.requests()), len(b.requests()))
	}
	if got := g.logic.cachedOwner(shard); got != b.addr {
		t.Fatalf("cached owner %q, want B %s", got, b.addr)
	}
	c.send(profileFrame(1))
	if f := c.recv(); f.GetRequestId() != 1 || !isProfile(f) {
		t.Fatalf("want the profile from B, got %v", f)
	}
	if countOf(a, 1) != 0 || countOf(b, 1) != 1 {
		t.Fatalf("request 1: A saw it %d times, B %d; want 0 and 1 (the cache)", countOf(a, 1), countOf(b, 1))
	}
	if got := testutil.ToFloat64(g.m.redirectFollowed); got != 1 {
		t.Errorf("gate_logic_redirects_total{followed} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(g.m.ownerCache); got != 1 {
		t.Errorf("gate_logic_owner_cache_size = %v, want 1", got)
	}
	// The player of another shard still goes to its entry point.
	other := playerNotOn(t, g, shard)
	a.setHandle(nil)
	if _, w := g.connect(t, other, wire.ProtoSubprotocol); w.GetPlayerId() != other || countOf(a, 0) != 2 {
		t.Fatalf("%s's login: welcome %v, A saw %d logins; want it served by A", other, w, countOf(a, 0))
	}
	g.stop(t) // closes the owner connections too
	if n := g.logic.ownerConns(); n != 0 {
		t.Fatalf("%d owner connections left open after the gate stopped", n)
	}
}

// Owners that point at each other: the request is refused BUSY (not
// executed) with a retry_after after maxRedirects hops, and the cache
// entry is dropped.
func TestRedirectLoopEndsTyped(t *testing.T) {
	a, b := startFakeLogic(t), startFakeLogic(t)
	g := startGate(t, nil, a)
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol) // served by A
	shard := g.logic.shardOf("alice")
	redirectTo(a, shard, b)
	redirectTo(b, shard, a)

	c.send(profileFrame(1))
	e := wantError(t, c.recv(), 1, leveev2.ErrorCode_ERROR_CODE_BUSY)
	if e.GetRetryAfterMs() != uint32(redirectRetryAfter.Milliseconds()) {
		t.Errorf("retry_after_ms = %d, want %d", e.GetRetryAfterMs(), redirectRetryAfter.Milliseconds())
	}
	// A (entry) -> B -> A -> B: the first call and maxRedirects hops.
	if na, nb := countOf(a, 1), countOf(b, 1); na+nb != maxRedirects+1 || na != 2 || nb != 2 {
		t.Fatalf("request 1: A saw it %d times, B %d; want 2 and 2", na, nb)
	}
	if got := testutil.ToFloat64(g.m.redirectFollowed); got != maxRedirects {
		t.Errorf("gate_logic_redirects_total{followed} = %v, want %d", got, maxRedirects)
	}
	if got := testutil.ToFloat64(g.m.redirectTooMany); got != 1 {
		t.Errorf("gate_logic_redirects_total{too_many_hops} = %v, want 1", got)
	}
	if got := g.logic.cachedOwner(shard); got != "" {
		t.Errorf("cached owner %q after the loop, want none", got)
	}
	// The map settles (B serves): the same request, sent again, is served.
	b.setHandle(nil)
	c.send(profileFrame(1))
	if f := c.recv(); f.GetRequestId() != 1 || !isProfile(f) {
		t.Fatalf("want the profile once B serves, got %v", f)
	}
}

// A shard without an owner (in a move): logic's NoOwner reaches the player
// as UNAVAILABLE with logic's retry_after_ms, and the owner that said it is
// forgotten: the next request starts from the entry point.
func TestNoOwnerIsUnavailableWithRetry(t *testing.T) {
	a, b, g, c, shard := cachedAtB(t)
	b.setHandle(func(ctx context.Context, _ *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		return nil, apperr.NoOwner(ctx, shard, 700*time.Millisecond)
	})

	c.send(profileFrame(1))
	e := wantError(t, c.recv(), 1, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE)
	if e.GetRetryAfterMs() != 700 {
		t.Errorf("retry_after_ms = %d, want 700", e.GetRetryAfterMs())
	}
	if countOf(a, 1) != 0 || countOf(b, 1) != 1 {
		t.Fatalf("request 1: A saw it %d times, B %d; want 0 and 1", countOf(a, 1), countOf(b, 1))
	}
	if got := g.logic.cachedOwner(shard); got != "" {
		t.Fatalf("cached owner %q after UNAVAILABLE, want none", got)
	}
	a.setHandle(nil) // the shard landed on A
	c.send(profileFrame(2))
	if f := c.recv(); f.GetRequestId() != 2 || !isProfile(f) || countOf(a, 2) != 1 {
		t.Fatalf("want request 2 served by the entry point A, got %v (A saw it %d times)", f, countOf(a, 2))
	}
}

// The cached owner dies: the requests caught by it are refused (UNAVAILABLE
// or, not sent, BUSY), its cache entry is dropped, and the next request
// goes to the entry point, which serves the shard now.
func TestDeadOwnerForgotten(t *testing.T) {
	a, b, g, c, shard := cachedAtB(t)
	b.stop()
	a.setHandle(nil) // A took the shard over

	id := uint64(0)
	testwait.Until(t, "a request served by the entry point", func() bool {
		id++
		c.send(profileFrame(id))
		f := c.recv()
		if isProfile(f) {
			return true
		}
		if code := f.GetError().GetCode(); code != leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE && code != leveev2.ErrorCode_ERROR_CODE_BUSY {
			t.Fatalf("while the owner is gone: %v", f)
		}
		return false
	})
	if countOf(a, id) != 1 {
		t.Fatalf("request %d: A saw it %d times, want 1", id, countOf(a, id))
	}
	if id > 2 {
		t.Errorf("%d requests until the entry point served one; want the first one refused at most", id)
	}
	if got := g.logic.cachedOwner(shard); got != "" {
		t.Errorf("cached owner %q, want none", got)
	}
	if got := testutil.ToFloat64(g.m.ownerCache); got != 0 {
		t.Errorf("gate_logic_owner_cache_size = %v, want 0", got)
	}
}

// A cached owner that lets a request run out of its budget (a frozen
// process, whose connection stays up) is forgotten too: the request is
// answered DEADLINE_EXCEEDED, and the next goes to the entry point, which
// knows where the shard went once the frozen process's leases ran out.
func TestFrozenOwnerForgotten(t *testing.T) {
	a, b, g, c, shard := cachedAtB(t)
	b.setHandle(func(ctx context.Context, _ *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		<-ctx.Done() // frozen: never answers
		return nil, ctx.Err()
	})

	f := profileFrame(1)
	f.TimeoutMs = 200
	c.send(f)
	wantError(t, c.recv(), 1, leveev2.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED)
	if got := g.logic.cachedOwner(shard); got != "" {
		t.Fatalf("cached owner %q after DEADLINE_EXCEEDED, want none", got)
	}
	a.setHandle(nil) // the shard landed on A
	c.send(profileFrame(2))
	if f := c.recv(); f.GetRequestId() != 2 || !isProfile(f) || countOf(a, 2) != 1 || countOf(b, 2) != 0 {
		t.Fatalf("want request 2 served by the entry point A, got %v (A saw it %d times, B %d)", f, countOf(a, 2), countOf(b, 2))
	}
}

// A cached owner whose connection is failing is dropped by route itself:
// the request goes to the entry point without being tried on it.
func TestPoolDropsFailingOwner(t *testing.T) {
	entry := startFakeLogic(t)
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
	p, err := newLogicPool(grpcdial.Insecure(), []string{entry.addr}, 4, gauge)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.close() }()
	dead := deadAddr(t)
	o, err := p.follow(2, 2, dead)
	if err != nil {
		t.Fatal(err)
	}
	if p.route(2) != o || testutil.ToFloat64(gauge) != 1 {
		t.Fatalf("route(2) is not the cached owner (gauge %v)", testutil.ToFloat64(gauge))
	}
	o.cc.Connect()
	testwait.Until(t, "the dead owner's connection to fail", o.failing)
	if got := p.route(2); got != p.entries[0] {
		t.Fatalf("route(2) = %s, want the entry point", got.addr)
	}
	if p.cachedOwner(2) != "" || testutil.ToFloat64(gauge) != 0 {
		t.Fatalf("the failing owner is still cached (gauge %v)", testutil.ToFloat64(gauge))
	}
	if p.unreachable(2) {
		t.Fatal("unreachable(2) with a healthy entry point")
	}
}

// The pool dials at most maxOwnerConns owner connections, closing the
// least recently used unreferenced ones first; the entry points' address
// reuses the entry connection; close closes them all.
func TestPoolOwnerConnsBounded(t *testing.T) {
	entry := startFakeLogic(t)
	const shards = 8
	p, err := newLogicPool(grpcdial.Insecure(), []string{entry.addr}, shards, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := p.follow(0, 0, entry.addr); err != nil || c != p.entries[0] || p.ownerConns() != 0 {
		t.Fatalf("following to the entry point: %v, %v, %d dialed; want the entry connection", c, err, p.ownerConns())
	}
	for i := range maxOwnerConns + 10 {
		if _, err := p.follow(i%shards, i%shards, fmt.Sprintf("10.9.%d.%d:9000", i/250, i%250)); err != nil {
			t.Fatal(err)
		}
		if n := p.ownerConns(); n > maxOwnerConns {
			t.Fatalf("%d owner connections, want at most %d", n, maxOwnerConns)
		}
	}
	// Every shard's cached owner is the last it was told of, still open.
	for s := range shards {
		last := (maxOwnerConns+10-1-s)/shards*shards + s // the last i with i%shards == s
		want := fmt.Sprintf("10.9.%d.%d:9000", last/250, last%250)
		if got := p.cachedOwner(s); got != want {
			t.Errorf("shard %d: cached owner %q, want %q", s, got, want)
		}
		if p.dialed[want] == nil {
			t.Errorf("shard %d's owner %s was closed", s, want)
		}
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	if p.ownerConns() != 0 || p.nCached.Load() != 0 {
		t.Fatalf("after close: %d owner connections, %d cached", p.ownerConns(), p.nCached.Load())
	}
	if _, err := p.follow(1, 1, "10.9.9.9:9000"); err == nil {
		t.Fatal("follow after close succeeded")
	}
}

// playerNotOn is a player id whose shard is not shard.
func playerNotOn(t *testing.T, g *testGate, shard int) string {
	t.Helper()
	for i := range 1000 {
		if id := fmt.Sprintf("p%d", i); g.logic.shardOf(id) != shard {
			return id
		}
	}
	t.Fatal("every player is on one shard")
	return ""
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

// A failing entry point strands its shards only while logic has never
// redirected (bbolt: the entry is the shard's only host, and the request
// is refused unreachable). Once logic redirects, the entry points are
// interchangeable and the shard enters by the next one that is not failing.
func TestPoolEntersByALiveEntryOnceLogicRedirects(t *testing.T) {
	live := startFakeLogic(t)
	dead := deadAddr(t)
	// Entry 0 is dead, entry 1 live: shard 0's entry point is entry 0.
	p, err := newLogicPool(grpcdial.Insecure(), []string{dead, live.addr}, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.close() }()
	p.entries[0].cc.Connect()
	testwait.Until(t, "the dead entry point's connection to fail", p.entries[0].failing)
	if !p.unreachable(0) || p.route(0) != p.entries[0] {
		t.Fatal("before any redirect, shard 0 left its own (dead) entry point: bbolt would route to a process that does not host it")
	}
	// Logic redirects once (for another shard, 1, to the live process).
	if _, err := p.follow(1, 1, live.addr); err != nil {
		t.Fatal(err)
	}
	if got := p.route(0); got != p.entries[1] {
		t.Fatalf("route(0) = %s after logic redirected, want the live entry point %s", got.addr, live.addr)
	}
	if p.unreachable(0) {
		t.Fatal("shard 0 still unreachable with a live entry point")
	}
}
