package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"levee/client/clienttest"
	"levee/loadtest"
	leveev1 "levee/proto/leveev1"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func short(url string) []string {
	return []string{"-gate-url", url, "-token-secret", "s3cret", "-ramp", "20ms", "-duration", "300ms",
		"-think", "10ms", "-progress", "0", "-seed", "7"}
}

func TestRunPasses(t *testing.T) {
	g := clienttest.NewGate([]byte("s3cret"), clienttest.Game)
	defer g.Close()
	out := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	// -bots comes from the environment.
	code := run(append(short(g.URL()), "-json-out", out), env(map[string]string{"LOADTEST_BOTS": "4"}), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "PASS") || !strings.Contains(stdout.String(), "get_profile") {
		t.Fatalf("stdout:\n%s", stdout.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep loadtest.Report
	if err := json.Unmarshal(data, &rep); err != nil || rep.Bots != 4 || rep.Seed != 7 || rep.Sent == 0 {
		t.Fatalf("json report: %v %+v", err, rep)
	}
}

func TestRunFailsOnErrors(t *testing.T) {
	g := clienttest.NewGate([]byte("s3cret"), func(c *clienttest.Conn) {
		for {
			f, err := c.Recv()
			if err != nil {
				return
			}
			if c.Send(clienttest.Reply(f, &leveev1.Error{Code: leveev1.ErrorCode_ERROR_CODE_INTERNAL})) != nil {
				return
			}
		}
	})
	defer g.Close()
	var stdout, stderr bytes.Buffer
	code := run(append(short(g.URL()), "-bots", "2"), env(nil), &stdout, &stderr)
	if code != 1 || !strings.Contains(stdout.String(), "FAIL") || !strings.Contains(stdout.String(), "INTERNAL") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-gate-url", "ws://10.0.0.1:8080/ws"}, "loopback"},
		{[]string{"-gate-url", "ws://example.com/ws"}, "loopback"},
		{[]string{"-bots", "-3"}, "-bots"},
		{[]string{"-json-fraction", "2"}, "-json-fraction"},
		{[]string{"-nope"}, "nope"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, env(nil), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr.String())
		}
	}
}

func overloadArgs(url string) []string {
	return []string{"-scenario", "overload", "-gate-url", url, "-token-secret", "s3cret", "-progress", "0",
		"-conns", "3", "-capacity-concurrency", "2", "-capacity-time", "300ms", "-phase-time", "300ms",
		"-capacity-step-time", "150ms", "-capacity-search-time", "300ms", "-capacity-p99-slo", "1s",
		"-overload-time", "300ms", "-max-rate", "300"}
}

// The overload scenario runs end to end; its verdict drives the exit code
// unless -expect-hold=false.
func TestRunOverload(t *testing.T) {
	var busy atomic.Bool
	g := clienttest.NewGate([]byte("s3cret"), func(c *clienttest.Conn) {
		p := &leveev1.Player{Id: c.Player, Gold: clienttest.StartGold, Inventory: map[string]uint32{}}
		n := 0
		for {
			f, err := c.Recv()
			if err != nil {
				return
			}
			var out any = &leveev1.Error{Code: leveev1.ErrorCode_ERROR_CODE_BUSY}
			if !busy.Load() {
				out = clienttest.GameReply(p, f, &n)
			}
			if c.Send(clienttest.Reply(f, out)) != nil {
				return
			}
		}
	})
	defer g.Close()
	out := filepath.Join(t.TempDir(), "overload.json")
	var stdout, stderr bytes.Buffer
	code := run(append(overloadArgs(g.URL()), "-json-out", out), env(nil), &stdout, &stderr)
	for _, want := range []string{"capacity C", "overload goodput", "criteria", "every request got exactly one reply"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep loadtest.OverloadReport
	if err := json.Unmarshal(data, &rep); err != nil || rep.Scenario != "overload" || rep.Capacity <= 0 ||
		rep.RequestTimeout != 2e9 || rep.OverloadPhase == nil {
		t.Fatalf("json report: %v %+v", err, rep)
	}
	if (code == 0) != rep.Passed {
		t.Fatalf("exit %d, passed %v\n%s", code, rep.Passed, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"compare", "protected=" + out, "unprotected=" + out}, env(nil), &stdout, &stderr); code != 0 {
		t.Fatalf("compare: exit %d: %s", code, stderr.String())
	}
	if l := rep.OverloadPhase.LatencyFromDue; l.Count != rep.OverloadPhase.Latency.Count || l.P99 < rep.OverloadPhase.Latency.P99 {
		t.Errorf("overload latency from due %+v, from send %+v", l, rep.OverloadPhase.Latency)
	}
	for _, want := range []string{"protected", "unprotected", "capacity C (served/s)", "overload goodput / C", "verdict",
		"overload p99 served, from send / from due", "baseline p99 served, from send / from due"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("comparison lacks %q:\n%s", want, stdout.String())
		}
	}
	if code := run([]string{"compare", "x=" + filepath.Join(t.TempDir(), "none.json")}, env(nil), &stdout, &stderr); code != 1 {
		t.Errorf("compare of a missing file: exit %d", code)
	}

	// A gate that refuses everything: C is 0, the run fails, and only
	// -expect-hold=false keeps the exit code 0.
	busy.Store(true)
	stdout.Reset()
	if code := run(overloadArgs(g.URL()), env(nil), &stdout, &stderr); code != 1 || !strings.Contains(stdout.String(), "FAIL") {
		t.Fatalf("exit %d\n%s", code, stdout.String())
	}
	stdout.Reset()
	if code := run(append(overloadArgs(g.URL()), "-expect-hold=false"), env(nil), &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "reported, not failed") {
		t.Fatalf("exit %d\n%s", code, stdout.String())
	}
}

func TestRunOverloadRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "nope"}, "-scenario"},
		{[]string{"-scenario", "overload", "-metrics-urls", "http://10.0.0.1:9/metrics"}, "loopback"},
		{[]string{"-scenario", "overload", "-units", "0"}, "-units"},
		{[]string{"-scenario", "overload", "-critical-fraction", "1.5"}, "-critical-fraction"},
		{[]string{"-scenario", "overload", "-overload-factor", "0.5"}, "-overload-factor"},
		{[]string{"-scenario", "overload", "extra"}, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, env(nil), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr.String())
		}
	}
}
