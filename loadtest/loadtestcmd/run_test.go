package loadtestcmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/loadtest/report"
)

// workerEnv makes this test binary act as `loadtest worker` when the engine
// starts it as one (os.Executable is the test binary).
const workerEnv = "LEVEE_LOADTEST_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" && len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(runArena(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// env is a getenv over m.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// The command is its subcommands: no arguments, an unknown command and
// the old flag-per-scenario form are refused with what to type instead.
func TestCommands(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "usage: loadtest COMMAND"},
		{[]string{"-scenario", "overload"}, exitUsage, "loadtest run smoke"},
		{[]string{"launch"}, exitUsage, `unknown command "launch"`},
		{[]string{"help"}, exitOK, "capacity [flags] FILE|PRESET"},
	} {
		var stdout, stderr bytes.Buffer
		code := runArena(c.args, env(nil), &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.want) {
			t.Errorf("%v: exit %d, output %q %q; want %d and %q", c.args, code, stdout.String(), stderr.String(), c.code, c.want)
		}
	}
}

const splitScenario = `version: 1
name: split
description: 300 players over three worker processes
arrivals:
  start: 0
  phases:
    - duration: 2s
      players: 300
players:
  login: {do: get_profile}
  actions:
    - do: get_profile
      weight: 1
  think: 200ms
client:
  request_timeout: 2s
thresholds:
  - "lost_replies == 0"
  - "admitted == arrived"
run:
  duration: 4s
`

