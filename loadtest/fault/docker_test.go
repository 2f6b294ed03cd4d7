package fault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
)

const cid = "3ceae31b445a9f0c1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0"

// fakeDocker answers the docker CLI from a script: inspect returns the
// next state of states (the last one repeats), the other commands are
// recorded and answered by fail (nil: success).
type fakeDocker struct {
	mu      sync.Mutex
	calls   []string
	states  []string // docker inspect outputs, in turn
	info    string   // docker info -f {{.NCPU}}
	fail    func(args []string) error
	undoCtx []error // ctx.Err() of every undo-like command when it ran
}

func (f *fakeDocker) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := strings.Join(args, " ")
	if args[0] != "inspect" {
		f.calls = append(f.calls, line)
	}
	if f.fail != nil {
		if err := f.fail(args); err != nil {
			return nil, err
		}
	}
	switch args[0] {
	case "ps":
		return []byte(cid[:12] + "\n"), nil
	case "inspect":
		s := f.states[0]
		if len(f.states) > 1 {
			f.states = f.states[1:]
		}
		return []byte(s), nil
	case "info":
		return []byte(f.info + "\n"), nil
	case "unpause", "start", "update", "network":
		f.undoCtx = append(f.undoCtx, ctx.Err())
	}
	return nil, nil
}

func (f *fakeDocker) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// state is one docker inspect output.
type state struct {
	running      bool
	pid          int
	restarts     int
	started      string
	health       string // "" no healthcheck
	nano, quota  int64
	period       int64
	nets         map[string][]string // network -> aliases
	staticIP     string
	restartPolic string
}

func (s state) json() string {
	c := map[string]any{
		"Id": cid, "Name": "/levee_battle-1_1", "RestartCount": s.restarts,
		"State": map[string]any{"Status": map[bool]string{true: "running", false: "exited"}[s.running],
			"Running": s.running, "Pid": s.pid, "StartedAt": s.started},
		"HostConfig": map[string]any{"NanoCpus": s.nano, "CpuQuota": s.quota, "CpuPeriod": s.period,
			"RestartPolicy": map[string]any{"Name": s.restartPolic}},
	}
	if s.health != "" {
		c["State"].(map[string]any)["Health"] = map[string]any{"Status": s.health, "FailingStreak": 0}
	}
	nets := map[string]any{}
	for n, as := range s.nets {
		e := map[string]any{"Aliases": as, "IPAddress": "172.18.0.2"}
		if s.staticIP != "" {
			e["IPAMConfig"] = map[string]any{"IPv4Address": s.staticIP}
		}
		nets[n] = e
	}
	c["NetworkSettings"] = map[string]any{"Networks": nets}
	b, _ := json.Marshal([]any{c})
	return string(b)
}

var up = state{running: true, pid: 4242, started: "2025-01-01T00:00:00Z", health: "healthy", restartPolic: "unless-stopped",
	nets: map[string][]string{"levee_default": {"battle-1", cid[:12]}}}

// events collects what a fault emits.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) emit(s string) { e.mu.Lock(); e.got = append(e.got, s); e.mu.Unlock() }

func (e *events) all() []string { e.mu.Lock(); defer e.mu.Unlock(); return slices.Clone(e.got) }

func (e *events) has(sub string) bool {
	for _, g := range e.all() {
		if strings.Contains(g, sub) {
			return true
		}
	}
	return false
}

func newDocker(fd *fakeDocker, clk clock.Clock) *Docker {
	return &Docker{Project: "levee", Clock: clk, run: fd.run,
		signal: func(int, syscall.Signal) error { return errors.New("unexpected signal") }}
}

// inject runs d.Inject on its own goroutine; the result comes on the
// channel.
func inject(ctx context.Context, d *Docker, f Fault, ev *events) chan error {
	done := make(chan error, 1)
	go func() { done <- d.Inject(ctx, f, ev.emit) }()
	return done
}

// waitHeld waits until the fault waits on clk, then lets d pass.
func waitHeld(t *testing.T, clk *clock.Fake, d time.Duration) {
	t.Helper()
	testwait.Until(t, "the fault to wait on the clock", func() bool { return clk.Waiters() > 0 })
	clk.Advance(d)
}

