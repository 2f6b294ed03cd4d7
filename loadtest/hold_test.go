package loadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
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
