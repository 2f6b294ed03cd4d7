package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"levee/client/clienttest"
	"levee/loadtest"
)

// fifoLine admits players one after the other in the order they joined,
// with one status each.
type fifoLine struct {
	mu   sync.Mutex
	last chan struct{} // closed when the latest arrival is admitted
}

func (l *fifoLine) line(c *clienttest.Conn) bool {
	done := make(chan struct{})
	l.mu.Lock()
	prev := l.last
	l.last = done
	joined := time.Now()
	l.mu.Unlock()
	defer close(done)
	if c.Send(clienttest.Status(1, 1, 100, "t-"+c.Player)) != nil {
		return false
	}
	if prev != nil {
		select {
		case <-prev:
		case <-c.Context().Done():
			return false
		}
	}
	return c.Send(clienttest.Admit(time.Since(joined))) == nil
}

// The line scenario from the command line: flags, report, JSON, exit code.
func TestRunLineScenario(t *testing.T) {
	fl := &fifoLine{}
	g := clienttest.NewGateWithLine([]byte("s3cret"), fl.line, clienttest.Game)
	defer g.Close()
	out := filepath.Join(t.TempDir(), "line.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"-scenario", "line", "-gate-url", g.URL(), "-token-secret", "s3cret", "-progress", "0",
		"-bots", "30", "-dial-parallel", "4", "-bound", "20s", "-json-out", out}, env(nil), &stdout, &stderr)
	for _, want := range []string{"levee line test", "joined the line 30, admitted 30", "admitted in arrival order", "criteria"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, stdout.String(), stderr.String())
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep loadtest.LineReport
	if err := json.Unmarshal(data, &rep); err != nil || rep.Scenario != "line" || rep.Bots != 30 || rep.DialParallel != 4 {
		t.Fatalf("json report: %v %+v", err, rep)
	}
	// No pace is configured or known: that is reported, the rest passes.
	if code != 0 || !rep.Passed {
		t.Fatalf("exit %d, passed %v\n%s", code, rep.Passed, stdout.String())
	}
}

// The hold scenario from the command line, with the RSS of this process.
func TestRunHoldScenario(t *testing.T) {
	g := clienttest.NewGateWithLine([]byte("s3cret"), func(c *clienttest.Conn) bool {
		_ = c.Send(clienttest.Status(1, 1, 0, "t"))
		<-c.Context().Done()
		return false
	}, clienttest.Game)
	defer g.Close()
	var stdout, stderr bytes.Buffer
	code := run([]string{"-scenario", "hold", "-gate-url", g.URL(), "-token-secret", "s3cret", "-progress", "0",
		"-conns", "20", "-hold", "300ms", "-hold-settle", "100ms", "-sample-every", "20ms",
		"-target-pid", strconv.Itoa(os.Getpid())}, env(nil), &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "held 20, dropped 0") || !strings.Contains(stdout.String(), "KiB per connection") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
}

func TestRunLineAndHoldRefuseBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "line", "-bots", "0"}, "-bots"},
		{[]string{"-scenario", "line", "-change-at", "1s", "-change-rate", "5"}, "-admin-url"},
		{[]string{"-scenario", "line", "-start-when-joined"}, "-start-when-joined"},
		{[]string{"-scenario", "line", "-pace-tolerance", "2"}, "-pace-tolerance"},
		{[]string{"-scenario", "line", "-admin-url", "http://10.0.0.1:8082/admin/line", "-change-at", "1s", "-change-rate", "5", "-change-interval", "1s"}, "loopback"},
		{[]string{"-scenario", "hold", "-conns", "0"}, "-conns"},
		{[]string{"-scenario", "hold", "-hold-settle", "1h"}, "-hold-settle"},
		{[]string{"-scenario", "hold", "-source-addr", "10.0.0.1"}, "-source-addr"},
		{[]string{"-scenario", "hold", "-metrics-urls", "http://127.0.0.1:1/metrics,http://127.0.0.1:2/metrics"}, "one server"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, env(nil), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr.String())
		}
	}
}
