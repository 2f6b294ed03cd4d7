// Package pgtest runs a throwaway PostgreSQL server for tests, from the
// server binaries installed on the machine (Debian's postgresql package:
// initdb, postgres, pg_ctl), as internal/testbrowser runs chromium.
//
// Start makes a cluster with initdb in a temporary directory and starts
// postgres on it, listening on a loopback port outside the ephemeral range
// and on a Unix socket in that directory, with durability settings a test
// does not need (fsync off) unless Options.Durable. Stop stops it and
// removes the directory. A test binary usually starts one server in
// TestMain (Main) and gives every test a database of its own (NewDatabase).
//
// When the binaries are missing the tests that need them are skipped, or
// fail when LEVEE_REQUIRE_POSTGRES is set (make test sets it;
// scripts/ensure-postgres.sh installs the package).
//
// PostgreSQL refuses to run as root. When the test runs as root, the
// server runs as the user "postgres" (Debian's package creates it) or else
// "nobody", which then owns the temporary directory.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leveehq/levee/internal/freeport"
)

// RequireEnv, when set, turns a missing PostgreSQL into a test failure
// instead of a skip.
const RequireEnv = "LEVEE_REQUIRE_POSTGRES"

// ErrNotInstalled is returned by Find when the server binaries are not on
// the machine.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL server binaries (initdb, postgres, pg_ctl) not found on PATH nor under /usr/lib/postgresql/*/bin; run scripts/ensure-postgres.sh")

// Find returns the directory holding initdb, postgres and pg_ctl.
func Find() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if hasServer(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// The newest major version first.
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if hasServer(d) {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func hasServer(dir string) bool {
	for _, b := range []string{"initdb", "postgres", "pg_ctl"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}

// Options shape the server Start makes.
type Options struct {
	// Durable keeps fsync and synchronous_commit on, as in production
	// (benchmarks use it); off (fsync=off), a test's commits do not wait for
	// the disk, but a killed server still keeps every acknowledged commit.
	Durable bool
	// Dir is where the cluster lives; empty: a new temporary directory,
	// removed by Stop.
	Dir string
	// Settings are more postgres -c settings ("max_connections=200").
	Settings []string
	// Log receives the server's output; nil: a file "postgres.log" in
	// the cluster's directory.
	Log *os.File
}

// Server is one running PostgreSQL.
type Server struct {
	bin     string
	dir     string // the cluster's parent: data/, the socket, the log
	ownDir  bool
	port    int
	opts    Options
	cred    *syscall.Credential
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	dbCount atomic.Int64
}

// Start makes and starts a cluster. The caller must Stop it.
func Start(opts Options) (*Server, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, opts: opts}
	if s.cred, err = credential(); err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		if s.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		s.ownDir = true
	} else {
		s.dir = opts.Dir
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	if err := s.chown(s.dir); err != nil {
		s.cleanup()
		return nil, err
	}
	addr, err := freeport.Pick()
	if err != nil {
		s.cleanup()
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	_, p, _ := net.SplitHostPort(addr)
	s.port, _ = strconv.Atoi(p)
	if err := s.initdb(); err != nil {
		s.cleanup()
		return nil, err
	}
	if err := s.start(); err != nil {
		s.cleanup()
		return nil, err
	}
	return s, nil
}

// credential is the user the server runs as: nil (the test's own) unless
// the test runs as root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("pgtest: running as root, and neither user postgres nor nobody exists to run PostgreSQL as (it refuses root)")
}

func (s *Server) chown(path string) error {
	if s.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	return cmd
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

func (s *Server) initdb() error {
	if _, err := os.Stat(filepath.Join(s.dataDir(), "PG_VERSION")); err == nil {
		return nil // Options.Dir holds a cluster already
	}
	cmd := s.command("initdb", "-D", s.dataDir(), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return nil
}

// start runs postgres in the foreground of a child process (no pg_ctl
// daemon), so that it dies with this process's test run and Kill reaches it.
func (s *Server) start() error {
	args := []string{"-D", s.dataDir(), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300",
		"-c", "shared_buffers=64MB", "-c", "log_min_messages=warning"}
	if !s.opts.Durable {
		// A commit still waits for its WAL to reach the kernel
		// (synchronous_commit on), so a killed postgres keeps every
		// commit it acknowledged; only a lost machine would not.
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off")
	}
	for _, set := range s.opts.Settings {
		args = append(args, "-c", set)
	}
	cmd := s.command("postgres", args...)
	log := s.opts.Log
	if log == nil {
		f, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		defer f.Close() // the child has its own descriptor
		log = f
	}
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: a terminal's ^C reaches the test, which stops
	// the server in order.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // owned by the server; ends with the child
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return s.waitReady(30 * time.Second)
}

// waitReady polls a connection until the server accepts it, or it exits,
// or d passes.
func (s *Server) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		select {
		case <-s.exited:
			return fmt.Errorf("pgtest: postgres exited before it accepted a connection; see %s", s.logPath())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres not ready after %v: %w; see %s", d, err, s.logPath())
		}
		time.Sleep(50 * time.Millisecond) // a poll interval, not a wait for an event
	}
}

func (s *Server) logPath() string {
	if s.opts.Log != nil {
		return s.opts.Log.Name()
	}
	return filepath.Join(s.dir, "postgres.log")
}

// Port is the loopback TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// Addr is the server's host:port on loopback.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is a connection URL for database db over loopback TCP, as the
// superuser "postgres" (trust authentication: no password).
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: s.Addr(), Path: "/" + db}
	q := url.Values{"sslmode": {"disable"}}
	u.RawQuery = q.Encode()
	return u.String()
}

