package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/pgschema"
)

// Defaults of Config.TTL and Config.Renew.
const (
	DefaultTTL   = 5 * time.Second
	DefaultRenew = time.Second
)

// Config is a Manager's setup.
type Config struct {
	Pool   *pgxpool.Pool // a database migrated by internal/pgschema for Shards shards
	Node   string        // this process's id (unique per process start)
	Addr   string        // host:port the gate reaches this process's gRPC at (advertised in the redirect)
	Shards int
	TTL    time.Duration // lease TTL (default 5s)
	Renew  time.Duration // heartbeat/renew/rebalance period (default 1s; must be < TTL/2)
	Log    *slog.Logger
	Hooks  Hooks
	Reg    prometheus.Registerer // metrics (logic_shard_*); nil: none
	// Clock drives the Renew ticker; nil: the wall clock. Lease times are
	// the database's (now()) and the local deadline is the monotonic
	// clock's whatever Clock is: a Fake that does not advance is a process
	// whose ticks have stopped (paused).
	Clock clock.Clock

	// handoffBudget (tests): how much of a round may pass before its
	// hand-offs wait for the next tick; 0: Renew/2, < 0: none (the round's
	// statements spent it all).
	handoffBudget time.Duration
}

// Hooks are the manager's calls into the process that serves the shards.
// They are called from the manager's goroutine, one at a time; nil ones
// do nothing.
type Hooks struct {
	// Acquired: this process now holds shard at epoch; start serving it (fenced by epoch). Called from the manager's goroutine; must not block long.
	Acquired func(shard int, epoch int64)
	// Release: stop serving shard and return once it has finished what it accepted (its last commit is done); the manager then frees the lease row. Called for a graceful hand-off (rebalance, shutdown).
	Release func(shard int)
	// Lost: the lease expired or was taken (renewal failed past its deadline, or the row shows another owner/epoch); stop serving at once. The fence makes any late commit fail anyway.
	Lost func(shard int)
}

// Entry is one shard's row in the owner map, as last read.
type Entry struct {
	Shard int
	Owner string // node id; "" when free
	Addr  string // the owner's advertised address
	Epoch int64  // bumped by every acquisition
	Live  bool   // owned and not expired when read (by the database's clock)
}

// holding is one shard this process holds, as Holds sees it.
type holding struct {
	epoch    int64
	deadline time.Duration // since Manager.base (monotonic)
}

// ownerMap is the cached map Owner, Snapshot and MapAge read.
type ownerMap struct {
	entries []Entry
	expires []time.Duration // per shard: when its lease expires as read, since base; meaningful when Live
	read    time.Duration   // when the read started, since base
}

// Manager holds this process's share of the shard leases; see the package
// documentation.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	clk     clock.Clock
	base    time.Time // the monotonic origin of every local time
	margin  time.Duration
	budget  time.Duration // of a round's hand-offs (see round)
	opLimit time.Duration // bound on one statement
	met     *metrics

	holds []atomic.Pointer[holding] // per shard; nil: not held
	omap  atomic.Pointer[ownerMap]
	ran   atomic.Bool

	// Owned by Run's goroutine.
	held     map[int]*holding
	failing  bool // the last tick failed (logged once until it works)
	checked  bool // the database's shard count was found to be Shards
	fatal    error
	ticks    int
	deadline *time.Timer

	// abandon (tests): Run returns at ctx's end without releasing, freeing
	// or leaving, as a crashed process would.
	abandon atomic.Bool
}