func result(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(testwait.Timeout):
		t.Fatal("Inject did not return")
		return nil
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		f    Fault
		want string // "" valid
	}{
		{Fault{Do: Kill, Target: "battle-1"}, ""},
		{Fault{Do: Pause, Target: "b", For: time.Second}, ""},
		{Fault{Do: Restart, Target: "gate", Grace: 15 * time.Second}, ""},
		{Fault{Do: CPU, Target: "b", For: time.Second, Factor: 0.2}, ""},
		{Fault{Do: Cut, Target: "logic", For: time.Second}, ""},
		{Fault{Do: Fill, Target: "logic", For: time.Second, Path: "/data"}, ""},
		{Fault{Do: Start, Target: "logic-3"}, ""},
		{Fault{Do: Start, Target: "logic-3", For: time.Second}, "takes no duration"},
		{Fault{Do: Start, Target: "logic-3", Grace: time.Second}, "grace is only for restart"},
		{Fault{Do: "nuke", Target: "b"}, "unknown kind"},
		{Fault{Do: Kill}, "no target"},
		{Fault{Do: Kill, Target: "b", For: time.Second}, "takes no duration"},
		{Fault{Do: Pause, Target: "b"}, "needs a duration"},
		{Fault{Do: CPU, Target: "b", For: time.Second, Factor: 1}, "factor must be in (0, 1)"},
		{Fault{Do: CPU, Target: "b", For: time.Second}, "factor must be in (0, 1)"},
		{Fault{Do: Pause, Target: "b", For: time.Second, Factor: 0.5}, "factor is only for cpu"},
		{Fault{Do: Fill, Target: "b", For: time.Second, Path: "data"}, "must be absolute"},
		{Fault{Do: Cut, Target: "b", For: time.Second, Path: "/data"}, "path is only for fill"},
		{Fault{Do: Kill, Target: "b", Grace: time.Second}, "grace is only for restart"},
	} {
		err := c.f.Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: Check() = %v, want %q", c.f, err, c.want)
		}
	}
}

func TestString(t *testing.T) {
	for f, want := range map[Fault]string{
		{Do: Kill, Target: "battle-1"}:                               "kill battle-1",
		{Do: Pause, Target: "battle-1", For: 20 * time.Second}:       "pause battle-1 for 20s",
		{Do: CPU, Target: "b", Factor: 0.2, For: 10 * time.Second}:   "cpu b x0.2 for 10s",
		{Do: Restart, Target: "gate"}:                                "restart gate (grace 10s)",
		{Do: Fill, Target: "logic", Path: "/data", For: time.Minute}: "fill logic /data for 1m0s",
		{Do: Start, Target: "logic-3"}:                               "start logic-3",
	} {
		if got := f.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

func TestParseSpec(t *testing.T) {
	inj, err := ParseSpec("docker:levee")
	if err != nil || inj.(*Docker).Project != "levee" {
		t.Fatalf("ParseSpec(docker:levee) = %+v, %v", inj, err)
	}
	for _, bad := range []string{"", "docker", "docker:", "k8s:levee", "docker:a b"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) took it", bad)
		}
	}
}

// The fields the faults read, from a real docker 20.10 inspect of a
// compose v1 container (trimmed).
func TestParseInspect(t *testing.T) {
	b, err := os.ReadFile("testdata/inspect.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseInspect(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ID) != 64 || !c.State.Running || c.State.Pid != 22310 || c.State.Health == nil ||
		c.State.Health.Status != "healthy" || c.HostConfig.NanoCpus != 500_000_000 || c.HostConfig.RestartPolicy.Name != "unless-stopped" {
		t.Errorf("parsed %+v", c)
	}
	n := c.NetworkSettings.Networks["hfaultsexp_default"]
	if n == nil || !slices.Equal(n.Aliases, []string{"a", c.ID[:12]}) {
		t.Errorf("networks %+v", c.NetworkSettings.Networks)
	}
	if _, err := parseInspect([]byte("[]")); err == nil {
		t.Error("no container parsed")
	}
}

func TestResolve(t *testing.T) {
	fd := &fakeDocker{states: []string{up.json()}}
	d := newDocker(fd, clock.NewFake(time.Unix(0, 0)))
	id, err := d.resolve(context.Background(), "battle-1")
	if err != nil || id != cid[:12] {
		t.Fatalf("resolve = %q, %v", id, err)
	}
	want := "ps -aq --filter label=com.docker.compose.project=levee --filter label=com.docker.compose.service=battle-1"
	if got := fd.log(); len(got) != 1 || got[0] != want {
		t.Errorf("ran %q, want %q", got, want)
	}
	for out, msg := range map[string]string{"": "no container of service", "a\nb\n": "2 containers"} {
		d.run = func(context.Context, string, ...string) ([]byte, error) { return []byte(out), nil }
		if _, err := d.resolve(context.Background(), "battle-1"); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ps %q: %v, want %q", out, err, msg)
		}
	}
}

