package pgschema

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leveehq/levee/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := Connect(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestProcessesStartingAtOnceMigrateOnce(t *testing.T) {
	url := pgtest.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		pool := connect(t, url)
		wg.Go(func() { errs[i] = Migrate(ctx, pool, 16, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	pool := connect(t, url)
	var applied, leases int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+VersionTable+` WHERE version_id > 0`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != int(Latest()) {
		t.Fatalf("%d versions recorded, want %d (each once)", applied, Latest())
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM shard_leases`).Scan(&leases); err != nil || leases != 16 {
		t.Fatalf("%d lease rows (%v), want 16", leases, err)
	}
	// Started again: nothing to do, no error.
	if err := Migrate(ctx, pool, 16, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRefusesADatabaseNewerThanTheBinary(t *testing.T) {
	pool := connect(t, pgtest.Database(t))
	ctx := context.Background()
	if err := Migrate(ctx, pool, 8, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+VersionTable+` (version_id, is_applied) VALUES ($1, true)`, Latest()+1); err != nil {
		t.Fatal(err)
	}
	err := Migrate(ctx, pool, 8, nil)
	if !errors.Is(err, ErrTooNew) {
		t.Fatalf("got %v, want ErrTooNew", err)
	}
	t.Log(err)
}

func TestRefusesAnotherShardCount(t *testing.T) {
	pool := connect(t, pgtest.Database(t))
	ctx := context.Background()
	if err := Migrate(ctx, pool, 8, nil); err != nil {
		t.Fatal(err)
	}
	err := Migrate(ctx, pool, 16, nil)
	if !errors.Is(err, ErrShards) {
		t.Fatalf("got %v, want ErrShards", err)
	}
	var leases int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM shard_leases`).Scan(&leases); err != nil || leases != 8 {
		t.Fatalf("%d lease rows (%v) after the refusal, want 8 unchanged", leases, err)
	}
}

func TestAWrongURLIsAClearError(t *testing.T) {
	_, err := Connect(context.Background(), "postgres://%zz", 1)
	if err == nil {
		t.Fatal("no error")
	}
}