// New checks cfg and returns a Manager that holds nothing until Run.
func New(cfg Config) (*Manager, error) {
	if cfg.Pool == nil {
		return nil, errors.New("lease: Config.Pool is nil")
	}
	if cfg.Node == "" {
		return nil, errors.New("lease: Config.Node is empty: each process needs an id of its own")
	}
	if cfg.Addr == "" {
		return nil, errors.New("lease: Config.Addr is empty: the gate needs the address to redirect to")
	}
	if cfg.Shards <= 0 {
		return nil, fmt.Errorf("lease: Config.Shards %d must be positive", cfg.Shards)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Renew == 0 {
		cfg.Renew = DefaultRenew
	}
	if cfg.TTL < 0 || cfg.Renew < 0 {
		return nil, fmt.Errorf("lease: lease TTL %v and renew period %v must be positive", cfg.TTL, cfg.Renew)
	}
	if cfg.Renew >= cfg.TTL/2 {
		return nil, fmt.Errorf("lease: the renew period %v must be less than half the lease TTL %v, so that a lease survives a missed renewal", cfg.Renew, cfg.TTL)
	}
	if cfg.TTL%time.Microsecond != 0 {
		return nil, fmt.Errorf("lease: lease TTL %v: the database keeps microseconds", cfg.TTL)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	m := &Manager{
		cfg:     cfg,
		log:     cfg.Log.With("node", cfg.Node),
		clk:     cfg.Clock,
		base:    time.Now(),
		margin:  cfg.Renew / 2,
		budget:  cfg.Renew / 2,
		opLimit: cfg.Renew,
		holds:   make([]atomic.Pointer[holding], cfg.Shards),
		held:    map[int]*holding{},
	}
	if cfg.handoffBudget != 0 {
		m.budget = max(cfg.handoffBudget, 0)
	}
	m.met = newMetrics(cfg.Reg, m)
	return m, nil
}

// Node is this process's id.
func (m *Manager) Node() string { return m.cfg.Node }

// since is the monotonic time since base.
func (m *Manager) since() time.Duration { return time.Since(m.base) }

// Holds says whether this process holds shard, and at which epoch: it
// was acquired, has not been released or lost, and its local deadline
// (the start of its last successful renewal + TTL - Renew/2, by the
// monotonic clock) has not passed. A commit must carry the epoch as its
// fence; Holds true does not replace the fence, it only stops serving
// before the database could give the shard away.
func (m *Manager) Holds(shard int) (epoch int64, ok bool) {
	if shard < 0 || shard >= len(m.holds) {
		return 0, false
	}
	h := m.holds[shard].Load()
	if h == nil || m.since() >= h.deadline {
		return 0, false
	}
	return h.epoch, true
}

// Owner is the cached address of shard's owner (refreshed every Renew);
// ok is false when no live owner is known: the shard is free, its lease
// expired as last read, the map has not been read yet, or its lease has
// expired since the read by the time it had left then.
func (m *Manager) Owner(shard int) (addr string, ok bool) {
	om := m.omap.Load()
	if om == nil || shard < 0 || shard >= len(om.entries) {
		return "", false
	}
	e := om.entries[shard]
	if !e.Live || m.since() >= om.expires[shard] {
		return "", false
	}
	return e.Addr, true
}

// MapAge is the time since the cached owner map was last read (since New
// before the first read).
func (m *Manager) MapAge() time.Duration {
	if om := m.omap.Load(); om != nil {
		return m.since() - om.read
	}
	return m.since()
}

// Snapshot is the cached owner map, one Entry per shard (nil before the
// first read); Live is as read, for an admin view and tests.
func (m *Manager) Snapshot() []Entry {
	om := m.omap.Load()
	if om == nil {
		return nil
	}
	return slices.Clone(om.entries)
}

// Run keeps this process's share of the leases until ctx ends, then
// hands every held shard off (Release hook, row freed), leaves the
// membership and returns nil. It ticks at once and then every Renew.
// Database errors do not end it: it logs them and tries again on the next
// tick, while the leases it holds run out (Lost) at their local deadline.
// Run may be called once. It returns an error wrapping pgschema.ErrShards
// at once if the database was set up for another shard count.
func (m *Manager) Run(ctx context.Context) error {
	if m.ran.Swap(true) {
		return errors.New("lease: Run called twice")
	}
	m.deadline = time.NewTimer(time.Hour)
	m.deadline.Stop()
	defer m.deadline.Stop()
	tk := m.clk.NewTicker(m.cfg.Renew)
	defer tk.Stop()
	m.log.Info("lease manager started", "addr", m.cfg.Addr, "shards", m.cfg.Shards, "ttl", m.cfg.TTL, "renew", m.cfg.Renew)
	m.tick(ctx)
	for {
		if m.fatal != nil {
			m.stop()
			return m.fatal
		}
		m.armDeadline()
		select {
		case <-ctx.Done():
			if m.abandon.Load() {
				return nil
			}
			m.stop()
			return nil
		case <-tk.C():
			m.tick(ctx)
		case <-m.deadline.C:
			m.expire() // only: a round waits for the ticker
		}
	}
}

// armDeadline sets the deadline timer to the earliest local deadline of a
// held shard, so that Lost comes on time even while ticks are late.
func (m *Manager) armDeadline() {
	m.deadline.Stop()
	select {
	case <-m.deadline.C:
	default:
	}
	first := time.Duration(-1)
	for _, h := range m.held {
		if first < 0 || h.deadline < first {
			first = h.deadline
		}
	}
	if first >= 0 {
		m.deadline.Reset(max(first-m.since(), 0))
	}
}

// opCtx bounds one statement.
func (m *Manager) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.opLimit)
}

