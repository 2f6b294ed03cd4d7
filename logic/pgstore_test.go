package logic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/pgtest"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// pgShardOn is shard of the database behind pool, fenced by f.
func pgShardOn(t testing.TB, pool *pgxpool.Pool, shard int, f fence) *pgShard {
	t.Helper()
	st, err := newPGStore(pool, arenaState).forShard(context.Background(), shard, f)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// sqlExec runs sql on pool or fails t.
func sqlExec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// pgPurchase is a commit's content for player id: its record at version
// with gold, and the outcome of request rid.
func pgPurchase(t testing.TB, id string, rid uint64, version uint64, gold int64, at time.Time) (map[string]*record, map[string]outcome) {
	t.Helper()
	p := newPlayer(id)
	p.Gold = gold
	key := requestKey(id, rid)
	enc, err := encodeOutcome(at, buyReq(id, rid, "potion", 1).GetCall(), &leveev2.LogicReply{Version: version})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*record{id: {state: p, version: version}}, map[string]outcome{key: {key: key, at: at, enc: enc}}
}

// wantStored checks id's stored version and the stored outcome of rid
// (version 0: none).
func wantStored(t testing.TB, st shardStore, id string, version uint64, rid uint64, outcomeVersion uint64) {
	t.Helper()
	rec, err := st.get(id)
	if err != nil {
		t.Fatal(err)
	}
	if got := uint64(0); rec != nil {
		got = rec.version
		if got != version {
			t.Fatalf("%s at version %d, want %d", id, got, version)
		}
	} else if version != 0 {
		t.Fatalf("%s not stored, want version %d", id, version)
	}
	so, err := st.outcome(requestKey(id, rid))
	if err != nil {
		t.Fatal(err)
	}
	if so.GetReply().GetVersion() != outcomeVersion {
		t.Fatalf("outcome of %s/%d = %v, want one of version %d", id, rid, so, outcomeVersion)
	}
}

// A fenced shard commits while the lease row names it at its epoch, and
// not once the row names another epoch or owner or has expired: the
// commit fails with ErrFenced and applies nothing. The purge is fenced
// alike.
func TestPGFence(t *testing.T) {
	pool := migratedPool(t, pgtest.Database(t), 1)
	t0 := time.Now()
	lease := func(owner string, epoch int64, ttl string) {
		sqlExec(t, pool, `UPDATE shard_leases SET owner = $1, epoch = $2, expires_at = now() + $3::interval WHERE shard = 0`, owner, epoch, ttl)
	}
	lease("node-a", 3, "1 minute")
	st := pgShardOn(t, pool, 0, fence{node: "node-a", epoch: 3})
	recs, outs := pgPurchase(t, "alice", 1, 1, 1000, t0)
	if err := st.put(recs, outs, nil); err != nil {
		t.Fatalf("put under the lease: %v", err)
	}
	for i, c := range []struct {
		name   string
		owner  string
		epoch  int64
		ttl    string
		fenced fence
	}{
		{"another epoch", "node-a", 4, "1 minute", fence{"node-a", 3}},
		{"another owner", "node-b", 3, "1 minute", fence{"node-a", 3}},
		{"expired", "node-a", 3, "-1 second", fence{"node-a", 3}},
		{"freed", "", 3, "1 minute", fence{"node-a", 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lease(c.owner, c.epoch, c.ttl)
			st := pgShardOn(t, pool, 0, c.fenced)
			recs, outs := pgPurchase(t, "alice", uint64(i+2), 2, 900, t0)
			err := st.put(recs, outs, nil)
			if !errors.Is(err, ErrFenced) || !errors.Is(err, ErrStore) || storeReason(err) != reasonFenced {
				t.Fatalf("put = %v, want ErrFenced (reason fenced)", err)
			}
			if !strings.Contains(err.Error(), "node-a") || !strings.Contains(err.Error(), "epoch 3") {
				t.Errorf("error %q does not say which lease", err)
			}
			wantStored(t, st, "alice", 1, 1, 1)
			wantStored(t, st, "alice", 1, uint64(i+2), 0)
			if _, _, err := st.purge(t0.Add(time.Hour), 10); !errors.Is(err, ErrFenced) {
				t.Fatalf("purge = %v, want ErrFenced", err)
			}
			if n := outcomeCount(t, st); n != 1 {
				t.Fatalf("a fenced purge deleted: %d outcomes left, want 1", n)
			}
		})
	}
	// The lease back: it commits again.
	lease("node-a", 3, "1 minute")
	recs, outs = pgPurchase(t, "alice", 9, 2, 900, t0)
	if err := st.put(recs, outs, nil); err != nil {
		t.Fatalf("put under the lease again: %v", err)
	}
	wantStored(t, st, "alice", 2, 9, 2)
}

// Two processes that both believe they serve a shard: the second commit of
// the same outcome key fails as a whole with ErrOutcomeExists, and the
// first outcome and state stay as they were (the double-owner case of
// issue 23: never applied twice).
func TestPGOutcomeExistsFromAnotherProcess(t *testing.T) {
	url := pgtest.Database(t)
	a := pgShardOn(t, migratedPool(t, url, 1), 0, fence{})
	b := pgShardOn(t, migratedPool(t, url, 1), 0, fence{}) // another pool: another process
	t0 := time.Now()
	recs, outs := pgPurchase(t, "alice", 1, 2, 900, t0)
	if err := a.put(recs, outs, nil); err != nil {
		t.Fatal(err)
	}
	recs, outs = pgPurchase(t, "alice", 1, 2, 800, t0.Add(time.Second))
	bob, bobOut := pgPurchase(t, "bob", 1, 1, 1000, t0)
	recs["bob"] = bob["bob"]
	for k, o := range bobOut {
		outs[k] = o
	}
	err := b.put(recs, outs, nil)
	if !errors.Is(err, ErrOutcomeExists) || !errors.Is(err, ErrStore) || storeReason(err) != reasonConflict {
		t.Fatalf("second put = %v, want ErrOutcomeExists (reason conflict)", err)
	}
	if !strings.Contains(err.Error(), "alice/req/1") {
		t.Errorf("error %q does not name the key", err)
	}
	for _, st := range []*pgShard{a, b} {
		rec, err := st.get("alice")
		if err != nil || rec.version != 2 || rec.state.(interface{ GetGold() int64 }).GetGold() != 900 {
			t.Fatalf("alice after the refused commit: %v, %v; want the first commit's", rec, err)
		}
		so, err := st.outcome(requestKey("alice", 1))
		if err != nil || so.GetAppliedAtMs() != t0.UnixMilli() {
			t.Fatalf("alice's outcome after the refused commit: %v, %v; want the first", so, err)
		}
		wantStored(t, st, "bob", 0, 1, 0) // nothing of the refused batch
	}
}

// Another process purging the shard's outcomes makes this one's next
// commit fail (conflict), because its REQUEST_EXPIRED check relied on the
// old purged_up_to_ms; the store has the new value then, and commits again.
func TestPGPurgeByAnotherProcess(t *testing.T) {
	url := pgtest.Database(t)
	a := pgShardOn(t, migratedPool(t, url, 1), 0, fence{})
	b := pgShardOn(t, migratedPool(t, url, 1), 0, fence{})
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	recs, outs := pgPurchase(t, "alice", 1, 2, 900, t0)
	if err := a.put(recs, outs, nil); err != nil {
		t.Fatal(err)
	}
	if n, more, err := a.purge(t0.Add(time.Minute), 10); n != 1 || more || err != nil {
		t.Fatalf("purge = %d, %v, %v", n, more, err)
	}
	if b.purgedUpTo() != 0 {
		t.Fatalf("b's purgedUpTo = %d before it looked", b.purgedUpTo())
	}
	recs, outs = pgPurchase(t, "alice", 2, 3, 800, t0.Add(2*time.Minute))
	if err := b.put(recs, outs, nil); !errors.Is(err, errShardChanged) || storeReason(err) != reasonConflict {
		t.Fatalf("put after another's purge = %v, want errShardChanged (reason conflict)", err)
	}
	if b.purgedUpTo() != t0.UnixMilli() {
		t.Fatalf("b's purgedUpTo = %d, want %d", b.purgedUpTo(), t0.UnixMilli())
	}
	wantStored(t, b, "alice", 2, 2, 0)
	if err := b.put(recs, outs, nil); err != nil {
		t.Fatalf("put once b knows: %v", err)
	}
	wantStored(t, a, "alice", 3, 2, 3)
}

// A shard's purge deletes only its own outcomes.
func TestPGPurgeKeepsOtherShards(t *testing.T) {
	pool := migratedPool(t, pgtest.Database(t), 2)
	s0, s1 := pgShardOn(t, pool, 0, fence{}), pgShardOn(t, pool, 1, fence{})
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, st := range []*pgShard{s0, s1} {
		recs, outs := pgPurchase(t, fmt.Sprintf("p%d", i), 1, 2, 900, t0)
		if err := st.put(recs, outs, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, err := s0.purge(t0.Add(time.Hour), 10); n != 1 || err != nil {
		t.Fatalf("purge of shard 0 = %d, %v", n, err)
	}
	if outcomeCount(t, s0) != 0 || outcomeCount(t, s1) != 1 || s1.purgedUpTo() != 0 {
		t.Fatalf("after shard 0's purge: %d and %d outcomes, shard 1 purged up to %d", outcomeCount(t, s0), outcomeCount(t, s1), s1.purgedUpTo())
	}
}

// A players row that is no PlayerRecord of the game's state is a clear
// error of the store, answered INTERNAL (not UNAVAILABLE: retrying does not
// help), and so is a corrupt outcome; the shard serves its other players.
func TestPGCorruptRows(t *testing.T) {
	ts := newTestStore(t, StorePostgres)
	pool := ts.pool(t)
	st := pgShardOn(t, pool, 0, fence{})
	recs, outs := pgPurchase(t, "alice", 1, 2, 900, time.Now())
	if err := st.put(recs, outs, nil); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, pool, `UPDATE players SET record = '\x0aff01'::bytea WHERE player_id = 'alice'`)
	sqlExec(t, pool, `UPDATE outcomes SET body = '\x0aff01'::bytea WHERE player_id = 'alice'`)
	_, err := st.get("alice")
	if !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), `decode the players row of "alice"`) || storeReason(err) != reasonIO {
		t.Fatalf("get of a corrupt row = %v", err)
	}
	if _, err := st.outcome(requestKey("alice", 1)); !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), "decode stored outcome") {
		t.Fatalf("outcome of a corrupt row = %v", err)
	}
	e := start(t, envOpts{store: ts})
	_, err = e.cli.Do(ctxT(t), profileReq("alice", ""))
	wantStatus(t, err, codes.Internal, "decode the players row")
	e.login("bob")
}

