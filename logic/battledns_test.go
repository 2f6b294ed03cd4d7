package logic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// fakeResolver answers lookups with what the test set, and records when
// (on its fake clock) each lookup happened.
type fakeResolver struct {
	clk *clock.Fake

	mu  sync.Mutex
	ips []string
	err error
	at  []time.Time
}

func (r *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, r.clk.Now())
	return slices.Clone(r.ips), r.err
}

// answer makes the next lookups return ips, or fail with err.
func (r *fakeResolver) answer(err error, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ips, r.err = ips, err
}

func (r *fakeResolver) lookups() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.at)
}

// sharedPortBattles serves each of fs on its own loopback address
// (127.0.0.1, 127.0.0.2, ...) on one port, as a headless Service's pods
// share theirs, until the test ends. It returns the addresses' IPs, the
// port, and one more IP on which nothing listens.
func sharedPortBattles(t *testing.T, fs ...*fakeBattle) ([]string, string, string) {
	t.Helper()
	for range 20 {
		lis0, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(lis0.Addr().String())
		liss := []net.Listener{lis0}
		for i := 2; i <= len(fs); i++ {
			l, err := net.Listen("tcp", net.JoinHostPort(fmt.Sprintf("127.0.0.%d", i), port))
			if err != nil {
				break
			}
			liss = append(liss, l)
		}
		if len(liss) < len(fs) { // the port was taken elsewhere: another
			for _, l := range liss {
				l.Close()
			}
			continue
		}
		var ips []string
		for i, f := range fs {
			srv := grpc.NewServer()
			leveev2.RegisterJobsServer(srv, f)
			go srv.Serve(liss[i])
			t.Cleanup(srv.Stop)
			ips = append(ips, fmt.Sprintf("127.0.0.%d", i+1))
		}
		return ips, port, fmt.Sprintf("127.0.0.%d", len(fs)+1)
	}
	t.Fatal("no port free on every loopback address")
	return nil, "", ""
}

const testResolveInterval = 10 * time.Second

// discoveryClient is a battle client (no pushback, no retries) that
// follows r's answers for "battle" on port, on clk, once its loop waits
// for the interval.
func discoveryClient(t *testing.T, r *fakeResolver, clk *clock.Fake, port string) (*battleClient, *tierMetrics) {
	t.Helper()
	m := newMetrics(prometheus.NewRegistry())
	c := newBattleClient(grpcdial.Insecure(), 5*time.Second, nil, false, clk, m)
	c.discover(battleDiscovery{host: "battle", port: port, resolver: r, interval: testResolveInterval, clk: clk})
	t.Cleanup(func() { _ = c.close() })
	testwait.Until(t, "the resolve loop to wait for its interval", func() bool { return clk.Waiters() == 1 })
	return c, m
}

// nextInterval moves clk a resolve interval on and waits until the loop
// has looked up and applied the answer and waits again.
func nextInterval(t *testing.T, r *fakeResolver, clk *clock.Fake) {
	t.Helper()
	n := len(r.lookups())
	clk.Advance(testResolveInterval)
	testwait.Until(t, "a lookup after the interval", func() bool { return len(r.lookups()) > n && clk.Waiters() == 1 })
}

// addrsOf is the current set's addresses.
func addrsOf(c *battleClient) []string {
	var out []string
	for _, in := range c.insts() {
		out = append(out, in.addr)
	}
	return out
}

func wantAddrs(t *testing.T, c *battleClient, want ...string) {
	t.Helper()
	if got := addrsOf(c); !slices.Equal(got, want) {
		t.Fatalf("instances %v, want %v", got, want)
	}
}

func battleCall(t *testing.T, c *battleClient) error {
	t.Helper()
	req := simulateRequest(newPlayer("alice"), &arenapb.StartBattleRequest{BattleId: "b", Units: 1, Ticks: 1})
	_, _, err := c.Run(ctxT(t), arena.JobSimulate, "b", req, priority.Default)
	return err
}

