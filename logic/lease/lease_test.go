package lease

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/pgschema"
	"github.com/leveehq/levee/internal/testwait"
)

func TestNewRejectsBadConfig(t *testing.T) {
	pool := newPool(t, "")
	good := Config{Pool: pool, Node: "n", Addr: "n:1", Shards: 4}
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no pool", func(c *Config) { c.Pool = nil }, "Pool"},
		{"no node", func(c *Config) { c.Node = "" }, "Node"},
		{"no addr", func(c *Config) { c.Addr = "" }, "Addr"},
		{"no shards", func(c *Config) { c.Shards = 0 }, "Shards"},
		{"renew too long", func(c *Config) { c.TTL, c.Renew = 2*time.Second, time.Second }, "half"},
		{"negative", func(c *Config) { c.TTL = -time.Second }, "positive"},
	} {
		cfg := good
		c.edit(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New: %v, want an error naming %q", c.name, err, c.want)
		}
	}
	m, err := New(good)
	if err != nil {
		t.Fatal(err)
	}
	if m.cfg.TTL != DefaultTTL || m.cfg.Renew != DefaultRenew {
		t.Errorf("defaults: TTL %v Renew %v, want %v %v", m.cfg.TTL, m.cfg.Renew, DefaultTTL, DefaultRenew)
	}
	if _, ok := m.Holds(0); ok {
		t.Error("Holds before Run")
	}
	if _, ok := m.Owner(0); ok {
		t.Error("Owner known before Run")
	}
	if m.Snapshot() != nil {
		t.Error("Snapshot before the first read")
	}
}

func TestRunRefusesAnotherShardCount(t *testing.T) {
	pool := newPool(t, "")
	m, err := New(Config{Pool: pool, Node: "n", Addr: "n:1", Shards: 2 * testShards, TTL: testTTL, Renew: testRenew})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctxT(t)); !errors.Is(err, pgschema.ErrShards) {
		t.Fatalf("Run on a database of %d shards with Shards %d: %v, want ErrShards", testShards, 2*testShards, err)
	}
	if err := m.Run(ctxT(t)); err == nil {
		t.Error("a second Run did not fail")
	}
}

// (a) One manager acquires every shard, at epoch 1 on a fresh database,
// and its map, metrics and graceful stop say so.
func TestOneManagerTakesAll(t *testing.T) {
	pool := newPool(t, "")
	r := newRecorder(t, true)
	a := start(t, pool, r, "alpha")
	testwait.Until(t, "alpha to hold every shard", func() bool { return len(a.held()) == testShards })
	for s := range testShards {
		if e, _ := a.m.Holds(s); e != 1 {
			t.Errorf("shard %d at epoch %d, want 1", s, e)
		}
	}
	testwait.Until(t, "the owner map to show alpha everywhere", func() bool {
		for s := range testShards {
			if addr, ok := a.m.Owner(s); !ok || addr != "alpha:9000" {
				return false
			}
		}
		return metric(t, a.reg, "logic_shards_without_owner") == 0
	})
	if _, ok := a.m.Owner(testShards); ok {
		t.Error("Owner of a shard out of range")
	}
	snap := a.m.Snapshot()
	if len(snap) != testShards {
		t.Fatalf("Snapshot has %d entries, want %d", len(snap), testShards)
	}
	for s, e := range snap {
		if e != (Entry{Shard: s, Owner: "alpha", Addr: "alpha:9000", Epoch: 1, Live: true}) {
			t.Errorf("Snapshot[%d] = %+v", s, e)
		}
	}
	if age := a.m.MapAge(); age > testTTL {
		t.Errorf("MapAge %v, want under a renew period or so", age)
	}
	if got := metric(t, a.reg, "logic_shards_held"); got != testShards {
		t.Errorf("logic_shards_held %v, want %d", got, testShards)
	}
	if got := metric(t, a.reg, "logic_shard_moves_total", "reason", "acquired"); got != testShards {
		t.Errorf("moves acquired %v, want %d", got, testShards)
	}
	if got := metric(t, a.reg, "logic_shard_owner_map_age_seconds"); got <= 0 || got > testTTL.Seconds() {
		t.Errorf("logic_shard_owner_map_age_seconds %v", got)
	}

	a.stop(t)
	if n := r.count("released", "alpha"); n != testShards {
		t.Errorf("%d Release calls at the stop, want %d", n, testShards)
	}
	if n := r.count("lost", ""); n != 0 {
		t.Errorf("%d Lost calls, want none", n)
	}
	if got := metric(t, a.reg, "logic_shard_moves_total", "reason", "released"); got != testShards {
		t.Errorf("moves released %v, want %d", got, testShards)
	}
	var owned, members int
	ctx := ctxT(t)
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM shard_leases WHERE owner <> ''`).Scan(&owned); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM logic_members`).Scan(&members); err != nil {
		t.Fatal(err)
	}
	if owned != 0 || members != 0 {
		t.Errorf("after the stop: %d rows still owned, %d member rows, want 0 and 0", owned, members)
	}
}

