package loadtest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"levee/client/clienttest"
)

func shortHold() HoldConfig {
	cfg := DefaultHold()
	cfg.Conns, cfg.DialParallel, cfg.Hold, cfg.Settle, cfg.SampleEvery = 40, 8, 400*time.Millisecond, 100*time.Millisecond, 20*time.Millisecond
	cfg.PID = os.Getpid()
	return cfg
}

// Players held waiting in a line that never moves; the RSS figures are
// read (here: the test's own).
func TestRunHoldLine(t *testing.T) {
	var mu sync.Mutex
	tickets := map[string]bool{}
	g := clienttest.NewGateWithLine([]byte("s3cret"), func(c *clienttest.Conn) bool {
		mu.Lock()
		tickets[c.Player] = true
		mu.Unlock()
		_ = c.Send(clienttest.Status(1, 1, 0, "t-"+c.Player))
		<-c.Context().Done()
		return false
	}, clienttest.Game)
	defer g.Close()
	rep, err := testRunner(t, g.URL()).RunHold(context.Background(), shortHold())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	_ = rep.WriteTable(&out)
	if !rep.Passed || rep.Held != 40 || rep.Dropped != 0 || rep.Samples == 0 || rep.RSSBefore <= 0 || rep.RSSHeld <= 0 {
		t.Fatalf("report:\n%s\n%+v", out.String(), rep)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tickets) != 40 {
		t.Fatalf("%d players reached the line", len(tickets))
	}
}

// Bare connections to a plain WebSocket server; the ones the server drops
// during the hold are counted.
func TestRunHoldBare(t *testing.T) {
	up := websocket.Upgrader{}
	var mu sync.Mutex
	var conns []*websocket.Conn
	arrived := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		arrived <- struct{}{}
		go func() {
			for {
				if _, _, err := c.NextReader(); err != nil {
					c.Close()
					return
				}
			}
		}()
	}))
	defer srv.Close()
	cfg := shortHold()
	cfg.Bare = true
	r := testRunner(t, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws")
	rep, err := r.RunHold(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || rep.Held != 40 || !rep.Bare {
		t.Fatalf("%+v", rep)
	}

	// Now the server drops 3 of them during the hold.
	mu.Lock()
	conns = nil
	mu.Unlock()
	for len(arrived) > 0 {
		<-arrived
	}
	cfg.Hold = 2 * time.Second
	done := make(chan *HoldReport, 1)
	go func() {
		rep, _ := r.RunHold(context.Background(), cfg)
		done <- rep
	}()
	for range 40 {
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			t.Fatal("the connections did not arrive")
		}
	}
	mu.Lock()
	for _, c := range conns[:3] {
		c.Close()
	}
	mu.Unlock()
	rep = <-done
	if rep.Passed || rep.Dropped != 3 || rep.Held != 40 {
		t.Fatalf("%+v", rep)
	}
}

func TestReadRSS(t *testing.T) {
	v, err := ReadRSS(os.Getpid())
	if err != nil || v < 1<<20 {
		t.Fatalf("RSS %v, %v", v, err)
	}
	if _, err := ReadRSS(1 << 30); err == nil {
		t.Fatal("no error for a missing process")
	}
}

func TestHoldConfigValidate(t *testing.T) {
	cfg := DefaultHold()
	cfg.Settle = cfg.Hold
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "-hold-settle") {
		t.Fatal(err)
	}
	if err := DefaultHold().Validate(); err != nil {
		t.Fatal(err)
	}
}

// arrivals counts the players a fake line has seen and closes all once
// want have come.
type arrivals struct {
	mu   sync.Mutex
	seen int
	want int
	all  chan struct{}
}

func newArrivals(want int) *arrivals { return &arrivals{want: want, all: make(chan struct{})} }

// arrive returns this player's rank (0 for the first).
func (a *arrivals) arrive() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.seen
	a.seen++
	if a.seen == a.want {
		close(a.all)
	}
	return k
}