// The database killed under a running server: the commit that was under
// way and every request after it are answered UNAVAILABLE with a retry
// delay (never INTERNAL), nothing refused is applied, and once the
// database is back the server recovers by itself: the refused purchase,
// resent with its id, is applied once.
func TestPGDatabaseKilled(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Options{})
	if errors.Is(err, pgtest.ErrNotInstalled) {
		pgtest.Shared(t) // skips, or fails under LEVEE_REQUIRE_POSTGRES
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	var kill atomic.Bool
	ts := &testStore{kind: StorePostgres, url: srv.NewDatabase(t)}
	logs := &lockedBuffer{}
	e := start(t, envOpts{store: ts, log: slog.New(slog.NewJSONHandler(logs, nil)), hookCommit: func() error {
		if kill.CompareAndSwap(true, false) {
			return srv.Kill() // inside the transaction, before it commits
		}
		return nil
	}})
	unavailableErrs := func() float64 {
		return testutilValue(e.srv.m.storeErrors.WithLabelValues(storeOpCommit, reasonUnavailable))
	}
	e.login("alice")
	e.call(buyReq("alice", 1, "sword", 1))

	kill.Store(true)
	_, err = e.cli.Do(ctxT(t), buyReq("alice", 2, "potion", 1))
	wantUnavailable(t, "the commit the kill interrupted", err, "database is unavailable")
	if n := unavailableErrs(); n != 1 {
		t.Fatalf("logic_store_errors_total{commit,unavailable} = %v, want 1", n)
	}
	if !strings.Contains(logs.String(), "database unavailable") {
		t.Errorf("no log line says the database is unavailable:\n%s", logs)
	}
	// While it is down: reads and new players too.
	for _, req := range []*leveev2.LogicRequest{buyReq("alice", 2, "potion", 1), profileReq("alice", ""), loginReq("bob")} {
		_, err := e.cli.Do(ctxT(t), req)
		wantUnavailable(t, fmt.Sprintf("%v while the database is down", req), err, "")
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var r *reply
	testwait.Until(t, "the purchase to go through again", func() bool {
		rep, err := e.cli.Do(ctxT(t), buyReq("alice", 2, "potion", 1))
		if err != nil {
			wantUnavailable(t, "a resend while the pool reconnects", err, "")
			return false
		}
		r = view(rep)
		return true
	})
	if b := r.GetBuyItem(); b.GetReplayed() || b.GetPlayer().GetGold() != 890 || b.GetPlayer().GetVersion() != 3 {
		t.Fatalf("the refused purchase resent after the restart: %v (want applied once: 890 gold, version 3)", b)
	}
	if b := e.call(buyReq("alice", 2, "potion", 1)).GetBuyItem(); !b.GetReplayed() {
		t.Fatalf("second resend: %v", b)
	}
	if p := e.profile("alice"); p.GetGold() != 890 || p.GetInventory()["potion"] != 1 {
		t.Fatalf("alice: %v", p)
	}
	e.login("bob")
}

// wantUnavailable checks that err is UNAVAILABLE, typed, with
// storeRetryAfter, and (unless msg is "") a message containing msg.
func wantUnavailable(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("%s: %v, want UNAVAILABLE", what, err)
	}
	e := apperr.FromStatus(err)
	if e.Code != leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE || e.RetryAfter != storeRetryAfter || !strings.Contains(e.Message, msg) {
		t.Fatalf("%s: code %v, retry after %v, message %q; want UNAVAILABLE, %v, %q", what, e.Code, e.RetryAfter, e.Message, storeRetryAfter, msg)
	}
}