// (b) Two managers share the shards, then a third joins: the shards
// rebalance to the HRW shares, only the newcomer's move (at a new epoch),
// and no shard is acquired before its old holder returned from Release.
func TestJoinRebalances(t *testing.T) {
	pool := newPool(t, "")
	r := newRecorder(t, true)
	a := start(t, pool, r, "alpha")
	b := start(t, pool, r, "bravo")
	testwait.Until(t, "alpha and bravo to hold their shares", func() bool { return converged(a, b) })
	before := map[int]int64{}
	owner := map[int]string{}
	for _, mb := range []*member{a, b} {
		for _, s := range mb.held() {
			before[s], _ = mb.m.Holds(s)
			owner[s] = mb.m.Node()
		}
	}
	joined := time.Now()
	c := start(t, pool, r, "charlie")
	testwait.Until(t, "alpha, bravo and charlie to hold their shares", func() bool { return converged(a, b, c) })
	t.Logf("rebalanced within %v of the third's start (renew %v): %s", time.Since(joined).Round(time.Millisecond), testRenew, describe(a, b, c))
	if !exactlyOne(a, b, c) {
		t.Fatalf("a shard held by none or several: %s", describe(a, b, c))
	}
	for _, mb := range []*member{a, b, c} {
		n := len(mb.held())
		if third := float64(testShards) / 3; float64(n) < 0.75*third || float64(n) > 1.25*third {
			t.Errorf("%s holds %d of %d shards, more than 25%% off a third", mb.m.Node(), n, testShards)
		}
	}
	moved := 0
	for _, mb := range []*member{a, b, c} {
		for _, s := range mb.held() {
			e, _ := mb.m.Holds(s)
			switch {
			case mb == c:
				moved++
				if e <= before[s] {
					t.Errorf("shard %d moved from %s to charlie at epoch %d, not above %d", s, owner[s], e, before[s])
				}
				if r.count("release", owner[s]) == 0 {
					t.Errorf("shard %d moved without a Release by %s", s, owner[s])
				}
			case e != before[s]:
				t.Errorf("shard %d stayed with %s but its epoch went %d -> %d: it moved needlessly", s, mb.m.Node(), before[s], e)
			}
		}
	}
	if moved == 0 {
		t.Error("nothing moved to charlie")
	}
	if r.count("lost", "") != 0 {
		t.Errorf("%d Lost calls in a rebalance, want none", r.count("lost", ""))
	}
	// Every manager's map agrees with the holders.
	testwait.Until(t, "every owner map to name the holders", func() bool {
		for _, mb := range []*member{a, b, c} {
			for _, h := range []*member{a, b, c} {
				for _, s := range h.held() {
					if addr, ok := mb.m.Owner(s); !ok || addr != h.m.Node()+":9000" {
						return false
					}
				}
			}
		}
		return true
	})
}