// A new address in DNS becomes an instance (connection, limit series) and
// takes its share of the calls.
func TestDiscoveryAddsInstances(t *testing.T) {
	f1, f2 := &fakeBattle{}, &fakeBattle{}
	ips, port, _ := sharedPortBattles(t, f1, f2)
	clk := clock.NewFake(epoch)
	r := &fakeResolver{clk: clk}
	r.answer(nil, ips[0])
	c, m := discoveryClient(t, r, clk, port)
	a1, a2 := net.JoinHostPort(ips[0], port), net.JoinHostPort(ips[1], port)
	wantAddrs(t, c, a1)
	for range 2 {
		if err := battleCall(t, c); err != nil {
			t.Fatal(err)
		}
	}
	if f1.calls.Load() != 2 || f2.calls.Load() != 0 {
		t.Fatalf("calls: f1 %d, f2 %d; want 2 and 0", f1.calls.Load(), f2.calls.Load())
	}

	r.answer(nil, ips[1], ips[0]) // in any order
	nextInterval(t, r, clk)
	wantAddrs(t, c, a1, a2)
	for range 4 {
		if err := battleCall(t, c); err != nil {
			t.Fatal(err)
		}
	}
	if f1.calls.Load() != 4 || f2.calls.Load() != 2 {
		t.Fatalf("calls: f1 %d, f2 %d; want 4 and 2 (round robin over both)", f1.calls.Load(), f2.calls.Load())
	}
	if got := testutil.ToFloat64(m.battleInstances); got != 2 {
		t.Fatalf("logic_battle_instances = %v, want 2", got)
	}
	if got := testutil.CollectAndCount(m.battleLimit); got != 2 {
		t.Fatalf("logic_battle_limit series = %d, want 2", got)
	}
	if got := testutil.ToFloat64(m.battleResolves.WithLabelValues(resolveOK)); got != 2 {
		t.Fatalf("logic_battle_resolve_total{ok} = %v, want 2", got)
	}
}

// An address gone from DNS gets no new call at once, but its call in
// flight completes, and only then is its connection closed.
func TestDiscoveryRemovesInstanceAfterItsCalls(t *testing.T) {
	f1, f2 := &fakeBattle{}, &fakeBattle{}
	ips, port, _ := sharedPortBattles(t, f1, f2)
	clk := clock.NewFake(epoch)
	r := &fakeResolver{clk: clk}
	r.answer(nil, ips...)
	c, m := discoveryClient(t, r, clk, port)
	if err := battleCall(t, c); err != nil { // round robin: f1
		t.Fatal(err)
	}
	gone := c.insts()[1]
	release := f2.hold()
	inflight := make(chan error, 1)
	go func() { inflight <- battleCall(t, c) }() // f2, held there
	testwait.Until(t, "the call to reach f2", func() bool { return f2.calls.Load() == 1 })

	r.answer(nil, ips[0])
	nextInterval(t, r, clk)
	wantAddrs(t, c, net.JoinHostPort(ips[0], port))
	for range 3 {
		if err := battleCall(t, c); err != nil {
			t.Fatal(err)
		}
	}
	if f1.calls.Load() != 4 || f2.calls.Load() != 1 {
		t.Fatalf("calls: f1 %d, f2 %d; want 4 and 1 (no new call to the removed one)", f1.calls.Load(), f2.calls.Load())
	}
	if s := gone.conn.GetState(); s == connectivity.Shutdown {
		t.Fatal("the removed instance's connection was closed under its call in flight")
	}
	if got := testutil.CollectAndCount(m.battleLimit); got != 1 {
		t.Fatalf("logic_battle_limit series = %d, want the removed one's gone", got)
	}

	close(release)
	if err := <-inflight; err != nil {
		t.Fatalf("the call in flight on the removed instance: %v", err)
	}
	testwait.Until(t, "the removed instance's connection to close", func() bool { return gone.conn.GetState() == connectivity.Shutdown })
}

// A failed lookup or an empty answer keeps the last known instances.
func TestDiscoveryKeepsInstancesOnLookupTrouble(t *testing.T) {
	f1, f2 := &fakeBattle{}, &fakeBattle{}
	ips, port, _ := sharedPortBattles(t, f1, f2)
	clk := clock.NewFake(epoch)
	r := &fakeResolver{clk: clk}
	r.answer(nil, ips...)
	c, m := discoveryClient(t, r, clk, port)
	a1, a2 := net.JoinHostPort(ips[0], port), net.JoinHostPort(ips[1], port)

	r.answer(&net.DNSError{Err: "server misbehaving", Name: "battle", IsTemporary: true})
	nextInterval(t, r, clk)
	wantAddrs(t, c, a1, a2)
	r.answer(nil) // no address
	nextInterval(t, r, clk)
	wantAddrs(t, c, a1, a2)
	for _, res := range []string{resolveOK, resolveError, resolveEmpty} {
		if got := testutil.ToFloat64(m.battleResolves.WithLabelValues(res)); got != 1 {
			t.Errorf("logic_battle_resolve_total{%s} = %v, want 1", res, got)
		}
	}
	for range 2 {
		if err := battleCall(t, c); err != nil {
			t.Fatal(err)
		}
	}
	if f1.calls.Load() != 1 || f2.calls.Load() != 1 {
		t.Fatalf("calls: f1 %d, f2 %d; want both still called", f1.calls.Load(), f2.calls.Load())
	}
}

// advanceUntil moves clk on by step until cond holds (with a deadline),
// and returns how far it moved.
func advanceUntil(t *testing.T, clk *clock.Fake, step time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := clk.Now()
	testwait.Until(t, what, func() bool {
		if cond() {
			return true
		}
		clk.Advance(step)
		return false
	})
	return clk.Now().Sub(start)
}