// Two logic servers on one database both serving shard 0 (no leases:
// Config.staticPG): a
// purchase that both apply at once is committed by one; the other's commit
// fails on the outcome's key (UNAVAILABLE, retry), applies nothing, and
// that server then reads the player again: the resend is the first's
// replay, and its next purchase starts from the state the first committed.
func TestPGTwoServersOneShard(t *testing.T) {
	ts := newTestStore(t, StorePostgres)
	hold, held := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	static := func(c *Config) { c.staticPG = true }
	b := start(t, envOpts{store: ts, cfg: static, hookCommit: func() error {
		if armed.CompareAndSwap(true, false) {
			close(held)
			<-hold // its outcome inserted, not yet committed
		}
		return nil
	}})
	a := start(t, envOpts{store: ts, cfg: static})
	a.login("alice")
	pool := ts.pool(t)

	armed.Store(true)
	bDone := make(chan error, 1)
	go func() {
		_, err := b.cli.Do(ctxT(t), buyReq("alice", 1, "sword", 1))
		bDone <- err
	}()
	<-held
	aDone := make(chan error, 1)
	go func() {
		_, err := a.cli.Do(ctxT(t), buyReq("alice", 1, "sword", 1))
		aDone <- err
	}()
	testwait.Until(t, "a's insert to wait for b's uncommitted outcome", func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n > 0
	})
	close(hold)
	if err := <-bDone; err != nil {
		t.Fatalf("b's purchase: %v", err)
	}
	wantUnavailable(t, "a's commit of the same purchase", <-aDone, "another logic process wrote this shard")
	if n := testutilValue(a.srv.m.storeErrors.WithLabelValues(storeOpCommit, reasonConflict)); n != 1 {
		t.Fatalf("logic_store_errors_total{commit,conflict} = %v, want 1", n)
	}
	r := a.call(buyReq("alice", 1, "sword", 1)).GetBuyItem()
	if !r.GetReplayed() || r.GetPlayer().GetGold() != 900 || r.GetPlayer().GetVersion() != 2 {
		t.Fatalf("a's resend: %v, want b's purchase replayed", r)
	}
	r = a.call(buyReq("alice", 2, "potion", 1)).GetBuyItem()
	if r.GetReplayed() || r.GetPlayer().GetGold() != 890 || r.GetPlayer().GetVersion() != 3 {
		t.Fatalf("a's next purchase: %v, want it on b's state (890 gold, version 3)", r)
	}
	st, done := ts.open(t)
	defer done()
	if rec, err := st.get("alice"); err != nil || rec.version != 3 || !proto.Equal(rec.state, r.GetPlayer().msg()) {
		t.Fatalf("stored: %v, %v; a committed %v", rec, err, r.GetPlayer())
	}
	// (b still has its own commit cached: without the lease's fence, two
	// processes serving one shard could lose each other's updates; they
	// can never apply a request twice.)
}

