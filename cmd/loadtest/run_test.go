package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"levee/client/clienttest"
	"levee/loadtest/report"
)

// workerEnv makes this test binary act as `loadtest worker` when the engine
// starts it as one (os.Executable is the test binary).
const workerEnv = "LEVEE_LOADTEST_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" && len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
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
  actions:
    - do: profile
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
	g := clienttest.NewGate([]byte("s3cret"), clienttest.Game)
	defer g.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "split.yaml")
	if err := os.WriteFile(file, []byte(splitScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run.ndjson")
	var stdout, stderr bytes.Buffer
	code := run([]string{"run", "-gate-urls", g.URL(), "-token-secret", "s3cret", "-workers", "3", "-per-worker", "120",
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
