package main

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The server upgrades, keeps the connection with one reader (which answers
// pings), and closes everything when its ctx ends.
func TestServeHoldsAndStops(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(1024, 4096)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, lis) }()

	ws, _, err := websocket.DefaultDialer.Dial("ws://"+lis.Addr().String()+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	pong := make(chan struct{}, 1)
	ws.SetPongHandler(func(string) error { pong <- struct{}{}; return nil })
	if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte("ignored")); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				read <- err
				return
			}
		}
	}()
	select {
	case <-pong:
	case <-time.After(5 * time.Second):
		t.Fatal("no pong")
	}
	if n := s.open.Load(); n != 1 {
		t.Fatalf("open = %d, want 1", n)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return")
	}
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("connection not closed at stop")
	}
	if n := s.open.Load(); n != 0 {
		t.Fatalf("open after stop = %d", n)
	}
}

func TestBadFlags(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"-read-buffer", "0"}, func(string) string { return "" }, &out, nil); code != 2 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}