// A line that, once every player is in, lets a quarter of them in (they
// log in and stay connected: held, admitted, not dropped) and drops
// another quarter (closed without a close frame: dropped, with the
// reason).
// quarterLineGate is a gate whose line holds 40 players until all have
// come, then admits a quarter, drops a quarter (closed without a close
// frame) and keeps the rest waiting.
func quarterLineGate() *clienttest.Gate {
	a := newArrivals(40)
	return clienttest.NewGateWithLine([]byte("s3cret"), func(c *clienttest.Conn) bool {
		k := a.arrive()
		_ = c.Send(clienttest.Status(uint64(k+1), 40, 0, "t-"+c.Player))
		select {
		case <-a.all:
		case <-c.Context().Done():
			return false
		}
		switch k % 4 {
		case 0:
			_ = c.Send(clienttest.Admit(time.Second))
			return true
		case 1:
			return false
		}
		<-c.Context().Done()
		return false
	}, clienttest.Game)
}

func TestRunHoldAdmittedAreHeld(t *testing.T) {
	g := quarterLineGate()
	defer g.Close()
	cfg := shortHold()
	cfg.Hold = 2 * time.Second
	rep, err := testRunner(t, g.URL()).RunHold(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	_ = rep.WriteTable(&out)
	if rep.Passed || rep.Held != 40 || rep.Admitted != 10 || rep.Dropped != 10 || Sum(rep.DropReasons) != 10 || Sum(rep.Failures) != 0 {
		t.Fatalf("want 40 held, 10 admitted, 10 dropped; report:\n%s\n%+v", out.String(), rep)
	}
	if len(rep.DropExamples) != len(rep.DropReasons) || !strings.Contains(out.String(), "first dropped, ") {
		t.Fatalf("no example of each drop reason:\n%s\n%+v", out.String(), rep.DropExamples)
	}
	if !strings.Contains(out.String(), "admitted 10") {
		t.Fatalf("the table does not show the admitted:\n%s", out.String())
	}
}

// -hold-end-file ends a long hold as soon as the file appears, and the
// run still passes.
func TestRunHoldEndFile(t *testing.T) {
	a := newArrivals(40)
	g := clienttest.NewGateWithLine([]byte("s3cret"), func(c *clienttest.Conn) bool {
		a.arrive()
		_ = c.Send(clienttest.Status(1, 1, 0, "t-"+c.Player))
		<-c.Context().Done()
		return false
	}, clienttest.Game)
	defer g.Close()
	cfg := shortHold()
	cfg.Hold, cfg.PID = time.Hour, 0
	cfg.EndFile = filepath.Join(t.TempDir(), "end")
	done := make(chan *HoldReport, 1)
	go func() {
		rep, err := testRunner(t, g.URL()).RunHold(context.Background(), cfg)
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	select {
	case <-a.all:
	case <-time.After(30 * time.Second):
		t.Fatal("the players did not reach the line")
	}
	if err := os.WriteFile(cfg.EndFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case rep := <-done:
		if rep == nil || !rep.Passed || !rep.EndedByFile || rep.Held != 40 || rep.HeldFor >= cfg.Hold {
			t.Fatalf("%+v", rep)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the hold did not end when the file appeared")
	}
}

// With SourceAddr every connection comes from that loopback address.
func TestRunHoldSourceAddr(t *testing.T) {
	up := websocket.Upgrader{}
	var mu sync.Mutex
	from := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		from[host]++
		mu.Unlock()
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			if _, _, err := c.NextReader(); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	rc := DefaultRunnerConfig()
	rc.GateURL, rc.ProgressEvery, rc.SourceAddr = "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", 0, "127.0.0.2"
	r, err := NewRunner(rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := shortHold()
	cfg.Bare, cfg.PID = true, 0
	rep, err := r.RunHold(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !rep.Passed || len(from) != 1 || from["127.0.0.2"] != 40 {
		t.Fatalf("connections by source address %v; report %+v", from, rep)
	}
}