// How the shard answers each kind of failed commit, and what it counts.
func TestCommitFailedAnswers(t *testing.T) {
	s := &Server{cfg: DefaultConfig(), m: newMetrics(prometheus.NewRegistry()), log: slog.New(slog.DiscardHandler), clk: clock.NewFake(time.Unix(1e9, 0))}
	sh := newShard(0, nil, s)
	wrap := func(err error) error { return fmt.Errorf("%w: shard 0: commit: %w", ErrStore, err) }
	for _, c := range []struct {
		err      error
		reason   string
		code     leveev2.ErrorCode
		pushback time.Duration
	}{
		{wrap(fmt.Errorf("%w: lease gone", ErrFenced)), reasonFenced, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, storeRetryAfter},
		{wrap(fmt.Errorf("%w (key): %w", ErrOutcomeExists, &pgconn.PgError{Code: pgUniqueViolation})), reasonConflict, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, storeRetryAfter},
		{wrap(&pgconn.PgError{Code: pgAdminShutdown}), reasonUnavailable, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, storeRetryAfter},
		{wrap(syscall.ENOSPC), reasonNoSpace, leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, storageRetryAfter},
		{wrap(errors.New("disk on fire")), reasonIO, leveev2.ErrorCode_ERROR_CODE_INTERNAL, 0},
	} {
		r := sh.commitFailed(&batch{}, c.err)
		if got := apperr.Code(r.err); got != c.code || r.pushback != c.pushback || r.reply != nil {
			t.Errorf("%v: answered %v (%v) after %v, want %v after %v", c.err, got, r.err, r.pushback, c.code, c.pushback)
		}
		if n := testutilValue(s.m.storeErrors.WithLabelValues(storeOpCommit, c.reason)); n != 1 {
			t.Errorf("%v: logic_store_errors_total{commit,%s} = %v, want 1", c.err, c.reason, n)
		}
	}
	if !sh.fencedSeen {
		t.Error("a fenced commit did not reach the shard's fenced hook")
	}
}