// A manager whose rounds spend the whole hand-off budget before they come
// to the hand-offs (a starved CPU, a slow database) still gives up one
// shard a tick, so a joining manager gets its share.
func TestHandOffWhenBudgetSpent(t *testing.T) {
	pool := newPool(t, "")
	r := newRecorder(t, true)
	fast := func(cfg *Config) { cfg.TTL, cfg.Renew = 600*time.Millisecond, 100*time.Millisecond }
	a := start(t, pool, r, "alpha", fast, func(cfg *Config) { cfg.handoffBudget = -1 })
	testwait.Until(t, "alpha to hold every shard", func() bool { return len(a.held()) == testShards })
	b := start(t, pool, r, "bravo", fast)
	// A hand-off a tick: about testShards/2 ticks of 100 ms.
	testwait.UntilWithin(t, 30*time.Second, "alpha and bravo to hold their shares", func() bool { return converged(a, b) })
	if n := r.count("release", "alpha"); n != len(share([]string{"alpha", "bravo"}, "bravo")) {
		t.Errorf("alpha released %d shards, want bravo's share, %d", n, len(share([]string{"alpha", "bravo"}, "bravo")))
	}
}

// (c) A manager whose context ends hands every shard off gracefully: its
// Release hooks, then the other holds everything, no Lost anywhere, and
// the hand-off takes a few renew periods, not a TTL.
func TestGracefulStopHandsOff(t *testing.T) {
	pool := newPool(t, "")
	r := newRecorder(t, true)
	a := start(t, pool, r, "alpha")
	b := start(t, pool, r, "bravo")
	testwait.Until(t, "alpha and bravo to hold their shares", func() bool { return converged(a, b) })
	had := len(a.held())
	rebalanced := r.count("released", "alpha") // alpha may have taken all first, then given bravo its share
	stopped := time.Now()
	a.stop(t)
	if n := r.count("released", "alpha") - rebalanced; n != had {
		t.Errorf("alpha released %d shards at its stop, want the %d it held", n, had)
	}
	if got := a.held(); len(got) != 0 {
		t.Errorf("alpha still holds %v after Run returned", got)
	}
	testwait.Until(t, "bravo to hold every shard", func() bool { return len(b.held()) == testShards })
	took := time.Since(stopped)
	t.Logf("graceful hand-off of %d shards: bravo held all %v after alpha's stop began", had, took.Round(time.Millisecond))
	if took > testTTL {
		t.Errorf("the hand-off took %v, want under the TTL %v (a graceful leave must not wait for expiry)", took, testTTL)
	}
	if n := r.count("lost", ""); n != 0 {
		t.Errorf("%d Lost calls, want none", n)
	}
}

// (d) A manager that crashes (no hooks, no writes) loses its shards to
// the others within TTL + 2 x Renew, and its epochs no longer pass the
// fence.
func TestCrashFailover(t *testing.T) {
	pool := newPool(t, "")
	r := newRecorder(t, true)
	a := start(t, pool, r, "alpha")
	b := start(t, pool, r, "bravo")
	c := start(t, pool, r, "charlie")
	testwait.Until(t, "three shares", func() bool { return converged(a, b, c) })
	dead := map[int]int64{}
	for _, s := range a.held() {
		dead[s], _ = a.m.Holds(s)
	}
	a.crash(t)
	killed := time.Now()
	r.crashed("alpha")
	// Nobody renews the dead one's leases now: the earliest expiry (by
	// the database's clock) is when the others may take the first.
	var leftUS int64
	if err := pool.QueryRow(ctxT(t), `SELECT (extract(epoch FROM min(expires_at) - now()) * 1000000)::bigint FROM shard_leases WHERE owner = 'alpha'`).Scan(&leftUS); err != nil {
		t.Fatal(err)
	}
	left := time.Duration(leftUS)*time.Microsecond + time.Since(killed)
	testwait.Until(t, "bravo and charlie to hold alpha's shards", func() bool { return converged(b, c) })
	took := time.Since(killed)
	bound := testTTL + 2*testRenew
	t.Logf("failover: %d shards of the crashed manager re-acquired %v after the crash (its leases had %v left; bound TTL+2xRenew = %v)",
		len(dead), took.Round(time.Millisecond), left.Round(time.Millisecond), bound)
	if took > bound+testRenew { // one more period of slack for a loaded machine
		t.Errorf("failover took %v, want within %v", took, bound)
	}
	if took < left-10*time.Millisecond { // the two clocks' readings, a little apart
		t.Errorf("failover after %v, before the crashed one's leases expired (%v after the crash)", took, left)
	}
	if left > testTTL {
		t.Errorf("the crashed one's leases had %v left, more than the TTL %v", left, testTTL)
	}
	for _, s := range sortedKeys(dead) {
		if !fenced(t, pool, s, "alpha", dead[s]) {
			t.Errorf("shard %d: alpha's epoch %d still passes the fence", s, dead[s])
		}
		var now int64
		for _, mb := range []*member{b, c} {
			if e, ok := mb.m.Holds(s); ok {
				now = e
				if fenced(t, pool, s, mb.m.Node(), e) {
					t.Errorf("shard %d: the new holder %s's epoch %d fails the fence", s, mb.m.Node(), e)
				}
			}
		}
		if now <= dead[s] {
			t.Errorf("shard %d: taken over at epoch %d, not above the dead one's %d", s, now, dead[s])
		}
	}
}