func TestKillFromTheHost(t *testing.T) {
	restarting := up
	restarting.health, restarting.restarts, restarting.pid = "starting", 1, 5000
	back := restarting
	back.health = "healthy"
	fd := &fakeDocker{states: []string{up.json(), restarting.json(), back.json()}}
	clk := clock.NewFake(time.Unix(0, 0))
	d := newDocker(fd, clk)
	var signalled []string
	d.signal = func(pid int, sig syscall.Signal) error {
		signalled = append(signalled, fmt.Sprint(pid, " ", sig))
		return nil
	}
	ev := &events{}
	done := inject(context.Background(), d, Fault{Do: Kill, Target: "battle-1"}, ev)
	waitHeld(t, clk, backPoll) // the first look: restarted, not healthy yet
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(signalled, []string{"4242 killed"}) {
		t.Errorf("signals %v, want SIGKILL to 4242", signalled)
	}
	if !ev.has("battle-1 killed (SIGKILL to its process 4242 from the host)") || !ev.has("battle-1 back (healthy) after 0.5 s") {
		t.Errorf("events %q", ev.all())
	}
	if got := fd.log(); len(got) != 1 { // ps only: no docker kill, no docker start
		t.Errorf("docker commands %q", got)
	}
}

func TestKillFallsBackWhenNotPermitted(t *testing.T) {
	back := up
	back.started = "2025-01-01T00:01:00Z"
	fd := &fakeDocker{states: []string{up.json(), back.json()}}
	d := newDocker(fd, clock.NewFake(time.Unix(0, 0)))
	d.signal = func(int, syscall.Signal) error { return syscall.EPERM }
	ev := &events{}
	if err := result(t, inject(context.Background(), d, Fault{Do: Kill, Target: "battle-1"}, ev)); err != nil {
		t.Fatal(err)
	}
	got := fd.log()
	if !slices.Equal(got[1:], []string{"kill -s KILL " + cid, "start " + cid}) {
		t.Errorf("commands %q", got)
	}
	if !ev.has("not permitted to signal pid 4242: docker kill -s KILL and docker start") || !ev.has("back (healthy)") {
		t.Errorf("events %q", ev.all())
	}
}

// A container that does not come back is an error after BackTimeout that
// says what it saw.
func TestKillNotBack(t *testing.T) {
	dead := up
	dead.running, dead.pid = false, 0
	fd := &fakeDocker{states: []string{up.json(), dead.json()}}
	clk := clock.NewFake(time.Unix(0, 0))
	d := newDocker(fd, clk)
	d.signal = func(int, syscall.Signal) error { return nil }
	done := inject(context.Background(), d, Fault{Do: Kill, Target: "battle-1"}, &events{})
	waitHeld(t, clk, BackTimeout)
	err := result(t, done)
	if err == nil || !strings.Contains(err.Error(), "not back within 1m30s") || !strings.Contains(err.Error(), "exited") {
		t.Errorf("err = %v", err)
	}
}

func TestPause(t *testing.T) {
	fd := &fakeDocker{states: []string{up.json()}}
	clk := clock.NewFake(time.Unix(0, 0))
	d := newDocker(fd, clk)
	ev := &events{}
	done := inject(context.Background(), d, Fault{Do: Pause, Target: "battle-1", For: 20 * time.Second}, ev)
	testwait.Until(t, "paused", func() bool { return ev.has("paused (docker pause)") })
	if got := fd.log(); slices.Contains(got, "unpause "+cid) {
		t.Fatal("unpaused before its time")
	}
	waitHeld(t, clk, 20*time.Second)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if got := fd.log(); !slices.Equal(got[1:], []string{"pause " + cid, "unpause " + cid}) {
		t.Errorf("commands %q", got)
	}
	if !ev.has("battle-1 unpaused after 20.0 s") {
		t.Errorf("events %q", ev.all())
	}
}

