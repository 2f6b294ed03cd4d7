package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