// Three worker processes, each capped below the run's 300 players (120),
// from three source addresses: every player arrives, is admitted and
// plays, and no worker ever holds more than its cap.
func TestRunSplitsOverWorkers(t *testing.T) {
	t.Setenv(workerEnv, "1")
	g := clienttest.NewGameGate([]byte("s3cret"), arena.Game(), nil, nil)
	defer g.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "split.yaml")
	if err := os.WriteFile(file, []byte(splitScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run.ndjson")
	var stdout, stderr bytes.Buffer
	code := runArena([]string{"run", "-gate-urls", g.URL(), "-token-secret", "s3cret", "-workers", "3", "-per-worker", "120",
		"-source-addrs", "127.0.0.11,127.0.0.12,127.0.0.13", "-out", out, "-progress", "off", file}, env(nil), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := report.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Summary.Counters["arrived"]; got != 300 {
		t.Errorf("arrived %d, want 300", got)
	}
	if got := rep.Summary.Counters["admitted"]; got != 300 {
		t.Errorf("admitted %d, want 300", got)
	}
	if rep.Summary.Counters["sent"] == 0 || rep.Summary.Counters["lost"] != 0 {
		t.Errorf("sent %d lost %d, want some and none", rep.Summary.Counters["sent"], rep.Summary.Counters["lost"])
	}
	if len(rep.Workers) != 3 {
		t.Fatalf("%d workers in the report, want 3: %+v", len(rep.Workers), rep.Workers)
	}
	total := 0
	for _, w := range rep.Workers {
		if w.Peak > 120 || w.Players == 0 {
			t.Errorf("worker %d held %d at most (cap 120) and %d in all", w.Index, w.Peak, w.Players)
		}
		total += w.Players
	}
	if total != 300 {
		t.Errorf("workers' players sum to %d, want 300", total)
	}
	if !strings.Contains(stdout.String(), "PASS") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
}

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// A threshold that fails makes the run exit 99 (k6's convention); the
// table says which, and the run file still has the end line.
func TestRunThresholdFailsWith99(t *testing.T) {
	g := clienttest.NewGameGate([]byte("s3cret"), arena.Game(), nil, nil)
	defer g.Close()
	body := strings.Replace(splitScenario, `  - "admitted == arrived"`, `  - "admitted == arrived"
  - "sent > 1000000"`, 1)
	body = strings.Replace(body, "players: 300", "players: 20", 1)
	file := writeScenario(t, body)
	out := filepath.Join(t.TempDir(), "run.ndjson")
	var stdout, stderr bytes.Buffer
	code := runArena([]string{"run", file, "-gate-urls", g.URL(), "-token-secret", "s3cret", "-progress", "off", "-out", out}, env(nil), &stdout, &stderr)
	if code != exitThreshold {
		t.Fatalf("exit %d, want 99\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "✗ sent > 1000000") || !strings.Contains(stdout.String(), "✓ lost_replies == 0") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	// `loadtest report` rebuilds the same verdict from the file.
	stdout.Reset()
	if code := runArena([]string{"report", out}, env(nil), &stdout, &stderr); code != exitThreshold || !strings.Contains(stdout.String(), "✗ sent > 1000000") {
		t.Errorf("report: exit %d\n%s", code, stdout.String())
	}
}

// A bad scenario file is refused before anything is sent, naming the file,
// the line and the field; exit 2.
func TestRunRefusesBadScenario(t *testing.T) {
	var sent atomic.Int64
	g := clienttest.NewGameGate([]byte("s3cret"), arena.Game(), nil, func(c *clienttest.Conn) { sent.Add(1) })
	defer g.Close()
	file := writeScenario(t, strings.Replace(splitScenario, "duration: 2s", "duration: ten", 1))
	var stdout, stderr bytes.Buffer
	code := runArena([]string{"run", "-gate-urls", g.URL(), file}, env(nil), &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), `s.yaml:7: arrivals.phases[0].duration: "ten" is not a duration`) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	for _, args := range [][]string{
		{"run", "-gate-urls", g.URL(), "-set", "players.thinks=1s", file},
		{"run", "-gate-urls", g.URL(), "nosuchpreset"},
		{"run", "-gate-urls", "ws://10.1.2.3:8080/ws", "launch"},
		{"run", "-metrics", "db=http://127.0.0.1:1/metrics", "launch"},
		{"run", "-faults", "k8s:levee", "launch"},
		{"run", "-faults", "docker:", "launch"},
		{"run"},
	} {
		stderr.Reset()
		if code := runArena(args, env(nil), &stdout, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d, want 2; stderr %q", args, code, stderr.String())
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d connections reached the gate", n)
	}
}

// A scenario with fault steps runs without -faults: each fault is
// recorded as skipped, in the table and the run file.
func TestRunSkipsFaultsWithoutInjector(t *testing.T) {
	g := clienttest.NewGameGate([]byte("s3cret"), arena.Game(), nil, nil)
	defer g.Close()
	body := strings.Replace(splitScenario, "players: 300", "players: 20", 1)
	body = strings.Replace(body, "run:\n", "timeline:\n  - {at: 1s, fault: {do: kill, target: battle-1}}\nrun:\n", 1)
	file := writeScenario(t, body)
	out := filepath.Join(t.TempDir(), "run.ndjson")
	var stdout, stderr bytes.Buffer
	code := runArena([]string{"run", file, "-gate-urls", g.URL(), "-token-secret", "s3cret", "-progress", "off", "-out", out}, env(nil), &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"fault  0:01 fault kill battle-1: skipped, no fault injector: run with -faults docker:PROJECT",
		"1 fault step(s) skipped"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := report.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Events) != 1 || r.Events[0].Kind != report.EventFault || r.Events[0].T != 1 {
		t.Errorf("events %+v", r.Events)
	}
}

// smoke is an ordinary players-engine preset: shortened with --set, it
// passes its thresholds (every request one reply, only business errors)
// against a gate whose game answers everything.
func TestRunSmokePreset(t *testing.T) {
	g := clienttest.NewGameGate([]byte("s3cret"), arena.Game(), nil, nil)
	defer g.Close()
	var stdout, stderr bytes.Buffer
	out := filepath.Join(t.TempDir(), "smoke.ndjson")
	code := runArena([]string{"run", "smoke", "-gate-urls", g.URL(), "-token-secret", "s3cret", "-out", out, "-label", "small", "-progress", "off",
		"-set", "arrivals.phases[0].players=4", "-set", "arrivals.phases[0].duration=200ms", "-set", "arrivals.phases[1].players=4",
		"-set", "arrivals.phases[1].duration=1s", "-set", "run.duration=1200ms", "-set", "players.think=20ms"}, env(nil), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := report.Read(f)
	if err != nil || rep.Meta.Label != "small" || rep.Summary.Counters["sent"] == 0 || len(rep.Criteria) != 8 {
		t.Fatalf("run file: %v, label %q, counters %v, criteria %+v", err, rep.Meta.Label, rep.Summary.Counters, rep.Criteria)
	}
	for _, c := range rep.Criteria {
		if !c.Passed {
			t.Errorf("threshold %s failed: %s", c.Threshold, c.Detail)
		}
	}
}

func TestScenariosLists(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runArena([]string{"scenarios"}, env(nil), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, name := range []string{"launch", "smoke", "overload", "line", "hold"} {
		if !strings.Contains(stdout.String(), name) {
			t.Errorf("no %s in:\n%s", name, stdout.String())
		}
	}
}
