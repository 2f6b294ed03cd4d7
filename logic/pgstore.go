package logic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/reflect/protoreflect"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The PostgreSQL store (Config.Store "postgres"): the shards' players and
// outcomes are rows of the tables of internal/pgschema, in one database
// that every logic process shares through its own pool. A shard's group
// commit is one transaction. Exactly-once is the database's own rule: an
// outcome is a row unique by (player_id, key), inserted (never upserted)
// in the transaction that carries the change it answers, so a second
// commit of the same request, from whichever process, fails as a whole
// (ErrOutcomeExists) and applies nothing. A fenced shard's commits also
// check, in the transaction and with the lease row locked FOR SHARE, that
// the lease is still its own (ErrFenced), so that a process paused past
// its lease cannot write after another took the shard over.

// pgOpTimeout bounds one operation of a shard on the database (waiting for
// a pooled connection included): a database that does not answer makes the
// operation fail as unavailable instead of holding the shard.
const pgOpTimeout = 5 * time.Second

// pgStore is the shared part of the PostgreSQL store: the pool and the
// players' state type. forShard makes each shard's store.
type pgStore struct {
	pool    *pgxpool.Pool
	state   protoreflect.MessageType
	timeout time.Duration // of one operation (pgOpTimeout)
}

func newPGStore(pool *pgxpool.Pool, typ protoreflect.MessageType) *pgStore {
	return &pgStore{pool: pool, state: typ, timeout: pgOpTimeout}
}

// fence is the lease a shard's commits are made under: the shard_leases
// row must name node as owner at epoch, unexpired by the database's clock.
// The zero fence (epoch 0) is no check (a store used alone, or static
// hosting without leases).
type fence struct {
	node  string
	epoch int64
}

func (f fence) on() bool { return f.epoch != 0 }

// pgShard is one shard's store in PostgreSQL.
type pgShard struct {
	*pgStore
	shard int
	fence fence
	// purged is shard_state.purged_up_to_ms as this process last read or
	// wrote it.
	purged atomic.Int64
}

// forShard is shard's store, its commits fenced by f. It reads the shard's
// purged_up_to_ms, so it fails when the database cannot be reached or has
// no row for the shard (not migrated for this many shards).
func (p *pgStore) forShard(ctx context.Context, shard int, f fence) (*pgShard, error) {
	s := &pgShard{pgStore: p, shard: shard, fence: f}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var up int64
	err := p.pool.QueryRow(ctx, `SELECT purged_up_to_ms FROM shard_state WHERE shard = $1`, shard).Scan(&up)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: shard %d: the database has no shard_state row for it; was it migrated for another -shards?", ErrStore, shard)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: shard %d: read purged_up_to_ms: %w", ErrStore, shard, err)
	}
	s.purged.Store(up)
	return s, nil
}

func (s *pgShard) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout)
}

