package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/pgschema"
	"github.com/leveehq/levee/internal/pgtest"
	"github.com/leveehq/levee/internal/testwait"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The tests' lease times: short, so that the suite takes seconds.
const (
	testShards = 64
	testTTL    = 1200 * time.Millisecond
	testRenew  = 200 * time.Millisecond
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newPool is a pool on a fresh migrated database at url (of the shared
// server when url is "").
func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	if url == "" {
		url = pgtest.Database(t)
	}
	ctx := ctxT(t)
	pool, err := pgschema.Connect(ctx, url, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // before the database is dropped
	if err := pgschema.Migrate(ctx, pool, testShards, nil); err != nil {
		t.Fatal(err)
	}
	return pool
}

// privateServer is a PostgreSQL of the test's own, to kill.
func privateServer(t testing.TB) *pgtest.Server {
	t.Helper()
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		if errors.Is(err, pgtest.ErrNotInstalled) && os.Getenv(pgtest.RequireEnv) == "" {
			t.Skipf("%v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// event is one hook call.
type event struct {
	kind  string // acquired, release, released, lost
	node  string
	shard int
	epoch int64
	at    time.Time
}

// recorder is every manager's hooks in one log, checking the promise as
// the calls come: a shard is acquired only while no other process holds
// it or is still in its Release, at an epoch above every earlier one.
type recorder struct {
	t         testing.TB
	mu        sync.Mutex
	strict    bool // holders must not overlap (false: a paused holder's Lost may come late)
	holder    map[int]string
	releasing map[int]string
	epochs    map[string]map[int]int64 // node -> shard -> epoch it acquired at
	last      map[int]int64
	events    []event
	errs      []string
}

func newRecorder(t testing.TB, strict bool) *recorder {
	r := &recorder{t: t, strict: strict, holder: map[int]string{}, releasing: map[int]string{},
		epochs: map[string]map[int]int64{}, last: map[int]int64{}}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.errs {
			t.Error(e)
		}
	})
	return r
}

func (r *recorder) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) hooks(node string) Hooks {
	return Hooks{
		Acquired: func(s int, e int64) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, event{"acquired", node, s, e, time.Now()})
			if h := r.holder[s]; h != "" && (r.strict || h == node) {
				r.fail("shard %d acquired by %s at epoch %d while %s holds it", s, node, e, h)
			}
			if h := r.releasing[s]; h != "" {
				r.fail("shard %d acquired by %s at epoch %d while %s is still in its Release", s, node, e, h)
			}
			if e <= r.last[s] {
				r.fail("shard %d acquired by %s at epoch %d, not above the earlier %d", s, node, e, r.last[s])
			}
			r.holder[s], r.last[s] = node, e
			if r.epochs[node] == nil {
				r.epochs[node] = map[int]int64{}
			}
			r.epochs[node][s] = e
		},
		Release: func(s int) {
			r.mu.Lock()
			r.events = append(r.events, event{"release", node, s, 0, time.Now()})
			if h := r.holder[s]; h != node {
				r.fail("shard %d released by %s, held by %q", s, node, h)
			}
			r.releasing[s] = node
			r.mu.Unlock()
			// A real Release waits for the shard's last commit here;
			// the lock is not held, so an early acquisition would be seen.
			r.mu.Lock()
			delete(r.releasing, s)
			if r.holder[s] == node {
				delete(r.holder, s)
			}
			r.events = append(r.events, event{"released", node, s, 0, time.Now()})
			r.mu.Unlock()
		},
		Lost: func(s int) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, event{"lost", node, s, 0, time.Now()})
			if h := r.holder[s]; h != node && r.strict {
				r.fail("shard %d lost by %s, held by %q", s, node, h)
			}
			if r.holder[s] == node {
				delete(r.holder, s)
			}
		},
	}
}

// crashed forgets node's holdings: the process is gone.
func (r *recorder) crashed(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s, h := range r.holder {
		if h == node {
			delete(r.holder, s)
		}
	}
}