// micros is d in the database's unit for the statements' intervals.
func micros(d time.Duration) int64 { return d.Microseconds() }

// tick is one round: renew, heartbeat, read the members and the map,
// hand off what another live member should have, acquire what this one
// should have. An error ends the round (the next tick tries again).
func (m *Manager) tick(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	m.ticks++
	m.expire()
	if err := m.round(ctx); err != nil {
		if ctx.Err() != nil {
			return
		}
		if !m.failing {
			m.log.Warn("lease round failed; serving the held shards until their local deadline", "err", err, "held", len(m.held))
		} else {
			m.log.Debug("lease round failed", "err", err)
		}
		m.failing = true
		return
	}
	if m.failing {
		m.log.Info("lease rounds work again", "held", len(m.held))
		m.failing = false
	}
}

func (m *Manager) round(ctx context.Context) error {
	start := m.since()
	if !m.checked {
		if err := m.checkShards(ctx); err != nil {
			return err
		}
	}
	if err := m.renew(ctx); err != nil {
		return err
	}
	if err := m.heartbeat(ctx); err != nil {
		return err
	}
	live, err := m.members(ctx)
	if err != nil {
		return err
	}
	if err := m.readMap(ctx); err != nil {
		return err
	}
	want := make([]int32, 0, m.cfg.Shards)
	var handoff []int
	for s := range m.cfg.Shards {
		o := desiredOwner(live, s)
		_, have := m.held[s]
		switch {
		case o == m.cfg.Node && !have:
			want = append(want, int32(s))
		case o != m.cfg.Node && have:
			handoff = append(handoff, s)
		}
	}
	// Hand off within a budget so that the next renewal is on time; the
	// rest go on the next tick. One always goes, even when the round's
	// statements alone spent the budget (a starved CPU, a slow database):
	// otherwise such a process would keep every shard it should give up,
	// and a joining one would wait for it forever.
	for i, s := range handoff {
		if i > 0 && m.since()-start >= m.budget {
			m.log.Debug("hand-off budget spent; the rest next tick", "left", len(handoff))
			break
		}
		_ = m.release(ctx, s, true) // logged; the row expires by itself
	}
	return m.acquire(ctx, want)
}

