package loadtestcmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/loadtest/report"
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

// lifoLine holds the first n players until all n have their places, then
// admits them in the reverse order, one every 100 ms (so that the gate's
// waited_ms surely dates each release after the next arrival's); any
// later one is admitted at once.
type lifoLine struct {
	n      int
	mu     sync.Mutex
	joined int
	done   []chan struct{} // done[i] is closed when the i-th to join was admitted
}

func newLIFOLine(n int) *lifoLine {
	l := &lifoLine{n: n, done: make([]chan struct{}, n)}
	for i := range l.done {
		l.done[i] = make(chan struct{})
	}
	return l
}

func (l *lifoLine) line(c *clienttest.Conn) bool {
	l.mu.Lock()
	i := l.joined
	l.joined++
	l.mu.Unlock()
	joined := time.Now()
	if c.Send(clienttest.Status(1, 1, 100, "t-"+c.Player)) != nil {
		return false
	}
	if i < l.n {
		defer close(l.done[i])
	}
	if i < l.n-1 {
		select {
		case <-l.done[i+1]:
		case <-c.Context().Done():
			return false
		}
		pause := time.NewTimer(100 * time.Millisecond) // the line's pace
		defer pause.Stop()
		select {
		case <-pause.C:
		case <-c.Context().Done():
			return false
		}
	}
	return c.Send(clienttest.Admit(time.Since(joined))) == nil
}

// lineScenario is a small line run: players arrive over the first second
// (one or two per 50 ms tick of the engine) and stay; the line's pass
// rules as in the line preset, but the pace (no admin API here).
const lineScenario = `version: 1
name: line-small
arrivals:
  phases:
    - {duration: 1s, players: PLAYERS}
    - {duration: 2s, players: PLAYERS}
players:
  login: {do: get_profile}
  actions:
    - {do: get_profile, weight: 1}
  think: 1m
client:
  request_timeout: 2s
thresholds:
  - admitted == arrived
  - dial_failures == 0
  - order_pairs > 0
  - order_inversions == 0
  - max_status_gap <= 5s
run:
  duration: 3s
`

// runLine runs lineScenario with players players against a gate whose
// line is line; it returns the exit code, the table and the run file.
func runLine(t *testing.T, players int, line clienttest.Line) (int, string, *report.Run) {
	t.Helper()
	g := clienttest.NewGameGate([]byte("s3cret"), arena.Game(), line, nil)
	defer g.Close()
	file := writeScenario(t, strings.ReplaceAll(lineScenario, "PLAYERS", strconv.Itoa(players)))
	out := filepath.Join(t.TempDir(), "line.ndjson")
	var stdout, stderr bytes.Buffer
	code := runArena([]string{"run", file, "-gate-urls", g.URL(), "-token-secret", "s3cret", "-progress", "off", "-out", out}, env(nil), &stdout, &stderr)
	f, err := os.Open(out)
	if err != nil {
		t.Fatalf("exit %d, no run file: %v\nstderr:\n%s", code, err, stderr.String())
	}
	defer f.Close()
	r, err := report.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), r
}

// The line on the players engine from the command line: players admitted
// one after the other in the order they joined pass its rules (none
// lost, every sure pair in order, statuses often enough), exit 0; the run
// file has the figures.
func TestRunLineScenario(t *testing.T) {
	code, table, r := runLine(t, 30, (&fifoLine{}).line)
	for _, want := range []string{"✓ admitted == arrived", "✓ order_pairs > 0", "✓ order_inversions == 0", "✓ max_status_gap <= 5s", "PASS"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, table)
	}
	if c := r.Summary.Counters; c["arrived"] != 30 || c["admitted"] != 30 {
		t.Errorf("arrived %d, admitted %d; want 30, 30", c["arrived"], c["admitted"])
	}
	if f := r.Fairness; f == nil || f.SurePairs == 0 || f.SureInversions != 0 {
		t.Errorf("run file's fairness %+v; want sure pairs, none inverted", f)
	}
}

// Players admitted in the reverse order of their arrival fail the order
// rule (exit 99), and only it.
func TestRunLineScenarioCatchesInversions(t *testing.T) {
	code, table, r := runLine(t, 8, newLIFOLine(8).line)
	if code != exitThreshold || !strings.Contains(table, "✗ order_inversions == 0") {
		t.Fatalf("exit %d, want 99 with order_inversions failed:\n%s", code, table)
	}
	for _, c := range r.Criteria {
		if !c.Passed && c.Threshold != "order_inversions == 0" {
			t.Errorf("%s failed too: %s", c.Threshold, c.Detail)
		}
	}
	if f := r.Fairness; f == nil || f.SureInversions == 0 || f.SureInversions > f.SurePairs {
		t.Errorf("fairness %+v; want some sure inversions among the sure pairs", f)
	}
}

// The hold preset from the command line, with the RSS of this process:
// every player waits in line until the end, and the run has rss_per_conn.
func TestRunHoldScenario(t *testing.T) {
	g := clienttest.NewGameGate([]byte("s3cret"), arena.Game(), func(c *clienttest.Conn) bool {
		_ = c.Send(clienttest.Status(1, 1, 0, "t"))
		<-c.Context().Done()
		return false
	}, nil)
	defer g.Close()
	var stdout, stderr bytes.Buffer
	out := filepath.Join(t.TempDir(), "hold.ndjson")
	code := runArena([]string{"run", "hold", "-gate-urls", g.URL(), "-token-secret", "s3cret", "-progress", "off", "-out", out,
		"-pid", strconv.Itoa(os.Getpid()),
		"-set", "arrivals.phases[0].duration=1s", "-set", "arrivals.phases[1].players=20", "-set", "arrivals.phases[1].duration=500ms",
		"-set", "arrivals.phases[2].players=20", "-set", "arrivals.phases[2].duration=2s", "-set", "run.duration=3500ms"},
		env(nil), &stdout, &stderr)
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
	facts := rep.Facts()
	if held, ok := facts.Value("held"); !ok || held != 20 {
		t.Errorf("held = %v, %v; want 20", held, ok)
	}
	// This process's memory moves with the test's own garbage as much as
	// with 20 connections: the figure must be there, whatever its sign.
	if v, ok := facts.Value("rss_per_conn"); !ok {
		t.Errorf("rss_per_conn = %v, %v; want a figure with -pid", v, ok)
	}
	if xs, ok := facts.Series("server_rss_mb"); !ok || len(xs) == 0 {
		t.Errorf("server_rss_mb = %v, %v; want a series with -pid", xs, ok)
	}
}

// Bad input to the line and hold presets is refused before anything is
// sent, naming the field or flag.
func TestRunLineAndHoldRefuseBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "line", "-set", "arrivals.phases[1].players=-1"}, "players"},
		{[]string{"run", "line", "-set", "timeline[0].line.mode=fast"}, "timeline[0].line.mode"},
		{[]string{"run", "line", "-admin-urls", "http://10.0.0.1:8082/admin/line"}, "loopback"},
		{[]string{"run", "hold", "-gate-urls", "ws://10.0.0.1:8080/ws"}, "loopback"},
		{[]string{"run", "hold", "-source-addrs", "10.0.0.1"}, "10.0.0.1"},
		{[]string{"run", "hold", "-set", "client.policy=polite"}, "client.policy"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runArena(c.args, env(nil), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr.String())
		}
	}
}