// count is how many events of kind node had (any node when "").
func (r *recorder) count(kind, node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.kind == kind && (node == "" || e.node == node) {
			n++
		}
	}
	return n
}

// epochOf is the epoch node acquired shard at last (0: never).
func (r *recorder) epochOf(node string, shard int) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epochs[node][shard]
}

// member is one running Manager.
type member struct {
	m      *Manager
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

type opt func(*Config)

func withClock(c clock.Clock) opt { return func(cfg *Config) { cfg.Clock = c } }

// start runs a Manager named node on pool, its hooks into r, stopped (if
// still running) at the test's end.
func start(t testing.TB, pool *pgxpool.Pool, r *recorder, node string, opts ...opt) *member {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := Config{Pool: pool, Node: node, Addr: node + ":9000", Shards: testShards, TTL: testTTL, Renew: testRenew,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})), Hooks: r.hooks(node), Reg: reg}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mb := &member{m: m, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { mb.done <- m.Run(ctx) }() // ends with cancel (stop or the cleanup)
	t.Cleanup(func() { mb.stop(t) })
	return mb
}

// stop cancels Run and waits for it to return (nil).
func (mb *member) stop(t testing.TB) {
	t.Helper()
	mb.cancel()
	select {
	case err, ok := <-mb.done:
		if ok && err != nil {
			t.Errorf("%s: Run: %v", mb.m.Node(), err)
		}
		if ok {
			close(mb.done)
		}
	case <-time.After(testwait.Timeout):
		t.Fatalf("%s: Run did not return within %v of its context's end", mb.m.Node(), testwait.Timeout)
	}
}

// crash ends Run as a killed process would: no hooks, no writes.
func (mb *member) crash(t testing.TB) {
	t.Helper()
	mb.m.abandon.Store(true)
	mb.stop(t)
}

// held are the shards mb Holds, sorted.
func (mb *member) held() []int {
	var out []int
	for s := range testShards {
		if _, ok := mb.m.Holds(s); ok {
			out = append(out, s)
		}
	}
	return out
}

// share is the shards HRW gives node among nodes.
func share(nodes []string, node string) []int {
	var out []int
	for s, o := range assign(nodes, testShards) {
		if o == node {
			out = append(out, s)
		}
	}
	return out
}

// converged says whether every member holds exactly its HRW share among
// them, so that each shard is held by exactly one.
func converged(ms ...*member) bool {
	nodes := make([]string, len(ms))
	for i, mb := range ms {
		nodes[i] = mb.m.Node()
	}
	for _, mb := range ms {
		if !slices.Equal(mb.held(), share(nodes, mb.m.Node())) {
			return false
		}
	}
	return true
}

// exactlyOne says whether every shard is held by exactly one of ms.
func exactlyOne(ms ...*member) bool {
	for s := range testShards {
		n := 0
		for _, mb := range ms {
			if _, ok := mb.m.Holds(s); ok {
				n++
			}
		}
		if n != 1 {
			return false
		}
	}
	return true
}

func describe(ms ...*member) string {
	var b strings.Builder
	for _, mb := range ms {
		fmt.Fprintf(&b, "%s holds %d %v; ", mb.m.Node(), len(mb.held()), mb.held())
	}
	return b.String()
}

// fenced says whether a commit fenced by (node, epoch) on shard would be
// refused: the store's check finds no row.
func fenced(t testing.TB, pool *pgxpool.Pool, shard int, node string, epoch int64) bool {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctxT(t), `SELECT count(*) FROM shard_leases WHERE shard = $1 AND owner = $2 AND epoch = $3 AND expires_at > now()`,
		shard, node, epoch).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 0
}

// metric is the value of the series name{labels} in reg (0 when absent).
func metric(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// testWriter sends the managers' logs to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func sortedKeys(m map[int]int64) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