// (e) A manager whose ticks stop (its clock does not advance: a paused
// process) stops holding at its local deadline, before another takes
// over at the lease's expiry; its epoch is then stale; thawed, it comes
// back for its share at new epochs.
func TestPausedManagerStopsHolding(t *testing.T) {
	pool := newPool(t, "")
	r := newRecorder(t, false) // the paused one's Lost is not what is tested
	fake := clock.NewFake(time.Unix(1e9, 0))
	a := start(t, pool, r, "alpha", withClock(fake))
	testwait.Until(t, "alpha to hold every shard on its first tick", func() bool { return len(a.held()) == testShards })
	epochs := map[int]int64{}
	for s := range testShards {
		epochs[s], _ = a.m.Holds(s)
	}
	paused := time.Now() // (its last round ended a moment ago)
	b := start(t, pool, r, "bravo")
	testwait.Until(t, "paused alpha's Holds to turn false", func() bool { return len(a.held()) == 0 })
	stoppedAt := time.Since(paused)
	if n := len(b.held()); n != 0 {
		t.Errorf("bravo held %d shards before paused alpha stopped holding: the local deadline must come first", n)
	}
	testwait.Until(t, "bravo to take every shard", func() bool { return len(b.held()) == testShards })
	t.Logf("paused holder stopped %v after its last round (local deadline TTL-Renew/2 = %v); bravo held all %v after", stoppedAt.Round(time.Millisecond),
		testTTL-testRenew/2, time.Since(paused).Round(time.Millisecond))
	if stoppedAt > testTTL-testRenew/2+testRenew/4 { // the wait's poll and this goroutine's wake-up come on top
		t.Errorf("Holds true %v after the last renewal, past the local deadline %v", stoppedAt, testTTL-testRenew/2)
	}
	for s := range testShards {
		if !fenced(t, pool, s, "alpha", epochs[s]) {
			t.Errorf("shard %d: paused alpha's epoch %d still passes the fence", s, epochs[s])
		}
		if e, _ := b.m.Holds(s); e <= epochs[s] {
			t.Errorf("shard %d: bravo at epoch %d, not above alpha's %d", s, e, epochs[s])
		}
	}
	// Thawed: it heartbeats again and gets its share back.
	testwait.Until(t, "thawed alpha and bravo to hold their shares", func() bool {
		fake.Advance(testRenew)
		return converged(a, b)
	})
	if n := r.count("lost", "alpha"); n != testShards {
		t.Errorf("alpha had %d Lost calls, want %d (one per shard it held when paused)", n, testShards)
	}
	if got := metric(t, a.reg, "logic_shard_lease_losses_total"); got < 1 {
		t.Errorf("logic_shard_lease_losses_total %v, want at least 1", got)
	}
	if got := metric(t, a.reg, "logic_shard_moves_total", "reason", "lost"); got != testShards {
		t.Errorf("moves lost %v, want %d", got, testShards)
	}
	for _, s := range a.held() {
		if e, _ := a.m.Holds(s); e <= epochs[s]+1 {
			t.Errorf("shard %d back with alpha at epoch %d, want above bravo's %d", s, e, epochs[s]+1)
		}
	}
}

