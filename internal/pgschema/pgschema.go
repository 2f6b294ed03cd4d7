// Package pgschema is the PostgreSQL schema of Levee's logic tier
// (logic -store=postgres): versioned migrations embedded in the binary
// (migrations/*.sql, pressly/goose), applied at start-up under a
// PostgreSQL advisory lock, so that several logic processes starting at
// once apply each migration exactly once. A database migrated by a newer
// Levee than this binary is refused with ErrTooNew.
package pgschema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var embedded embed.FS

// VersionTable is goose's table of applied versions.
const VersionTable = "levee_schema_version"

// lockID is the advisory lock held while migrating ("levee" in ASCII).
const lockID int64 = 0x6c65766565

// ErrTooNew: the database was migrated by a newer Levee than this binary.
var ErrTooNew = errors.New("pgschema: the database's schema is newer than this binary")

// ErrShards: the database was set up for another number of shards.
var ErrShards = errors.New("pgschema: shard count mismatch")

// Latest is the newest schema version this binary knows.
func Latest() int64 {
	p, err := provider(nil)
	if err != nil {
		panic(err) // the embedded files are fixed at build time
	}
	srcs := p.ListSources()
	return srcs[len(srcs)-1].Version
}

func migrations() fs.FS {
	sub, err := fs.Sub(embedded, "migrations")
	if err != nil {
		panic(err)
	}
	return sub
}

func provider(db *sql.DB, opts ...goose.ProviderOption) (*goose.Provider, error) {
	opts = append([]goose.ProviderOption{goose.WithTableName(VersionTable), goose.WithDisableGlobalRegistry(true)}, opts...)
	if db == nil {
		// ListSources only: goose wants a database handle, never used.
		db = &sql.DB{}
	}
	return goose.NewProvider(goose.DialectPostgres, db, migrations(), opts...)
}

// Migrate brings the database behind pool to Latest, waiting up to the
// context's deadline for another process's migration lock, and records the
// cluster's shard count on first use. It refuses (ErrTooNew) a database
// newer than this binary, and (ErrShards) one set up for another shard
// count, changing nothing.
func Migrate(ctx context.Context, pool *pgxpool.Pool, shards int, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID), lock.WithLockTimeout(1, 120))
	if err != nil {
		return fmt.Errorf("pgschema: %w", err)
	}
	p, err := provider(db, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("pgschema: %w", err)
	}
	if err := checkNotNewer(ctx, p); err != nil {
		return err
	}
	res, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("pgschema: migrate: %w", err)
	}
	for _, r := range res {
		log.Info("applied schema migration", "version", r.Source.Version, "file", r.Source.Path, "took", r.Duration.Round(time.Millisecond))
	}
	if err := checkNotNewer(ctx, p); err != nil { // a newer process may have migrated meanwhile
		return err
	}
	return checkShards(ctx, pool, shards)
}

func checkNotNewer(ctx context.Context, p *goose.Provider) error {
	cur, err := p.GetDBVersion(ctx)
	if errors.Is(err, goose.ErrVersionNotFound) {
		return nil // a fresh database
	}
	if err != nil {
		// No version table yet reads as an error in some goose versions:
		// Up will create it.
		return nil
	}
	if latest := Latest(); cur > latest {
		return fmt.Errorf("%w: it is at version %d, and this logic knows versions up to %d; run a Levee release at least as new as the one that migrated it (or restore a backup from before): refusing to start", ErrTooNew, cur, latest)
	}
	return nil
}

// checkShards records shards as the cluster's shard count the first time,
// and after that refuses another.
func checkShards(ctx context.Context, pool *pgxpool.Pool, shards int) error {
	if shards <= 0 {
		return fmt.Errorf("%w: -shards %d must be positive", ErrShards, shards)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO levee_cluster (id, shards) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, shards); err != nil {
		return fmt.Errorf("pgschema: record the shard count: %w", err)
	}
	var have int
	if err := pool.QueryRow(ctx, `SELECT shards FROM levee_cluster WHERE id = 1`).Scan(&have); err != nil {
		return fmt.Errorf("pgschema: read the shard count: %w", err)
	}
	if have != shards {
		return fmt.Errorf("%w: the database holds %d shards and this logic runs with -shards %d; every logic process and gate of a cluster must use the database's count", ErrShards, have, shards)
	}
	// One lease row and one state row per shard, made once.
	if _, err := pool.Exec(ctx, `INSERT INTO shard_leases (shard) SELECT generate_series(0, $1 - 1) ON CONFLICT DO NOTHING`, shards); err != nil {
		return fmt.Errorf("pgschema: make the lease rows: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO shard_state (shard) SELECT generate_series(0, $1 - 1) ON CONFLICT DO NOTHING`, shards); err != nil {
		return fmt.Errorf("pgschema: make the shard rows: %w", err)
	}
	return nil
}

// Connect opens a pool on url (a libpq URL or key=value string; the
// password may also come from PGPASSWORD or a .pgpass file, as with psql)
// and checks that it answers within ctx.
func Connect(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgschema: -postgres-url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgschema: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgschema: connect to %s: %w", redact(cfg.ConnConfig), err)
	}
	return pool, nil
}

// redact names the server without the password.
func redact(c *pgx.ConnConfig) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}