// checkShards ends Run (m.fatal) when the database was set up for another
// shard count than Shards: that does not mend by itself.
func (m *Manager) checkShards(ctx context.Context) error {
	octx, cancel := m.opCtx(ctx)
	defer cancel()
	var have int
	if err := m.cfg.Pool.QueryRow(octx, `SELECT shards FROM levee_cluster WHERE id = 1`).Scan(&have); err != nil {
		return fmt.Errorf("read the shard count (is the database migrated?): %w", err)
	}
	if have != m.cfg.Shards {
		m.fatal = fmt.Errorf("lease: %w: the database holds %d shards and this process runs with %d", pgschema.ErrShards, have, m.cfg.Shards)
		return m.fatal
	}
	m.checked = true
	return nil
}

// renew extends every lease this process holds at the epoch it holds it;
// the ones the database did not extend (expired, or taken) are lost.
func (m *Manager) renew(ctx context.Context) error {
	if len(m.held) == 0 {
		return nil
	}
	shards := make([]int32, 0, len(m.held))
	epochs := make([]int64, 0, len(m.held))
	for s, h := range m.held {
		shards = append(shards, int32(s))
		epochs = append(epochs, h.epoch)
	}
	start := m.since()
	octx, cancel := m.opCtx(ctx)
	defer cancel()
	rows, err := m.cfg.Pool.Query(octx, `
		UPDATE shard_leases AS l SET expires_at = now() + $2::bigint * interval '1 microsecond'
		FROM unnest($3::int[], $4::bigint[]) AS h(shard, epoch)
		WHERE l.owner = $1 AND l.shard = h.shard AND l.epoch = h.epoch AND l.expires_at > now()
		RETURNING l.shard`, m.cfg.Node, micros(m.cfg.TTL), shards, epochs)
	if err != nil {
		return fmt.Errorf("renew: %w", err)
	}
	renewed := map[int]bool{}
	for rows.Next() {
		var s int32
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return fmt.Errorf("renew: %w", err)
		}
		renewed[int(s)] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("renew: %w", err)
	}
	deadline := start + m.cfg.TTL - m.margin
	var lost []int
	for s, h := range m.held {
		if !renewed[s] {
			lost = append(lost, s)
			continue
		}
		nh := &holding{epoch: h.epoch, deadline: deadline}
		m.held[s] = nh
		m.holds[s].Store(nh)
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		m.log.Warn("shard leases lost: the database did not renew them (expired or taken)", "shards", lost)
		m.lose(lost)
	}
	return nil
}

// expire loses every held shard whose local deadline has passed.
func (m *Manager) expire() {
	now := m.since()
	var lost []int
	for s, h := range m.held {
		if now >= h.deadline {
			lost = append(lost, s)
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		m.log.Warn("shard leases lost: not renewed before their local deadline", "shards", lost)
		m.lose(lost)
	}
}

// lose drops shards and calls Lost for each.
func (m *Manager) lose(shards []int) {
	for _, s := range shards {
		delete(m.held, s)
		m.holds[s].Store(nil)
	}
	m.met.held.Set(float64(len(m.held)))
	m.met.losses.Inc()
	m.met.moves.WithLabelValues(reasonLost).Add(float64(len(shards)))
	for _, s := range shards {
		if m.cfg.Hooks.Lost != nil {
			m.cfg.Hooks.Lost(s)
		}
	}
}

// heartbeat upserts this process's member row.
func (m *Manager) heartbeat(ctx context.Context) error {
	octx, cancel := m.opCtx(ctx)
	defer cancel()
	if _, err := m.cfg.Pool.Exec(octx, `
		INSERT INTO logic_members (node, addr) VALUES ($1, $2)
		ON CONFLICT (node) DO UPDATE SET addr = EXCLUDED.addr, heartbeat_at = now()`, m.cfg.Node, m.cfg.Addr); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	// Rows of processes long gone (ids are per process start) go now and then.
	if m.ticks%64 == 1 {
		if _, err := m.cfg.Pool.Exec(octx, `DELETE FROM logic_members WHERE heartbeat_at < now() - $1::bigint * interval '1 microsecond'`,
			micros(max(100*m.cfg.TTL, 10*time.Minute))); err != nil {
			return fmt.Errorf("forget old members: %w", err)
		}
	}
	return nil
}

// members are the nodes heartbeated within TTL, this one included.
func (m *Manager) members(ctx context.Context) ([]string, error) {
	octx, cancel := m.opCtx(ctx)
	defer cancel()
	rows, err := m.cfg.Pool.Query(octx, `SELECT node FROM logic_members WHERE heartbeat_at > now() - $1::bigint * interval '1 microsecond'`, micros(m.cfg.TTL))
	if err != nil {
		return nil, fmt.Errorf("read members: %w", err)
	}
	defer rows.Close()
	var live []string
	self := false
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("read members: %w", err)
		}
		live = append(live, n)
		self = self || n == m.cfg.Node
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read members: %w", err)
	}
	if !self { // heartbeated just now
		live = append(live, m.cfg.Node)
	}
	return live, nil
}

