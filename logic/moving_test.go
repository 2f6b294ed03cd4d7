package logic

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/pgtest"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Shards that move between logic processes on one PostgreSQL database
// (-store=postgres): short leases keep these tests fast.
const (
	movingShards = 16
	testTTL      = 1500 * time.Millisecond
	testRenew    = 300 * time.Millisecond
)

// startPG runs a logic server on the database at url that serves the shards
// whose leases it holds.
func startPG(t *testing.T, url string, battle *fakeBattle) *env {
	t.Helper()
	return start(t, envOpts{battle: battle, shared: true, cfg: func(c *Config) {
		c.Store, c.PostgresURL, c.DataDir = StorePostgres, url, ""
		c.Shards = movingShards
		c.LeaseTTL, c.LeaseRenew = testTTL, testRenew
	}})
}

// twoSettled starts two servers on a fresh database, waits until they
// have split the shards, and returns them with a shard the first holds.
func twoSettled(t *testing.T) (battle *fakeBattle, a, b *env, shard int) {
	t.Helper()
	url := pgtest.Database(t)
	battle = &fakeBattle{}
	a = startPG(t, url, battle)
	b = startPG(t, url, battle)
	testwait.UntilWithin(t, 20*time.Second, "the shards split between the two", func() bool { return settled(a, b) })
	for s, h := range holders(a, b) {
		if h[0] == 0 {
			return battle, a, b, s
		}
	}
	t.Fatal("the first server holds no shard")
	return nil, nil, nil, -1
}

// holders is, per shard, the servers of es that hold its lease (by index).
func holders(es ...*env) [][]int {
	out := make([][]int, movingShards)
	for s := range out {
		for i, e := range es {
			if _, ok := e.srv.mgr.Holds(s); ok && e.srv.shards[s].Load() != nil {
				out[s] = append(out[s], i)
			}
		}
	}
	return out
}

// settled says whether every shard is served by exactly one of es, each of
// es serves at least one, and every one's lease map names the server.
func settled(es ...*env) bool {
	count := make([]int, len(es))
	for s, h := range holders(es...) {
		if len(h) != 1 {
			return false
		}
		count[h[0]]++
		want := es[h[0]].srv.cfg.AdvertiseAddr
		for _, e := range es {
			if addr, ok := e.srv.mgr.Owner(s); !ok || addr != want {
				return false
			}
		}
	}
	for _, n := range count {
		if n == 0 {
			return false
		}
	}
	return true
}

// owner is the server of es that serves shard.
func owner(t *testing.T, shard int, es ...*env) *env {
	t.Helper()
	h := holders(es...)[shard]
	if len(h) != 1 {
		t.Fatalf("shard %d served by %v", shard, h)
	}
	return es[h[0]]
}

// playerOn is a player id on shard.
func playerOn(shard int, prefix string) string {
	for i := 0; ; i++ {
		id := fmt.Sprintf("%s%d", prefix, i)
		if shardmap.Shard(id, movingShards) == shard {
			return id
		}
	}
}

// router is a tiny gate: it sends a request to the owner it has cached for
// the player's shard, else to an entry point (round robin); it follows a
// NotOwner refusal to the owner it names, and sends a request refused
// UNAVAILABLE (no owner while the shard moves, the owner's lease lost in
// the commit, or an entry point gone) again after its retry_after, with
// the same request id, until its context ends. So each request gets
// exactly one final answer.
type router struct {
	t         *testing.T
	mu        sync.Mutex
	entries   []string
	next      int
	owners    map[int]string
	conns     map[string]*grpc.ClientConn
	redirects atomic.Int64
	retries   atomic.Int64
}

func newRouter(t *testing.T, entries ...*env) *router {
	r := &router{t: t, owners: map[int]string{}, conns: map[string]*grpc.ClientConn{}}
	for _, e := range entries {
		r.entries = append(r.entries, e.srv.GRPCAddr().String())
	}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.conns {
			c.Close()
		}
	})
	return r
}

// setEntries replaces the entry points (a crashed server leaves them).
func (r *router) setEntries(es ...*env) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = r.entries[:0]
	for _, e := range es {
		r.entries = append(r.entries, e.srv.GRPCAddr().String())
	}
}

func (r *router) client(shard int) (string, leveev2.LogicClient) {
	r.mu.Lock()
	defer r.mu.Unlock()
	addr, ok := r.owners[shard]
	if !ok {
		addr = r.entries[r.next%len(r.entries)]
		r.next++
	}
	c := r.conns[addr]
	if c == nil {
		var err error
		if c, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			r.t.Errorf("dial %s: %v", addr, err)
			return addr, nil
		}
		r.conns[addr] = c
	}
	return addr, leveev2.NewLogicClient(c)
}

