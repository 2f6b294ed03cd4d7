package pgtest

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// queryInt runs one statement on url and returns its single int.
func queryInt(t *testing.T, url, sql string) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, sql).Scan(&n)
	return n, err
}

func TestDatabasesAreSeparateAndSurviveARestart(t *testing.T) {
	srv, err := Start(Options{})
	if err != nil {
		if err == ErrNotInstalled {
			Shared(t) // skips or fails as the environment says
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	a, b := srv.NewDatabase(t), srv.NewDatabase(t)
	if a == b {
		t.Fatalf("two databases share the URL %s", a)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE TABLE x (n int)", "INSERT INTO x VALUES (7)"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)
	if _, err := queryInt(t, b, "SELECT n FROM x"); err == nil {
		t.Fatal("database b sees database a's table")
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := queryInt(t, a, "SELECT 1"); err == nil {
		t.Fatal("a killed server still answers")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	n, err := queryInt(t, a, "SELECT n FROM x")
	if err != nil || n != 7 {
		t.Fatalf("after restart: %d, %v; want 7", n, err)
	}
}

func TestSharedIsOneServer(t *testing.T) {
	if Shared(t) != Shared(t) {
		t.Fatal("Shared started two servers")
	}
	if n, err := queryInt(t, Database(t), "SELECT 41 + 1"); err != nil || n != 42 {
		t.Fatalf("got %d, %v", n, err)
	}
}

// Kill returns once every process of the server is gone, not only the
// postmaster (its children are group leaders of their own and exit a
// moment later), so that Restart finds the shared memory free: a restart
// right after a kill, again and again.
func TestKillWaitsForEveryProcess(t *testing.T) {
	srv, err := Start(Options{})
	if errors.Is(err, ErrNotInstalled) {
		Shared(t) // skips, or fails under LEVEE_REQUIRE_POSTGRES
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dir, err := filepath.EvalSymlinks(srv.dataDir())
	if err != nil {
		t.Fatal(err)
	}
	if !inDir(dir) {
		t.Fatal("no process seen in the running server's data directory")
	}
	for i := range 3 {
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		if inDir(dir) {
			t.Fatalf("kill %d: a process still runs in %s", i, dir)
		}
		if err := srv.Restart(); err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
	}
}