// (f) The database goes down: the holders keep serving until their local
// deadline, then call Lost for everything; when it is back they acquire
// their shares again at new epochs.
func TestDatabaseDown(t *testing.T) {
	srv := privateServer(t)
	pool := newPool(t, srv.NewDatabase(t))
	r := newRecorder(t, true)
	a := start(t, pool, r, "alpha")
	b := start(t, pool, r, "bravo")
	testwait.Until(t, "alpha and bravo to hold their shares", func() bool { return converged(a, b) })
	epochs := map[int]int64{}
	for _, mb := range []*member{a, b} {
		for _, s := range mb.held() {
			epochs[s], _ = mb.m.Holds(s)
		}
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	testwait.Until(t, "every shard to be Lost", func() bool { return r.count("lost", "") == testShards })
	took := time.Since(killed)
	t.Logf("database killed: every shard Lost %v later (local deadline TTL-Renew/2 = %v after the last renewal)", took.Round(time.Millisecond), testTTL-testRenew/2)
	if took < testTTL-testRenew-testRenew/2 {
		t.Errorf("Lost %v after the kill: the holders gave up before their local deadline", took)
	}
	if took > testTTL+testRenew {
		t.Errorf("Lost only %v after the kill, want by TTL %v", took, testTTL)
	}
	if len(a.held())+len(b.held()) != 0 {
		t.Errorf("still holding with the database down: %s", describe(a, b))
	}
	testwait.Until(t, "the cached owners to run out with their leases", func() bool {
		for s := range testShards {
			if _, ok := a.m.Owner(s); ok {
				return false
			}
		}
		return true
	})
	if age := a.m.MapAge(); age < took-testRenew {
		t.Errorf("MapAge %v with the database down for %v", age, took)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	testwait.Until(t, "alpha and bravo to hold their shares again", func() bool { return converged(a, b) })
	t.Logf("database back: shares re-acquired %v after the restart", time.Since(back).Round(time.Millisecond))
	for _, mb := range []*member{a, b} {
		for _, s := range mb.held() {
			if e, _ := mb.m.Holds(s); e <= epochs[s] {
				t.Errorf("shard %d re-acquired by %s at epoch %d, not above %d", s, mb.m.Node(), e, epochs[s])
			}
		}
	}
	if got := metric(t, a.reg, "logic_shard_lease_losses_total"); got < 1 {
		t.Errorf("alpha's logic_shard_lease_losses_total %v, want at least 1", got)
	}
	if !slices.Equal(a.held(), share([]string{"alpha", "bravo"}, "alpha")) {
		t.Errorf("alpha holds %v", a.held())
	}
}

// A stop while the database is down still runs every Release hook and
// returns without waiting a statement's bound per shard.
func TestStopWithDatabaseDown(t *testing.T) {
	srv := privateServer(t)
	pool := newPool(t, srv.NewDatabase(t))
	r := newRecorder(t, true)
	a := start(t, pool, r, "alpha")
	testwait.Until(t, "alpha to hold every shard", func() bool { return len(a.held()) == testShards })
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	stopping := time.Now()
	a.stop(t)
	took := time.Since(stopping)
	t.Logf("stop with the database down took %v", took.Round(time.Millisecond))
	if took > testTTL {
		t.Errorf("the stop took %v with the database down, want under the TTL %v", took, testTTL)
	}
	if n := r.count("released", "alpha"); n != testShards {
		t.Errorf("%d Release calls, want %d", n, testShards)
	}
	if n := r.count("lost", ""); n != 0 {
		t.Errorf("%d Lost calls, want none (the stop came before the local deadline)", n)
	}
	if err := srv.Restart(); err != nil { // for the database's drop at cleanup
		t.Fatal(err)
	}
}