// The PostgreSQL side of storeReason: connection trouble is unavailable,
// a refused statement is not.
func TestStoreReasonPostgres(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&pgconn.PgError{Code: pgAdminShutdown}, reasonUnavailable},
		{&pgconn.PgError{Code: "08006"}, reasonUnavailable},
		{&pgconn.PgError{Code: pgTooManyConnections}, reasonUnavailable},
		{&pgconn.PgError{Code: pgCannotConnectNow}, reasonUnavailable},
		{&pgconn.PgError{Code: pgDiskFull, Message: "could not extend file"}, reasonNoSpace},
		{&pgconn.PgError{Code: pgUniqueViolation}, reasonIO}, // a players row: not an outcome's
		{&pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, reasonIO},
		{fmt.Errorf("acquire: %w", context.DeadlineExceeded), reasonUnavailable},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, reasonUnavailable},
		{fmt.Errorf("%w: x", ErrFenced), reasonFenced},
		{fmt.Errorf("%w: x", ErrOutcomeExists), reasonConflict},
		{fmt.Errorf("%w: x", errShardChanged), reasonConflict},
	} {
		if got := storeReason(fmt.Errorf("%w: %w", ErrStore, c.err)); got != c.want {
			t.Errorf("storeReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	// A pool on a port nobody listens on.
	pool, err := pgxpool.New(context.Background(), "postgres://levee:secret-pw@127.0.0.1:1/levee?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := &pgShard{pgStore: newPGStore(pool, arenaState)}
	recs, outs := pgPurchase(t, "alice", 1, 1, 1000, time.Now())
	err = st.put(recs, outs, nil)
	if storeReason(err) != reasonUnavailable || strings.Contains(err.Error(), "secret-pw") {
		t.Fatalf("put to no database = %v (reason %q), want unavailable without the password", err, storeReason(err))
	}
	_, err = st.get("alice")
	if r := internalError(err); apperr.Code(r.err) != leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE || r.pushback != storeRetryAfter {
		t.Fatalf("a read from no database answered %v after %v, want UNAVAILABLE after %v", r.err, r.pushback, storeRetryAfter)
	}
}
