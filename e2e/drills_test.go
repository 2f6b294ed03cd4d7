package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leveehq/levee/loadtest/engine"
	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/probe"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/scenario"
)

// The short subset of the failure drills (make drills runs them all
// against the compose cluster): battle-killed and logic-killed, at a small
// scale, against the binaries as processes on loopback. The drill files
// are the ones make drills plays, with fewer players and a shorter run;
// their thresholds are theirs. A killed process is started again on the
// same address (and data directory), as Docker's restart policy would.

// supervised is a binary the test can SIGKILL and start again.
type supervised struct {
	t      *testing.T
	dir    string // binDir(t)
	bin    string
	name   string
	args   []string
	health string // the address its healthcheck probes

	mu  sync.Mutex
	cur *proc
}

func supervise(t *testing.T, bin, name, health string, args ...string) *supervised {
	s := notStarted(t, bin, name, health, args...)
	s.cur = startProc(t, bin, name, args...)
	waitHealthy(t, bin, health)
	return s
}

// notStarted is a supervised binary that is not running yet: back (a
// fault's start) starts it.
func notStarted(t *testing.T, bin, name, health string, args ...string) *supervised {
	return &supervised{t: t, dir: binDir(t), bin: bin, name: name, args: args, health: health}
}

// kill SIGKILLs the running process and waits for it to exit.
func (s *supervised) kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return fmt.Errorf("%s is not running", s.name)
	}
	if err := s.cur.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	err := <-s.cur.done
	s.cur.done <- err // for startProc's cleanup
	return nil
}

// back starts it (again) and waits until its healthcheck passes.
func (s *supervised) back(ctx context.Context) error {
	p, err := launch(s.t, s.dir, s.bin, s.name, s.args...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cur = p
	s.mu.Unlock()
	for ctx.Err() == nil {
		if exec.CommandContext(ctx, filepath.Join(s.dir, s.bin), "healthcheck", "-addr", s.health).Run() == nil {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // polling interval of a condition bounded by ctx
		}
	}
	return fmt.Errorf("%s not healthy: %w", s.name, ctx.Err())
}

func (s *supervised) proc() fault.Proc { return fault.Proc{Kill: s.kill, Back: s.back} }

type drillCluster struct {
	gate, gateOps, secret string
	metrics               []probe.Target
	procs                 map[string]*supervised
}

func startDrillCluster(t *testing.T) *drillCluster {
	b1, b1ops, b2, b2ops := freePort(t), freePort(t), freePort(t), freePort(t)
	lg, lgops := freePort(t), freePort(t)
	gw, ggrpc, gops := freePort(t), freePort(t), freePort(t)
	c := &drillCluster{gate: "ws://" + gw + "/ws", gateOps: gops, secret: "drill-test-secret", procs: map[string]*supervised{}}
	c.procs["battle-1"] = supervise(t, "battle", "battle-1", b1, "-grpc-addr", b1, "-ops-addr", b1ops)
	c.procs["battle-2"] = supervise(t, "battle", "battle-2", b2, "-grpc-addr", b2, "-ops-addr", b2ops)
	c.procs["logic"] = supervise(t, "logic", "logic", lg, "-grpc-addr", lg, "-ops-addr", lgops, "-data-dir", t.TempDir(),
		"-battle-addrs", b1+","+b2)
	c.procs["gate"] = supervise(t, "gate", "gate", ggrpc, "-addr", gw, "-grpc-addr", ggrpc, "-ops-addr", gops,
		"-logic-addrs", lg, "-token-secret", c.secret)
	for tier, addr := range map[string]string{"gate": gops, "logic": lgops, "battle": b1ops} {
		c.metrics = append(c.metrics, probe.Target{Tier: tier, URL: "http://" + addr + "/metrics"})
	}
	return c
}

func (c *drillCluster) injector() fault.Injector {
	ps := fault.Procs{Targets: map[string]fault.Proc{}}
	for name, s := range c.procs {
		ps.Targets[name] = s.proc()
	}
	return ps
}

// runDrill plays drill NAME of loadtest/scenarios/drills with overrides
// against c and fails the test on any threshold that did not hold.
func runDrill(t *testing.T, c *drillCluster, name string, overrides ...string) *report.Run {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("..", "loadtest", "scenarios", "drills", name+".yaml"), overrides)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, err := engine.Run(ctx, engine.Config{Scenario: sc, Name: name, Gates: []string{c.gate}, TokenSecret: c.secret,
		Metrics: c.metrics, Workers: 1, Faults: c.injector(), Log: quietLogger(), Game: arenaDriven()})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	_ = report.WriteTable(&b, run)
	faults := 0
	for _, e := range run.Events {
		if e.Kind == report.EventFault {
			faults++
		}
	}
	if faults == 0 {
		t.Errorf("no fault was injected:\n%s", b.String())
	}
	for _, cr := range run.Criteria {
		if !cr.Passed {
			t.Errorf("%s: %s (value %v %s)", name, cr.Threshold, cr.Value, cr.Detail)
		}
	}
	if t.Failed() {
		t.Logf("run:\n%s", b.String())
	}
	return run
}

// small is the drills' size here: 80 requests/s (offered 0.5 x a capacity
// of 160, so 40 players at the drills' think of 0.5 s) for 25 s, the
// fault at 8 s.
var small = []string{"capacity=160", "offered=0.5", "arrivals.phases[0].duration=2s", "run.duration=25s", "timeline[0].at=8s"}

func TestDrillBattleKilled(t *testing.T) {
	c := startDrillCluster(t)
	runDrill(t, c, "battle-killed", small...)
}

func TestDrillLogicKilled(t *testing.T) {
	c := startDrillCluster(t)
	runDrill(t, c, "logic-killed", small...)
}
