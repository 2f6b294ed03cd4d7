// Command barews is a bare gorilla/websocket server, the yardstick of the
// memory benchmark (scripts/hold-memory.sh): what an idle WebSocket
// connection costs a Go server that does nothing else. Its handler upgrades
// at /ws (any path, in fact) and returns, so no HTTP handler goroutine or
// HTTP buffers stay with the connection; write buffers come from a pool
// (gorilla's WriteBufferPool) and are held only while a frame is written;
// the read buffer is 1 KiB, as the gate's; one goroutine per connection
// reads and discards frames (which also answers pings and closes) until the
// connection ends. It never writes a data frame.
//
// Usage: barews -addr 127.0.0.1:9090 [-metrics-addr 127.0.0.1:9091]. With
// -metrics-addr it serves /metrics (the Go and process collectors only, on
// their own listener: a constant cost, not one per connection), so that the
// benchmark can compare goroutines, heap and stacks per connection with the
// gate's. It stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/cli"
	"github.com/leveehq/levee/internal/metrics"
	"github.com/leveehq/levee/internal/serve"
)

func main() { os.Exit(run(os.Args[1:], os.Getenv, os.Stderr, nil)) }

// run serves until SIGINT or SIGTERM. ready, when not nil, gets the
// listening address.
func run(args []string, getenv func(string) string, stderr io.Writer, ready chan<- net.Addr) int {
	fs := flag.NewFlagSet("barews", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:9090", "listen address")
	readBuf := fs.Int("read-buffer", 1024, "read buffer per connection, bytes (the gate's is 1024)")
	writeBuf := fs.Int("write-buffer", 4096, "pooled write buffer size, bytes (the gate's is 4096)")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics (Go and process collectors) here; empty: off")
	cli.UsageWithEnv(fs, "BAREWS")
	if err := cli.Parse(fs, "BAREWS", args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *readBuf < 1 || *writeBuf < 1 {
		fmt.Fprintln(stderr, "-read-buffer and -write-buffer: must be > 0")
		return 2
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	if *metricsAddr != "" {
		mlis, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		mdone := make(chan error, 1)
		go func() {
			mdone <- serve.HTTP(ctx, &http.Server{Handler: metrics.OpsMux(metrics.NewRegistry("barews"), func() bool { return true }),
				ReadHeaderTimeout: 10 * time.Second}, mlis, 5*time.Second)
		}()
		defer func() { stop(); <-mdone }() // stop first: serve may have ended on its own
	}
	s := newServer(*readBuf, *writeBuf)
	if ready != nil {
		ready <- lis.Addr()
	}
	fmt.Fprintf(stderr, "barews: listening on %s\n", lis.Addr())
	if err := s.serve(ctx, lis); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stderr, "barews: stopped (%d connections were open)\n", s.open.Load())
	return 0
}

// server is the bare WebSocket server; it owns its connections' readers.
type server struct {
	up    websocket.Upgrader
	open  atomic.Int64
	mu    sync.Mutex
	conns map[*websocket.Conn]struct{}
	wg    sync.WaitGroup
}

func newServer(readBuf, writeBuf int) *server {
	return &server{
		up: websocket.Upgrader{
			ReadBufferSize:  readBuf,
			WriteBufferSize: writeBuf,
			WriteBufferPool: &sync.Pool{},
			CheckOrigin:     func(*http.Request) bool { return true },
		},
		conns: map[*websocket.Conn]struct{}{},
	}
}

// serve serves lis until ctx ends, then closes every connection and waits
// for their readers.
func (s *server) serve(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{Handler: http.HandlerFunc(s.handle), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx) // hijacked connections are not its business
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// handle upgrades and returns; the connection's reader owns it from then.
func (s *server) handle(w http.ResponseWriter, r *http.Request) {
	c, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.open.Add(1)
	go s.read(c)
}

func (s *server) read(c *websocket.Conn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.open.Add(-1)
		s.wg.Done()
	}()
	for {
		if _, _, err := c.NextReader(); err != nil {
			return
		}
	}
}