// Every timed fault undoes itself when its context is cancelled, with a
// context of its own.
func TestUndoOnCancel(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "4242", "root", "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    Fault
		undo string
	}{
		{Fault{Do: Pause, Target: "battle-1", For: time.Hour}, "unpause " + cid},
		{Fault{Do: CPU, Target: "battle-1", For: time.Hour, Factor: 0.5}, "update --cpus 0.75 " + cid},
		{Fault{Do: Cut, Target: "battle-1", For: time.Hour}, "network connect --alias battle-1 levee_default " + cid},
		{Fault{Do: Restart, Target: "battle-1"}, "start " + cid},
		{Fault{Do: Fill, Target: "battle-1", For: time.Hour, Path: "/data"}, ""},
	} {
		t.Run(c.f.Do, func(t *testing.T) {
			st := up
			st.nano = 750_000_000
			fd := &fakeDocker{states: []string{st.json()}}
			clk := clock.NewFake(time.Unix(0, 0))
			d := newDocker(fd, clk)
			d.procRoot, d.fillLimit = dir, 1<<20
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.f.Do == Restart {
				// Cancelled while docker stop runs.
				fd.fail = func(args []string) error {
					if args[0] == "stop" {
						cancel()
						return context.Canceled
					}
					return nil
				}
			}
			ev := &events{}
			done := inject(ctx, d, c.f, ev)
			if c.f.Do != Restart {
				testwait.Until(t, "the fault to hold", func() bool { return clk.Waiters() > 0 })
				cancel()
			}
			if err := result(t, done); !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
			if c.undo != "" && !slices.Contains(fd.log(), c.undo) {
				t.Errorf("commands %q, want %q", fd.log(), c.undo)
			}
			for i, e := range fd.undoCtx {
				if e != nil {
					t.Errorf("undo command %d ran with a dead context: %v", i, e)
				}
			}
			if ents, _ := os.ReadDir(filepath.Join(dir, "4242", "root", "data")); len(ents) != 0 {
				t.Errorf("fill left %v", ents)
			}
		})
	}
}

func TestRestart(t *testing.T) {
	stopped := up
	stopped.running, stopped.pid = false, 0
	back := up
	back.started = "2025-01-01T00:02:00Z"
	fd := &fakeDocker{states: []string{up.json(), back.json()}}
	d := newDocker(fd, clock.NewFake(time.Unix(0, 0)))
	ev := &events{}
	if err := result(t, inject(context.Background(), d, Fault{Do: Restart, Target: "gate", Grace: 14200 * time.Millisecond}, ev)); err != nil {
		t.Fatal(err)
	}
	if got := fd.log(); !slices.Equal(got[1:], []string{"stop -t 15 " + cid, "start " + cid}) {
		t.Errorf("commands %q", got)
	}
	for _, want := range []string{"gate stopped after", "SIGKILL after 15 s", "gate started", "gate back (healthy)"} {
		if !ev.has(want) {
			t.Errorf("no event %q in %q", want, ev.all())
		}
	}
}

// start: docker start of a container that is not running, over when it
// runs and is healthy.
func TestStart(t *testing.T) {
	created := up
	created.running, created.pid, created.started = false, 0, "0001-01-01T00:00:00Z"
	starting := up
	starting.health = "starting"
	fd := &fakeDocker{states: []string{created.json(), starting.json(), up.json()}}
	clk := clock.NewFake(time.Unix(0, 0))
	d := newDocker(fd, clk)
	ev := &events{}
	done := inject(context.Background(), d, Fault{Do: Start, Target: "logic-3"}, ev)
	waitHeld(t, clk, backPoll) // the first look: running, not healthy yet
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if got := fd.log(); !slices.Equal(got[1:], []string{"start " + cid}) {
		t.Errorf("commands %q", got)
	}
	if !ev.has("logic-3 started (docker start; it was exited)") || !ev.has("logic-3 up (healthy) after 0.5 s") {
		t.Errorf("events %q", ev.all())
	}
}

