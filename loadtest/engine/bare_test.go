package engine

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
)

// Bare players against a plain WebSocket server that ends every third
// connection at once: the others stay up, read, until their life ends;
// each is counted once arrived, connected while up, left at the end, and
// the ended ones as server closes.
func TestBarePlayers(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	up := make(chan struct{}, 16)    // a connection held
	ended := make(chan struct{}, 16) // a connection the server ended, and the player closed after it
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || r.URL.Query().Get("token") != "" {
			t.Error("a bare player sent a token")
		}
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		conns++
		n := conns
		mu.Unlock()
		defer ws.Close()
		if n%3 == 0 {
			// End it; the player echoes the close, counts it and closes
			// its side (EOF here) only after counting.
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, ""), time.Now().Add(time.Second))
			for {
				if _, _, err := ws.NextReader(); err != nil {
					break
				}
			}
			_, _ = io.Copy(io.Discard, ws.UnderlyingConn())
			ended <- struct{}{}
			return
		}
		up <- struct{}{}
		for { // hold it: read until the player closes
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"

	start := time.Now()
	rec := record.New(start)
	p := &plan{bare: true, end: time.Minute, acts: []act{{do: "get_profile", cum: 1}}, speed: 1}
	d := newDriver(driverConfig{plan: p, gates: []string{url}, runID: "t", dialer: &websocket.Dialer{HandshakeTimeout: 5 * time.Second}},
		rec, start)
	live, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for n := range 6 {
		pl := &player{n: n, quit: make(chan struct{})}
		wg.Go(func() { d.play(live, live, pl) })
	}
	for i := range 6 {
		ch := up
		if i >= 4 {
			ch = ended
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("the players did not all connect (4 held, 2 ended) within 10 s")
		}
	}
	// The levels are read at a flush: 4 up once their players count
	// them (just after the server saw them up).
	var pts []record.Point
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	for limit := time.After(10 * time.Second); ; {
		pts = append(pts, rec.Flush(time.Now().Add(time.Second))...)
		if pts[len(pts)-1].Levels["connected"] == 4 {
			break
		}
		select {
		case <-tk.C:
		case <-limit:
			t.Fatalf("connected %v after 10 s, want the 4 held", pts[len(pts)-1].Levels["connected"])
		}
	}
	cancel()
	wg.Wait()
	sum := report.Summarize(append(pts, rec.Close(time.Now().Add(2*time.Second))...))
	c := sum.Counters
	if c["arrived"] != 6 || c["left"] != 6 || c[report.CounterServerCloses] != 2 || c["dial_failures"] != 0 || c["sent"] != 0 {
		t.Fatalf("counters %v; want 6 arrived, 6 left, 2 server closes, nothing sent", c)
	}
	if v := sum.Peak["connected"]; v < 4 || v > 6 { // the ended ones are up for a moment too
		t.Fatalf("at most %v connected, want 4 to 6", v)
	}
}

// A bare player whose server does not upgrade counts a dial failure.
func TestBareDialFailure(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	start := time.Now()
	rec := record.New(start)
	p := &plan{bare: true, end: time.Minute, acts: []act{{do: "get_profile", cum: 1}}, speed: 1}
	d := newDriver(driverConfig{plan: p, gates: []string{"ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"}, runID: "t",
		dialer: &websocket.Dialer{HandshakeTimeout: 5 * time.Second}}, rec, start)
	d.play(context.Background(), context.Background(), &player{n: 0, quit: make(chan struct{})})
	c := report.Summarize(rec.Close(time.Now())).Counters
	if c["arrived"] != 1 || c["dial_failures"] != 1 || c["left"] != 0 {
		t.Fatalf("counters %v; want 1 arrived, 1 dial failure", c)
	}
}
