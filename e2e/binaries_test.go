package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/freeport"
)

// buildBinaries builds the four commands once per test binary run.
var buildBinaries = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "levee-bin-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/gate", "./cmd/logic", "./cmd/battle", "./cmd/loadtest")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return dir, nil
})

func binDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binaries; skipped with -short")
	}
	dir, err := buildBinaries()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// freePort returns a loopback address that was free a moment ago, outside
// the kernel's ephemeral range (a binary binds it later).
func freePort(t *testing.T) string { return freeport.Addr(t) }

// proc is one running binary; Cleanup kills it if the test did not stop it.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan error
}

func startProc(t *testing.T, bin, name string, args ...string) *proc {
	t.Helper()
	p, err := launch(t, binDir(t), bin, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// launch is startProc for any goroutine (a fault's): an error instead of
// t.Fatal. dir is binDir(t), which the caller got on the test's goroutine.
func launch(t *testing.T, dir, bin, name string, args ...string) (*proc, error) {
	p := &proc{name: name, cmd: exec.Command(filepath.Join(dir, bin), args...), out: &bytes.Buffer{}, done: make(chan error, 1)}
	if !slices.Contains(args, "-cluster-ca") {
		// Plaintext between the tiers on loopback: the tiers refuse to
		// start without a choice.
		p.cmd.Env = append(os.Environ(), "LEVEE_INSECURE=1")
	}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out)
		}
	})
	return p, nil
}

// waitHealthy polls the binary's healthcheck subcommand until it passes.
func waitHealthy(t *testing.T, bin, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if exec.Command(filepath.Join(binDir(t), bin), "healthcheck", "-addr", addr).Run() == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s at %s not healthy after 20s", bin, addr)
		}
		time.Sleep(100 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

// stopGracefully sends SIGTERM and expects a clean exit.
func (p *proc) stopGracefully(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err // let Cleanup's wait return
		if err != nil {
			t.Errorf("%s exited with %v after SIGTERM, want 0\n%s", p.name, err, p.out)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s still running 30s after SIGTERM", p.name)
	}
}

// TestBinariesSmokeLoad runs the real binaries as separate processes on
// loopback, drives them with the loadtest binary, and stops them with SIGTERM.
func TestBinariesSmokeLoad(t *testing.T) {
	dir := binDir(t)
	b1, b1ops, b2, b2ops := freePort(t), freePort(t), freePort(t), freePort(t)
	lg, lgops := freePort(t), freePort(t)
	gw, ggrpc, gops := freePort(t), freePort(t), freePort(t)
	secret := "binary-test-secret"

	battles := []*proc{
		startProc(t, "battle", "battle-1", "-grpc-addr", b1, "-ops-addr", b1ops),
		startProc(t, "battle", "battle-2", "-grpc-addr", b2, "-ops-addr", b2ops),
	}
	waitHealthy(t, "battle", b1)
	waitHealthy(t, "battle", b2)
	logicP := startProc(t, "logic", "logic", "-grpc-addr", lg, "-ops-addr", lgops, "-data-dir", t.TempDir(),
		"-battle-addrs", b1+","+b2)
	waitHealthy(t, "logic", lg)
	gateP := startProc(t, "gate", "gate", "-addr", gw, "-grpc-addr", ggrpc, "-ops-addr", gops,
		"-logic-addrs", lg, "-token-secret", secret)
	waitHealthy(t, "gate", ggrpc)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lt := exec.CommandContext(ctx, filepath.Join(dir, "loadtest"), "run", "smoke", "-gate-urls", "ws://"+gw+"/ws", "-token-secret", secret,
		"-progress", "off", "--set", "arrivals.phases[0].players=40", "--set", "arrivals.phases[0].duration=1s",
		"--set", "arrivals.phases[1].players=40", "--set", "arrivals.phases[1].duration=3s", "--set", "run.duration=4s",
		"--set", "players.think=100ms")
	out, err := lt.CombinedOutput()
	if err != nil {
		t.Fatalf("loadtest failed: %v\n%s", err, out)
	}
	t.Logf("loadtest:\n%s", out)
	if !strings.Contains(string(out), "lost_replies == 0") || !strings.Contains(string(out), "\nPASS") {
		t.Errorf("loadtest does not report its thresholds, lost replies among them, as passed:\n%s", out)
	}

	// An invalid flag value fails at start and names the flag.
	bad := exec.Command(filepath.Join(dir, "logic"), "-queue-size", "-5", "-data-dir", t.TempDir(), "-battle-addrs", b1)
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "queue-size") {
		t.Errorf("logic -queue-size -5: err=%v, output does not name the flag:\n%s", err, out)
	}

	gateP.stopGracefully(t)
	logicP.stopGracefully(t)
	for _, b := range battles {
		b.stopGracefully(t)
	}
	if exec.Command(filepath.Join(dir, "battle"), "healthcheck", "-addr", b1).Run() == nil {
		t.Error("healthcheck passed against a stopped battle")
	}
}

// healthOnce runs the binary's healthcheck subcommand once.
func healthOnce(t *testing.T, bin, addr string) error {
	return exec.Command(filepath.Join(binDir(t), bin), "healthcheck", "-addr", addr).Run()
}