// A start of a running container is refused: it would start nothing.
func TestStartRunning(t *testing.T) {
	fd := &fakeDocker{states: []string{up.json()}}
	d := newDocker(fd, clock.NewFake(time.Unix(0, 0)))
	err := result(t, inject(context.Background(), d, Fault{Do: Start, Target: "logic-3"}, &events{}))
	if err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("err = %v", err)
	}
	if got := fd.log(); len(got) != 1 {
		t.Errorf("commands %q, want ps only", got)
	}
}

// A started container that never gets healthy fails the step after
// BackTimeout, saying what it saw.
func TestStartNotUp(t *testing.T) {
	created := up
	created.running, created.pid, created.started = false, 0, "0001-01-01T00:00:00Z"
	unhealthy := up
	unhealthy.health = "unhealthy"
	fd := &fakeDocker{states: []string{created.json(), unhealthy.json()}}
	clk := clock.NewFake(time.Unix(0, 0))
	d := newDocker(fd, clk)
	done := inject(context.Background(), d, Fault{Do: Start, Target: "logic-3"}, &events{})
	waitHeld(t, clk, BackTimeout)
	err := result(t, done)
	if err == nil || !strings.Contains(err.Error(), "logic-3 not up within 1m30s") || !strings.Contains(err.Error(), "running, unhealthy") {
		t.Errorf("err = %v", err)
	}
}

func TestCPULimits(t *testing.T) {
	for _, c := range []struct {
		st             state
		factor         float64
		cores          int
		flag, old, new string
	}{
		{state{nano: 750_000_000}, 0.2, 0, "--cpus", "0.75", "0.15"},
		{state{nano: 2_000_000_000}, 0.001, 0, "--cpus", "2", "0.01"},
		{state{quota: 50_000, period: 100_000}, 0.5, 0, "--cpu-quota", "50000", "25000"},
		{state{quota: 50_000}, 0.001, 0, "--cpu-quota", "50000", "1000"},
		{state{}, 0.2, 2, "--cpus", "2", "0.4"},
	} {
		c0, err := parseInspect([]byte(c.st.json()))
		if err != nil {
			t.Fatal(err)
		}
		l := cpuLimits(c0, c.factor, c.cores)
		if l.flag != c.flag || l.old != c.old || l.new != c.new || l.unlimited != (c.cores > 0) {
			t.Errorf("%+v x %v: %+v, want %s %s -> %s", c.st, c.factor, l, c.flag, c.old, c.new)
		}
	}
}

// An unlimited container gets the host's cores x factor, then the host's
// cores: docker update --cpus 0 changes nothing on docker 20.10.
func TestCPUUnlimited(t *testing.T) {
	fd := &fakeDocker{states: []string{up.json()}, info: "2"}
	clk := clock.NewFake(time.Unix(0, 0))
	d := newDocker(fd, clk)
	ev := &events{}
	done := inject(context.Background(), d, Fault{Do: CPU, Target: "battle-1", For: 10 * time.Second, Factor: 0.2}, ev)
	waitHeld(t, clk, 10*time.Second)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if got := fd.log(); !slices.Equal(got[1:], []string{"info -f {{.NCPU}}", "update --cpus 0.4 " + cid, "update --cpus 2 " + cid}) {
		t.Errorf("commands %q", got)
	}
	if !ev.has("CPU limit 0.4 cores, was unlimited (the host's 2 cores)") || !ev.has("restored to 2 cores after 10.0 s (it was unlimited") {
		t.Errorf("events %q", ev.all())
	}
}

func TestCut(t *testing.T) {
	st := up
	st.nets = map[string][]string{"b_net": {"logic", cid[:12]}, "a_net": {"logic", "store"}}
	st.staticIP = "10.0.0.9"
	fd := &fakeDocker{states: []string{st.json()}}
	clk := clock.NewFake(time.Unix(0, 0))
	d := newDocker(fd, clk)
	ev := &events{}
	done := inject(context.Background(), d, Fault{Do: Cut, Target: "logic", For: 30 * time.Second}, ev)
	waitHeld(t, clk, 30*time.Second)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"network disconnect -f a_net " + cid, "network disconnect -f b_net " + cid,
		"network connect --alias logic --alias store --ip 10.0.0.9 a_net " + cid,
		"network connect --alias logic --ip 10.0.0.9 b_net " + cid,
	}
	if got := fd.log(); !slices.Equal(got[1:], want) {
		t.Errorf("commands\n%q\nwant\n%q", got[1:], want)
	}
	if !ev.has("logic cut off a_net, b_net") || !ev.has("logic reconnected to a_net, b_net after 30.0 s") {
		t.Errorf("events %q", ev.all())
	}
}