func (r *router) forget(shard int, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owners[shard] == addr {
		delete(r.owners, shard)
	}
}

func (r *router) do(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
	shard := shardmap.Shard(req.GetPlayerId(), movingShards)
	for {
		addr, cli := r.client(shard)
		if cli == nil {
			return nil, errors.New("no client")
		}
		rep, err := cli.Do(ctx, req)
		if err == nil {
			return rep, nil
		}
		if s, owner, ok := apperr.OwnerOf(err); ok {
			if s != shard {
				return nil, fmt.Errorf("redirect for shard %d, asked about %d: %w", s, shard, err)
			}
			r.redirects.Add(1)
			r.mu.Lock()
			r.owners[shard] = owner
			r.mu.Unlock()
			continue
		}
		if status.Code(err) != codes.Unavailable {
			return nil, err
		}
		r.retries.Add(1)
		r.forget(shard, addr)
		wait := 50 * time.Millisecond // an entry point that is gone: try the next at once, nearly
		if e := apperr.FromStatus(err); e.RetryAfter > 0 {
			wait = e.RetryAfter
		}
		timer := time.NewTimer(wait) // the protocol's retry_after, not a test's wait
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		}
	}
}

// stream runs a mutation stream through r from workers goroutines: each
// takes a new player (prefix and a number), logs it in and buys it
// perPlayer potions (request ids 10, 11, ...), until more says stop (asked
// before each new player) or the budget ends. It calls acked after each
// acknowledged purchase (a reply with the purchase, replayed or not) and
// returns how many each player got acknowledged.
func stream(t *testing.T, r *router, prefix string, workers, perPlayer int, more func(players int) bool, acked func()) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	got := map[string]int{}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if !more(i) {
					return
				}
				p := fmt.Sprintf("%s%d", prefix, i)
				if rep, err := r.do(ctx, loginReq(p)); err != nil || view(rep).GetWelcome() == nil {
					t.Errorf("login %s: %v %v", p, rep, err)
					return
				}
				mu.Lock()
				got[p] = 0
				mu.Unlock()
				for k := range perPlayer {
					rep, err := r.do(ctx, buyReq(p, uint64(10+k), "potion", 1))
					if err != nil || view(rep).GetBuyItem() == nil {
						t.Errorf("%s purchase %d: %v %v", p, k, rep, err)
						return
					}
					mu.Lock()
					got[p]++
					mu.Unlock()
					if acked != nil {
						acked()
					}
				}
			}
		})
	}
	wg.Wait()
	return got
}

// players is a stream's stop rule: n players.
func players(n int) func(int) bool { return func(i int) bool { return i < n } }

// checkPurchases checks every player's state through r: exactly the
// acknowledged purchases applied (perPlayer each), none twice, none lost.
func checkPurchases(t *testing.T, r *router, acked map[string]int, perPlayer int) {
	t.Helper()
	if len(acked) == 0 {
		t.Fatal("no player in the stream")
	}
	for p, k := range acked {
		if k != perPlayer {
			t.Errorf("%s: %d of %d purchases acknowledged", p, k, perPlayer)
		}
		rep, err := r.do(ctxT(t), profileReq(p, ""))
		if err != nil {
			t.Fatalf("profile %s: %v", p, err)
		}
		pl := view(rep).GetProfile().GetPlayer()
		if pl.GetGold() != int64(startGold-10*k) || pl.GetInventory()["potion"] != uint32(k) {
			t.Errorf("%s: gold %d, %d potions after %d acknowledged purchases: want %d gold", p, pl.GetGold(), pl.GetInventory()["potion"], k, startGold-10*k)
		}
	}
}