// readMap refreshes the cached owner map.
func (m *Manager) readMap(ctx context.Context) error {
	start := m.since()
	octx, cancel := m.opCtx(ctx)
	defer cancel()
	rows, err := m.cfg.Pool.Query(octx, `
		SELECT shard, owner, addr, epoch, owner <> '' AND expires_at > now(),
		       (extract(epoch FROM expires_at - now()) * 1000000)::bigint
		FROM shard_leases WHERE shard < $1 ORDER BY shard`, m.cfg.Shards)
	if err != nil {
		return fmt.Errorf("read the owner map: %w", err)
	}
	defer rows.Close()
	om := &ownerMap{entries: make([]Entry, m.cfg.Shards), expires: make([]time.Duration, m.cfg.Shards), read: start}
	n := 0
	for s := range om.entries {
		om.entries[s].Shard = s
	}
	for rows.Next() {
		var (
			s    int32
			e    Entry
			left int64
		)
		if err := rows.Scan(&s, &e.Owner, &e.Addr, &e.Epoch, &e.Live, &left); err != nil {
			return fmt.Errorf("read the owner map: %w", err)
		}
		if s < 0 {
			continue
		}
		n++
		e.Shard = int(s)
		om.entries[s] = e
		om.expires[s] = start + time.Duration(left)*time.Microsecond
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the owner map: %w", err)
	}
	if n != m.cfg.Shards {
		return fmt.Errorf("read the owner map: shard_leases has %d rows below %d, want one per shard: migrate the database (internal/pgschema) for %d shards", n, m.cfg.Shards, m.cfg.Shards)
	}
	without := 0
	for _, e := range om.entries {
		if !e.Live {
			without++
		}
	}
	m.omap.Store(om)
	m.met.withoutOwner.Set(float64(without))
	return nil
}

// release hands shard off: Holds turns false, the Release hook runs to
// its end, then (when free) the row is freed, if it is still this
// process's at its epoch, for the desired owner to acquire. The error is
// the freeing's; the row then runs out at its expiry instead, as it is not
// renewed any more.
func (m *Manager) release(ctx context.Context, shard int, free bool) error {
	h := m.held[shard]
	delete(m.held, shard)
	m.holds[shard].Store(nil)
	m.met.held.Set(float64(len(m.held)))
	m.met.moves.WithLabelValues(reasonReleased).Inc()
	if m.cfg.Hooks.Release != nil {
		m.cfg.Hooks.Release(shard)
	}
	if !free {
		return nil
	}
	octx, cancel := m.opCtx(ctx)
	defer cancel()
	if _, err := m.cfg.Pool.Exec(octx, `UPDATE shard_leases SET owner = '', addr = '', expires_at = now() WHERE shard = $1 AND owner = $2 AND epoch = $3`,
		shard, m.cfg.Node, h.epoch); err != nil {
		m.log.Warn("freeing a released shard's lease failed; it expires by itself", "shard", shard, "epoch", h.epoch, "err", err)
		return err
	}
	return nil
}