// A cut that fails half way puts back what it cut.
func TestCutFailsHalfWay(t *testing.T) {
	st := up
	st.nets = map[string][]string{"a_net": {"logic"}, "b_net": {"logic"}}
	fd := &fakeDocker{states: []string{st.json()}, fail: func(args []string) error {
		if len(args) > 3 && args[1] == "disconnect" && args[3] == "b_net" {
			return errors.New("no such network")
		}
		return nil
	}}
	d := newDocker(fd, clock.NewFake(time.Unix(0, 0)))
	err := result(t, inject(context.Background(), d, Fault{Do: Cut, Target: "logic", For: time.Second}, &events{}))
	if err == nil || !strings.Contains(err.Error(), "no such network") {
		t.Errorf("err = %v", err)
	}
	if got := fd.log(); !slices.Contains(got, "network connect --alias logic a_net "+cid) {
		t.Errorf("a_net not reconnected: %q", got)
	}
}

func TestFill(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "4242", "root", "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	fd := &fakeDocker{states: []string{up.json()}}
	clk := clock.NewFake(time.Unix(0, 0))
	d := newDocker(fd, clk)
	d.procRoot, d.fillLimit = dir, 3<<20
	ev := &events{}
	done := inject(context.Background(), d, Fault{Do: Fill, Target: "logic", For: 20 * time.Second, Path: "/data/"}, ev)
	testwait.Until(t, "the fill", func() bool { return clk.Waiters() > 0 })
	st, err := os.Stat(filepath.Join(data, FillFile))
	if err != nil || st.Size() != 3<<20 {
		t.Fatalf("fill file: %v, %v", st, err)
	}
	clk.Advance(20 * time.Second)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, FillFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("fill file left: %v", err)
	}
	if !ev.has("logic /data/ did not fill: stopped at 3.0 MiB written") || !ev.has("freed (3.0 MiB removed) after 20.0 s") {
		t.Errorf("events %q", ev.all())
	}
	// No such path in the container: an error, nothing left.
	if err := result(t, inject(context.Background(), d, Fault{Do: Fill, Target: "logic", For: time.Second, Path: "/nope"}, ev)); err == nil {
		t.Error("fill of a missing path succeeded")
	}
}

func TestProcs(t *testing.T) {
	var did []string
	rec := func(s string) func() error { return func() error { did = append(did, s); return nil } }
	clk := clock.NewFake(time.Unix(0, 0))
	p := Procs{Clock: clk, Targets: map[string]Proc{"battle-1": {
		Kill: rec("kill"), Stop: rec("stop"), Cont: rec("cont"),
		Start: func(context.Context) error { did = append(did, "start"); return nil },
		Back:  func(context.Context) error { did = append(did, "back"); return nil },
	}}}
	ev := &events{}
	if err := p.Inject(context.Background(), Fault{Do: Kill, Target: "battle-1"}, ev.emit); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Inject(ctx, Fault{Do: Pause, Target: "battle-1", For: time.Hour}, ev.emit) }()
	testwait.Until(t, "paused", func() bool { return clk.Waiters() > 0 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("pause: %v", err)
	}
	if err := p.Inject(context.Background(), Fault{Do: Start, Target: "battle-1"}, ev.emit); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(did, []string{"kill", "back", "stop", "cont", "start", "back"}) {
		t.Errorf("did %v", did)
	}
	if !ev.has("battle-1 started") || !ev.has("back after 0.0 s the start") {
		t.Errorf("events %q", ev.all())
	}
	if err := p.Inject(context.Background(), Fault{Do: Restart, Target: "battle-1"}, ev.emit); err == nil {
		t.Error("restart without a Restart func succeeded")
	}
	if err := p.Inject(context.Background(), Fault{Do: Kill, Target: "gate"}, ev.emit); err == nil {
		t.Error("unknown target succeeded")
	}
}