// Two servers on one database split the 16 shards; one asked about a shard
// of the other's refuses, unexecuted, naming the owner; a router that
// follows the refusals gets every request of a stream answered once.
func TestTwoServersSplitTheShards(t *testing.T) {
	url := pgtest.Database(t)
	battle := &fakeBattle{}
	a := startPG(t, url, battle)
	b := startPG(t, url, battle)
	testwait.UntilWithin(t, 20*time.Second, "the shards split between the two", func() bool { return settled(a, b) })

	for _, c := range []struct{ from, to *env }{{a, b}, {b, a}} {
		shard := -1
		for s, h := range holders(a, b) {
			if h[0] == map[*env]int{a: 0, b: 1}[c.to] {
				shard = s
				break
			}
		}
		p := playerOn(shard, "wrong")
		_, err := c.from.cli.Do(ctxT(t), loginReq(p))
		s, addr, ok := apperr.OwnerOf(err)
		if !ok || s != shard || addr != c.to.srv.cfg.AdvertiseAddr || status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("login of %s (shard %d) at the other server: %v; want NotOwner(%d, %s)", p, shard, err, shard, c.to.srv.cfg.AdvertiseAddr)
		}
		if got := testutil.ToFloat64(c.from.srv.m.notOwner.WithLabelValues(notOwnerRedirect)); got != 1 {
			t.Errorf("logic_not_owner_total{reason=redirect} = %v, want 1", got)
		}
		// Not executed: the owner has never seen the player.
		if r := c.to.call(profileReq(p, "")); r.GetError().GetCode() != leveev2.ErrorCode_ERROR_CODE_NOT_FOUND {
			t.Fatalf("the refused login was executed: %v", r)
		}
	}

	r := newRouter(t, a)
	checkPurchases(t, r, stream(t, r, "split", 4, 3, players(32), nil), 3)
	if r.redirects.Load() == 0 {
		t.Fatal("no request was redirected: the router only ever reached the owner")
	}
}

// A third server joins while a stream of purchases runs: shards move to
// it, and each purchase is acknowledged once and applied once.
func TestScaleOutUnderLoad(t *testing.T) {
	url := pgtest.Database(t)
	battle := &fakeBattle{}
	a := startPG(t, url, battle)
	b := startPG(t, url, battle)
	testwait.UntilWithin(t, 20*time.Second, "the shards split between two", func() bool { return settled(a, b) })
	r := newRouter(t, a, b)

	// The stream runs until the third server has started, the shards
	// have settled among the three, and 100 more purchases went through.
	const perPlayer = 5
	var acks, after atomic.Int64
	var split atomic.Bool
	done := make(chan map[string]int, 1)
	go func() {
		done <- stream(t, r, "scale", 4, perPlayer, func(int) bool { return !split.Load() || acks.Load() < after.Load()+100 }, func() { acks.Add(1) })
	}()
	testwait.UntilWithin(t, 30*time.Second, "100 purchases", func() bool { return acks.Load() >= 100 })
	third := startPG(t, url, battle)
	testwait.UntilWithin(t, 45*time.Second, "the shards split among three", func() bool { return settled(a, b, third) })
	after.Store(acks.Load())
	split.Store(true)
	acked := <-done
	checkPurchases(t, r, acked, perPlayer)
	moved := 0
	for _, h := range holders(a, b, third) {
		if h[0] == 2 {
			moved++
		}
	}
	t.Logf("%d players, %d purchases; %d shards moved to the third server; %d redirects, %d retries", len(acked), acks.Load(), moved, r.redirects.Load(), r.retries.Load())
}

// crash ends e as a killed process would: no hand-off, no goodbye. Its
// gRPC stops at once and its lease manager loses the database, so its
// leases run out (the store's pool is left: its shards simply get no more
// requests).
func crash(e *env) {
	e.srv.grpcSrv.Stop()
	e.srv.leasePool.Close()
}

// A crashed server's shards are served by the others within TTL + 2 ×
// Renew.
func TestCrashedServersShardsMove(t *testing.T) {
	url := pgtest.Database(t)
	battle := &fakeBattle{}
	a := startPG(t, url, battle)
	b := startPG(t, url, battle)
	c := startPG(t, url, battle)
	testwait.UntilWithin(t, 30*time.Second, "the shards split among three", func() bool { return settled(a, b, c) })
	r := newRouter(t, a, b, c)
	before := stream(t, r, "before", 3, 2, players(16), nil)
	checkPurchases(t, r, before, 2)

	began := time.Now()
	crash(a)
	r.setEntries(b, c)
	bound := testTTL + 2*testRenew
	// The bound plus a scheduling allowance for a loaded 2-core machine
	// under -race; the measured time is logged.
	testwait.UntilWithin(t, bound+time.Second, "the others to serve every shard", func() bool { return settled(b, c) })
	took := time.Since(began)
	t.Logf("every shard served again %v after the crash (bound %v)", took.Round(time.Millisecond), bound)
	checkPurchases(t, r, before, 2) // the crashed server's players too, from the database
	checkPurchases(t, r, stream(t, r, "after", 3, 2, players(32), nil), 2)
}