// NewDatabase creates a database of its own for t and returns its URL;
// t's cleanup drops it (closing whatever connections are still open).
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbCount.Add(1))
	if err := s.exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: %v", err)
		}
	})
	return s.URL(name)
}

func (s *Server) exec(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	if err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// Kill stops the server at once (SIGKILL on the postmaster: its children
// notice and exit), as a crash would; Restart brings it back on the same
// directory and port.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	return s.waitGone()
}

// goneTimeout bounds how long Kill and stop wait for the server's other
// processes to be gone after the postmaster.
const goneTimeout = 30 * time.Second

// waitGone waits until no live process runs in the cluster's data
// directory. The postmaster's children (checkpointer, walwriter, backends)
// are group leaders of their own, so the SIGKILL of the postmaster's group
// does not reach them: they notice its death and exit a moment later, and
// until they have, they hold the cluster's shared memory, which a restarted
// postmaster refuses ("pre-existing shared memory block is still in use").
// They all run in the data directory (zombies have no directory).
func (s *Server) waitGone() error {
	dir := s.dataDir()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	deadline := time.Now().Add(goneTimeout)
	for inDir(dir) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: processes of the stopped server still run in %s after %v", dir, goneTimeout)
		}
		time.Sleep(10 * time.Millisecond) // a poll interval: no event tells a process of another's death
	}
	return nil
}

// inDir says whether /proc shows a process whose working directory is dir.
func inDir(dir string) bool {
	cwds, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, c := range cwds {
		if d, err := os.Readlink(c); err == nil && d == dir {
			return true
		}
	}
	return false
}

// Restart stops the server (fast shutdown, or a kill if it is already
// gone) and starts it again on the same cluster and port.
func (s *Server) Restart() error {
	if err := s.stop(); err != nil {
		return err
	}
	return s.start()
}

// stop asks the postmaster for a fast shutdown (SIGINT) and waits up to a
// bound for it, then kills the group.
func (s *Server) stop() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	// Whatever of the group outlived the postmaster (none, normally).
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return s.waitGone()
}

// Stop stops the server and removes its directory if Start made it.
func (s *Server) Stop() error {
	err := s.stop()
	s.cleanup()
	return err
}

func (s *Server) cleanup() {
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
}

var (
	shared    *Server
	sharedErr error
	sharedMu  sync.Mutex
)

// Main runs a test binary's tests with a shared server that Shared hands
// out, started on first use and stopped after the last test. Use it as
// TestMain's body: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the shared server if one was started (Main calls it
// after the tests); a package whose TestMain does more than Main calls it
// after m.Run.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		_ = shared.Stop()
		shared = nil
	}
}

// Shared returns the test binary's shared server (see Main), starting it
// on first use. Without the binaries t is skipped, or fails when
// LEVEE_REQUIRE_POSTGRES is set.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start(Options{})
	}
	if sharedErr != nil {
		if errors.Is(sharedErr, ErrNotInstalled) && os.Getenv(RequireEnv) == "" {
			t.Skipf("%v (or set %s=1 to make this a failure)", sharedErr, RequireEnv)
		}
		t.Fatalf("%v", sharedErr)
	}
	return shared
}

// Database is Shared(t).NewDatabase(t): a fresh database on the shared
// server, dropped when t ends.
func Database(t testing.TB) string {
	t.Helper()
	return Shared(t).NewDatabase(t)
}