// A call to an address that cannot be reached (a battle pod that went
// away) asks for a lookup well before the interval, and the lookups stay
// at least minResolveGap apart however often they are asked for.
func TestDiscoveryResolvesEarlyAfterAFailure(t *testing.T) {
	f1, f2 := &fakeBattle{}, &fakeBattle{}
	ips, port, dead := sharedPortBattles(t, f1, f2)
	clk := clock.NewFake(epoch)
	r := &fakeResolver{clk: clk}
	r.answer(nil, ips[0], dead)
	c, _ := discoveryClient(t, r, clk, port)
	if err := battleCall(t, c); err != nil { // f1
		t.Fatal(err)
	}
	if err := battleCall(t, c); !errors.Is(err, apperr.ErrUnavailable) { // dead
		t.Fatalf("call to the dead address: %v, want unavailable", err)
	}
	r.answer(nil, ips...) // its successor
	a2 := net.JoinHostPort(ips[1], port)
	moved := advanceUntil(t, clk, 10*time.Millisecond, "the successor to join", func() bool { return slices.Contains(addrsOf(c), a2) })
	if moved >= testResolveInterval/2 {
		t.Fatalf("the lookup came %v after the failure; want an early one (about %v)", moved, minResolveGap)
	}
	wantAddrs(t, c, net.JoinHostPort(ips[0], port), a2)

	// Asked again at once, twice: one lookup, a gap after the last.
	n := len(r.lookups())
	c.kick()
	c.kick()
	advanceUntil(t, clk, 10*time.Millisecond, "the kicked lookup", func() bool { return len(r.lookups()) > n })
	at := r.lookups()
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < minResolveGap {
			t.Fatalf("lookups %d and %d %v apart, want >= %v (all: %v)", i-1, i, gap, minResolveGap, at)
		}
	}
	if gap := at[len(at)-1].Sub(at[len(at)-2]); gap >= testResolveInterval/2 {
		t.Fatalf("the kicked lookup came %v after the last; want an early one", gap)
	}
}

// With no address known at the start (DNS not ready yet), a call fails
// UNAVAILABLE at once without an RPC and asks for a lookup, which brings
// the instances in.
func TestDiscoveryStartsEmpty(t *testing.T) {
	f1 := &fakeBattle{}
	ips, port, _ := sharedPortBattles(t, f1)
	clk := clock.NewFake(epoch)
	r := &fakeResolver{clk: clk}
	r.answer(errors.New("no such host"))
	c, _ := discoveryClient(t, r, clk, port)
	wantAddrs(t, c)
	if _, all := c.allCooling(clk.Now()); all {
		t.Fatal("no instance counts as every instance cooling")
	}
	if err := battleCall(t, c); !errors.Is(err, apperr.ErrUnavailable) {
		t.Fatalf("call with no instance: %v, want unavailable", err)
	}
	r.answer(nil, ips...)
	moved := advanceUntil(t, clk, 10*time.Millisecond, "the first instance", func() bool { return len(c.insts()) == 1 })
	if moved >= testResolveInterval/2 {
		t.Fatalf("the lookup came %v after the failed call; want an early one", moved)
	}
	if err := battleCall(t, c); err != nil || f1.calls.Load() != 1 {
		t.Fatalf("call: %v, f1 calls %d", err, f1.calls.Load())
	}
}

// Calls running while the set changes under them all succeed: an instance
// removed mid-call keeps its connection until its calls end, and a call
// that picked it just as it was removed picks again from the new set.
func TestDiscoveryChangesUnderConcurrentCalls(t *testing.T) {
	f1, f2 := &fakeBattle{}, &fakeBattle{}
	ips, port, _ := sharedPortBattles(t, f1, f2)
	clk := clock.NewFake(epoch)
	r := &fakeResolver{clk: clk}
	r.answer(nil, ips...)
	c, _ := discoveryClient(t, r, clk, port)
	both := []string{net.JoinHostPort(ips[0], port), net.JoinHostPort(ips[1], port)}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := simulateRequest(newPlayer("alice"), &arenapb.StartBattleRequest{BattleId: "b", Units: 1, Ticks: 1})
	callCtx := ctxT(t)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, _, err := c.Run(callCtx, arena.JobSimulate, "b", req, priority.Default); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// The resolve loop is idle (the fake clock stands still and nothing
	// fails), so the test may be the set's one writer.
	for i := range 40 {
		c.apply(ctx, both[:1+i%2]) // f1 alone, then both, ...
		calls := f1.calls.Load() + f2.calls.Load()
		testwait.Until(t, "calls on the new set", func() bool { return f1.calls.Load()+f2.calls.Load() > calls+8 })
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call failed while the set changed: %v", err)
	}
	if f2.calls.Load() == 0 {
		t.Fatal("f2 never called")
	}
}