// The fence: a server whose commit is held while its lease runs out and
// another takes the shard over finds its late commit refused (ErrFenced),
// answers UNAVAILABLE, and the new owner has the mutation at most once.
func TestLateCommitIsFenced(t *testing.T) {
	_, a, b, shard := twoSettled(t)
	p := playerOn(shard, "fenced")
	a.login(p)

	// A takes the purchase and parks before handling it; then it loses
	// the database for its leases (a paused process, as far as the
	// leases go), while its store still answers.
	n := a.gate.parked.Load()
	a.gate.block()
	late := make(chan error, 1)
	go func() {
		_, err := a.cli.Do(ctxT(t), buyReq(p, 7, "potion", 1))
		late <- err
	}()
	testwait.Until(t, "A to take the purchase", func() bool { return a.gate.parked.Load() > n })
	a.srv.leasePool.Close()
	testwait.UntilWithin(t, 20*time.Second, "B to take the shard over", func() bool {
		_, ok := b.srv.mgr.Holds(shard)
		return ok && b.srv.shards[shard].Load() != nil
	})
	a.gate.release()
	err := <-late
	if status.Code(err) != codes.Unavailable || apperr.FromStatus(err).RetryAfter <= 0 {
		t.Fatalf("late commit answered %v; want UNAVAILABLE with a retry_after", err)
	}
	if got := testutil.ToFloat64(a.srv.m.storeErrors.WithLabelValues(storeOpCommit, reasonFenced)); got != 1 {
		t.Fatalf("fenced commits = %v, want 1", got)
	}
	if pl := b.profile(p); pl.GetGold() != startGold || pl.GetInventory()["potion"] != 0 {
		t.Fatalf("the fenced purchase was applied: %v", pl)
	}
	// The resend, to the new owner, is applied once.
	if rb := b.call(buyReq(p, 7, "potion", 1)).GetBuyItem(); rb == nil || rb.GetReplayed() {
		t.Fatalf("resend to the new owner: %v", rb)
	}
	if rb := b.call(buyReq(p, 7, "potion", 1)).GetBuyItem(); rb == nil || !rb.GetReplayed() {
		t.Fatalf("second resend: %v, want a replay", rb)
	}
	if pl := b.profile(p); pl.GetGold() != startGold-arena.Catalog["potion"] || pl.GetInventory()["potion"] != 1 {
		t.Fatalf("after the resends: %v, want one potion", pl)
	}
}

// A server that stops gracefully hands its shards off while it still
// serves: a purchase stream through the router loses and doubles nothing,
// a battle whose job is in flight on a released shard is answered
// UNAVAILABLE with a retry_after (its late result blocks nothing and is
// dropped), and its resend to the new owner is applied once.
func TestGracefulStopHandsShardsOff(t *testing.T) {
	battle, a, b, shard := twoSettled(t)
	p := playerOn(shard, "fighter")
	a.login(p)
	release := battle.hold()
	defer close(release)
	fight := make(chan error, 1)
	go func() {
		_, err := a.cli.Do(ctxT(t), battleReq(p, "b1", 3, 50))
		fight <- err
	}()
	testwait.Until(t, "the battle call", func() bool { return battle.calls.Load() == 1 })

	r := newRouter(t, a, b)
	var acks atomic.Int64
	done := make(chan map[string]int, 1)
	var stopped atomic.Bool
	go func() {
		done <- stream(t, r, "handoff", 3, 3, func(i int) bool { return !stopped.Load() || i < 8 }, func() { acks.Add(1) })
	}()
	testwait.UntilWithin(t, 30*time.Second, "30 purchases", func() bool { return acks.Load() >= 30 })
	if err := a.stop(); err != nil { // the battle's job still held at the battle tier
		t.Fatalf("stop: %v", err)
	}
	stopped.Store(true)
	err := <-fight
	if status.Code(err) != codes.Unavailable || apperr.FromStatus(err).RetryAfter <= 0 {
		t.Fatalf("battle in flight on a released shard: %v; want UNAVAILABLE with a retry_after", err)
	}
	acked := <-done
	testwait.UntilWithin(t, 20*time.Second, "b to serve every shard", func() bool { return settled(b) })
	checkPurchases(t, r, acked, 3)

	battle.gate.Store(nil) // the battle tier answers again
	rb := b.call(battleReq(p, "b1", 3, 50)).GetBattle()
	if rb == nil || rb.GetReplayed() {
		t.Fatalf("the battle resent to the new owner: %v", rb)
	}
	if rb := b.call(battleReq(p, "b1", 3, 50)).GetBattle(); rb == nil || !rb.GetReplayed() {
		t.Fatalf("second resend: %v, want a replay", rb)
	}
	if pl := b.profile(p); pl.GetWins()+pl.GetLosses() != 1 {
		t.Fatalf("battle applied %d times", pl.GetWins()+pl.GetLosses())
	}
	t.Logf("%d players, %d purchases across the hand-off; %d redirects, %d retries", len(acked), acks.Load(), r.redirects.Load(), r.retries.Load())
}