// acquire takes those of shards that are free, expired or (after a loss)
// still this process's in the database, each at a new epoch, and calls
// Acquired for each.
func (m *Manager) acquire(ctx context.Context, shards []int32) error {
	if len(shards) == 0 {
		return nil
	}
	start := m.since()
	octx, cancel := m.opCtx(ctx)
	defer cancel()
	rows, err := m.cfg.Pool.Query(octx, `
		UPDATE shard_leases SET owner = $1, addr = $2, epoch = epoch + 1,
		       expires_at = now() + $3::bigint * interval '1 microsecond'
		WHERE shard = ANY($4::int[]) AND (owner = '' OR expires_at < now() OR owner = $1)
		RETURNING shard, epoch`, m.cfg.Node, m.cfg.Addr, micros(m.cfg.TTL), shards)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	type got struct {
		shard int
		epoch int64
	}
	var gots []got
	for rows.Next() {
		var (
			s int32
			e int64
		)
		if err := rows.Scan(&s, &e); err != nil {
			rows.Close()
			return fmt.Errorf("acquire: %w", err)
		}
		gots = append(gots, got{int(s), e})
	}
	if err := rows.Err(); err != nil {
		// The statement may have committed without our reading it: those
		// rows are this process's in the database and run out unrenewed
		// (or the next acquire takes them again at a new epoch).
		return fmt.Errorf("acquire: %w", err)
	}
	if len(gots) == 0 {
		return nil
	}
	slices.SortFunc(gots, func(a, b got) int { return a.shard - b.shard })
	deadline := start + m.cfg.TTL - m.margin
	for _, g := range gots {
		h := &holding{epoch: g.epoch, deadline: deadline}
		m.held[g.shard] = h
		m.holds[g.shard].Store(h)
	}
	m.met.held.Set(float64(len(m.held)))
	m.met.moves.WithLabelValues(reasonAcquired).Add(float64(len(gots)))
	m.log.Debug("shards acquired", "count", len(gots), "held", len(m.held))
	for _, g := range gots {
		if m.cfg.Hooks.Acquired != nil {
			m.cfg.Hooks.Acquired(g.shard, g.epoch)
		}
	}
	return nil
}

// stop is Run's graceful end: leave the membership first (so that the
// others compute their shares without this process and take the freed
// rows on their next tick), then hand every held shard off, renewing the
// rest meanwhile if the hand-offs take long. Once a statement fails (the
// database is down or unreachable) the rest get their Release hooks only:
// their rows run out at their expiry, and the stop does not wait a
// statement's bound per shard.
func (m *Manager) stop() {
	ctx := context.Background()
	dbOK := true
	octx, cancel := m.opCtx(ctx)
	if _, err := m.cfg.Pool.Exec(octx, `DELETE FROM logic_members WHERE node = $1`, m.cfg.Node); err != nil {
		m.log.Warn("leaving the membership failed; the others see this process gone after the lease TTL", "err", err)
		dbOK = false
	}
	cancel()
	shards := make([]int, 0, len(m.held))
	for s := range m.held {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	m.log.Info("lease manager stopping: handing the held shards off", "shards", len(shards))
	lastRenew := m.since()
	for _, s := range shards {
		m.expire()
		if _, ok := m.held[s]; !ok {
			continue // lost meanwhile
		}
		if dbOK && m.since()-lastRenew >= m.cfg.Renew {
			lastRenew = m.since()
			if err := m.renew(ctx); err != nil {
				m.log.Warn("renewal during the hand-off failed", "err", err)
				dbOK = false
			}
			if _, ok := m.held[s]; !ok {
				continue
			}
		}
		if err := m.release(ctx, s, dbOK); err != nil {
			dbOK = false
		}
	}
	m.log.Info("lease manager stopped")
}