func (s *pgShard) get(id string) (*record, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT record FROM players WHERE player_id = $1`, id).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: shard %d: get %q: %w", ErrStore, s.shard, id, err)
	}
	rec, err := unmarshalRecord(v, s.state)
	if err != nil {
		return nil, fmt.Errorf("%w: shard %d: decode the players row of %q (%d bytes): %w", ErrStore, s.shard, id, len(v), err)
	}
	return rec, nil
}

// outcomePlayer is the player of an outcome key: what precedes its first
// '/' (a player id never contains one; see requestKey).
func outcomePlayer(key string) (string, error) {
	p, _, ok := strings.Cut(key, "/")
	if !ok || p == "" {
		return "", fmt.Errorf("outcome key %q has no player", key)
	}
	return p, nil
}

func (s *pgShard) outcome(key string) (*leveev2.StoredOutcome, error) {
	player, err := outcomePlayer(key)
	if err != nil {
		return nil, fmt.Errorf("%w: shard %d: %w", ErrStore, s.shard, err)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	var v []byte
	err = s.pool.QueryRow(ctx, `SELECT body FROM outcomes WHERE player_id = $1 AND key = $2`, player, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: shard %d: get outcome %q: %w", ErrStore, s.shard, key, err)
	}
	so, err := decodeOutcome(key, v)
	if err != nil {
		return nil, fmt.Errorf("%w: shard %d: %w", ErrStore, s.shard, err)
	}
	return so, nil
}

func (s *pgShard) purgedUpTo() int64 { return s.purged.Load() }

// The statements of a commit.
const (
	// pgFence holds the lease row FOR SHARE until the commit: a takeover
	// (which updates the row) waits for it, and a commit after a takeover
	// finds no row.
	pgFence = `SELECT 1 FROM shard_leases WHERE shard = $1 AND owner = $2 AND epoch = $3 AND expires_at > now() FOR SHARE`
	// pgPurged reads the shard's purged_up_to_ms as of the commit.
	pgPurged     = `SELECT purged_up_to_ms FROM shard_state WHERE shard = $1`
	pgPutPlayers = `INSERT INTO players (player_id, shard, record)
SELECT id, $2, rec FROM unnest($1::text[], $3::bytea[]) AS u(id, rec)
ON CONFLICT (player_id) DO UPDATE SET record = excluded.record, shard = excluded.shard`
	// A plain insert: a key already stored is a unique violation, which
	// rolls the whole commit back.
	pgPutOutcomes = `INSERT INTO outcomes (player_id, key, shard, applied_at_ms, body)
SELECT p, k, $3, at, body FROM unnest($1::text[], $2::text[], $4::bigint[], $5::bytea[]) AS u(p, k, at, body)`
)

// put commits recs and outs in one transaction: three round trips (begin,
// one batch of at most four statements whatever the batch's size, commit).
// It fails with ErrFenced when the shard is fenced and its lease is gone,
// with ErrOutcomeExists when an outcome key is already stored, and
// (errShardChanged) when another process purged the shard's outcomes since
// this one last looked; nothing is applied then.
func (s *pgShard) put(recs map[string]*record, outs map[string]outcome, hook func() error) error {
	fail := func(err error) error {
		return fmt.Errorf("%w: shard %d: commit %d records and %d outcomes: %w", ErrStore, s.shard, len(recs), len(outs), err)
	}
	ids := make([]string, 0, len(recs))
	vals := make([][]byte, 0, len(recs))
	for id, rec := range recs {
		v, err := rec.marshal()
		if err != nil {
			return fail(err)
		}
		ids, vals = append(ids, id), append(vals, v)
	}
	players := make([]string, 0, len(outs))
	keys := make([]string, 0, len(outs))
	ats := make([]int64, 0, len(outs))
	bodies := make([][]byte, 0, len(outs))
	for _, o := range outs {
		p, err := outcomePlayer(o.key)
		if err != nil {
			return fail(err)
		}
		players, keys = append(players, p), append(keys, o.key)
		ats, bodies = append(ats, max(o.at.UnixMilli(), 0)), append(bodies, o.enc)
	}

	ctx, cancel := s.ctx()
	defer cancel()
	tx, b, err := s.begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer rollback(tx)
	b.Queue(pgPurged, s.shard)
	if len(ids) > 0 {
		b.Queue(pgPutPlayers, ids, s.shard, vals)
	}
	if len(keys) > 0 {
		b.Queue(pgPutOutcomes, players, keys, s.shard, ats, bodies)
	}
	if err := s.sendPut(ctx, tx, b, len(ids) > 0, len(keys) > 0); err != nil {
		return fail(err)
	}
	if hook != nil {
		if err := hook(); err != nil {
			return fail(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return nil
}

// sendPut sends a commit's batch and reads its results in order.
func (s *pgShard) sendPut(ctx context.Context, tx pgx.Tx, b *pgx.Batch, players, outcomes bool) (err error) {
	br := tx.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if s.fence.on() {
		if err := fenceResult(br.QueryRow(), s.fence); err != nil {
			return err
		}
	}
	var up int64
	if err := br.QueryRow().Scan(&up); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return errors.New("no shard_state row for the shard")
		}
		return err
	}
	if cached := s.purged.Load(); up > cached {
		s.purged.Store(up)
		return fmt.Errorf("%w: purged_up_to_ms %d, was %d", errShardChanged, up, cached)
	}
	if players {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	if outcomes {
		if _, err := br.Exec(); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == pgUniqueViolation {
				return fmt.Errorf("%w (%s): %w", ErrOutcomeExists, pe.Detail, err)
			}
			return err
		}
	}
	return nil
}

// pgRollbackTimeout bounds the rollback of a failed transaction (after a
// commit, a no-op).
const pgRollbackTimeout = time.Second

// rollback ends tx if it has not committed; a failure leaves the
// connection to the pool, which closes it.
// begin starts one of the shard's write transactions and its batch, which
// opens with the fence when the shard is fenced: every write (a commit, a
// purge) checks the lease first, in the same transaction.
func (s *pgShard) begin(ctx context.Context) (pgx.Tx, *pgx.Batch, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	b := &pgx.Batch{}
	if s.fence.on() {
		b.Queue(pgFence, s.shard, s.fence.node, s.fence.epoch)
	}
	return tx, b, nil
}

func rollback(tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.Background(), pgRollbackTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// fenceResult reads the fence statement's row: none is ErrFenced.
func fenceResult(row pgx.Row, f fence) error {
	var one int
	err := row.Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: shard_leases no longer names %q at epoch %d (expired or taken over)", ErrFenced, f.node, f.epoch)
	}
	return err
}

// pgPurge deletes up to $3 of shard $1's outcomes applied before $2 (unix
// ms), oldest first, and advances purged_up_to_ms to the newest deleted if
// that is later. It returns how many it deleted, whether due ones remain,
// and purged_up_to_ms after it.
const pgPurge = `WITH cand AS (
	SELECT player_id, key, applied_at_ms FROM outcomes
	WHERE shard = $1 AND applied_at_ms < $2 ORDER BY applied_at_ms LIMIT ($3 + 1)
), victims AS (
	SELECT player_id, key FROM cand ORDER BY applied_at_ms LIMIT $3
), del AS (
	DELETE FROM outcomes o USING victims v WHERE o.player_id = v.player_id AND o.key = v.key
	RETURNING o.applied_at_ms
), agg AS (
	SELECT count(*) AS n, coalesce(max(applied_at_ms), 0) AS up FROM del
), upd AS (
	UPDATE shard_state st SET purged_up_to_ms = agg.up FROM agg
	WHERE st.shard = $1 AND agg.up > st.purged_up_to_ms
	RETURNING st.purged_up_to_ms
)
SELECT agg.n, (SELECT count(*) FROM cand) > $3,
	GREATEST(coalesce((SELECT purged_up_to_ms FROM upd), 0), coalesce((SELECT purged_up_to_ms FROM shard_state WHERE shard = $1), 0))
FROM agg`

// purge runs pgPurge in one transaction (fenced as commits are).
func (s *pgShard) purge(cutoff time.Time, limit int) (n int, more bool, err error) {
	fail := func(err error) (int, bool, error) {
		return 0, false, fmt.Errorf("%w: shard %d: purge outcomes applied before %d (at most %d): %w", ErrStore, s.shard, cutoff.UnixMilli(), limit, err)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	tx, b, err := s.begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer rollback(tx)
	b.Queue(pgPurge, s.shard, max(cutoff.UnixMilli(), 0), limit)
	var up int64
	err = func() (err error) {
		br := tx.SendBatch(ctx, b)
		defer func() {
			if cerr := br.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
		if s.fence.on() {
			if err := fenceResult(br.QueryRow(), s.fence); err != nil {
				return err
			}
		}
		return br.QueryRow().Scan(&n, &more, &up)
	}()
	if err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	if up > s.purged.Load() {
		s.purged.Store(up)
	}
	return n, more, nil
}

// close does nothing: the pool is the Server's, closed after every shard.
func (s *pgShard) close() error { return nil }
