package gate

import (
	"context"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func TestHandshakeEndIsIdempotent(t *testing.T) {
	s := &Server{cfg: DefaultConfig()}
	s.cfg.MaxHandshakes = 1
	var h, h2 handshake
	if !s.beginHandshake(&h) || s.handshakes.Load() != 1 {
		t.Fatalf("begin refused or count %d", s.handshakes.Load())
	}
	if s.beginHandshake(&h2) {
		t.Fatal("a second handshake passed a cap of 1")
	}
	owner := h.handOff()
	h.End() // handed off: ending the handler's copy does nothing
	if n := s.handshakes.Load(); n != 1 {
		t.Fatalf("count %d after ending a handed-off handshake, want 1", n)
	}
	owner.End()
	owner.End()
	if n := s.handshakes.Load(); n != 0 {
		t.Fatalf("count %d after ending one handshake twice, want 0", n)
	}
	r := s.releaseHandshake() // not capped: the walker bounds it
	r.End()
	r.End()
	if n := s.handshakes.Load(); n != 0 {
		t.Fatalf("count %d after a released player's handshake, want 0", n)
	}
}

// blockLoginsUntilCancelled holds every login until the gate cancels it
// and reports each one on the returned channel.
func blockLoginsUntilCancelled(logic *fakeLogic) <-chan struct{} {
	in := make(chan struct{}, 16)
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		if req.GetLogin() == nil {
			return defaultReply(req), nil
		}
		in <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	return in
}

// TestHandshakesEndOnEveryPath checks that the handshake count returns to
// zero however a connection's start ends, for a player let in at once and
// for one released from the line.
func TestHandshakesEndOnEveryPath(t *testing.T) {
	zero := func(t *testing.T, g *testGate, what string) {
		t.Helper()
		testwait.Until(t, what+": no handshakes in progress", func() bool { return g.handshakes.Load() == 0 })
		if n := g.handshakes.Load(); n != 0 {
			t.Fatalf("%s: %d handshakes in progress", what, n)
		}
	}
	t.Run("accepted", func(t *testing.T) {
		g := startGate(t, nil, startFakeLogic(t))
		g.connect(t, "alice", wire.ProtoSubprotocol)
		// Ended when logic answered, before the welcome went out.
		if n := g.handshakes.Load(); n != 0 {
			t.Fatalf("%d handshakes in progress after the welcome", n)
		}
	})
	t.Run("accepted from the line", func(t *testing.T) {
		g := lineGate(t, "paced", 1, time.Second, nil)
		c, _ := g.join(t, "alice", "")
		g.advance(t, time.Second)
		c.recvAdmitted("alice")
		if n := g.handshakes.Load(); n != 0 {
			t.Fatalf("%d handshakes in progress after the welcome", n)
		}
	})
	t.Run("refused by the line", func(t *testing.T) {
		g := lineGate(t, "closed", 1, time.Second, nil)
		g.refused(t, g.lineURL(t, "alice", ""), leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, websocket.CloseTryAgainLater)
		zero(t, g, "refused by a closed line")
	})
	refuseLogin := func(logic *fakeLogic) {
		logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
			return nil, status.Error(codes.ResourceExhausted, "shard full")
		})
	}
	t.Run("login refused", func(t *testing.T) {
		logic := startFakeLogic(t)
		refuseLogin(logic)
		g := startGate(t, nil, logic)
		g.refused(t, g.wsURL(g.tokenFor(t, "alice")), leveev2.ErrorCode_ERROR_CODE_BUSY, websocket.CloseTryAgainLater)
		zero(t, g, "login refused")
	})
	t.Run("login refused after release", func(t *testing.T) {
		logic := startFakeLogic(t)
		refuseLogin(logic)
		g := lineGate(t, "paced", 1, time.Second, nil, logic)
		c, _ := g.join(t, "alice", "")
		g.advance(t, time.Second)
		if f := c.recv(); f.GetAdmitted() == nil {
			t.Fatalf("want Admitted, got %v", f)
		}
		wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_BUSY)
		if code := c.recvClose(); code != websocket.CloseTryAgainLater {
			t.Fatalf("close %d, want 1013", code)
		}
		testwait.Until(t, "the connection to end", func() bool { return testutil.ToFloat64(g.m.active) == 0 })
		zero(t, g, "login refused after release")
	})
	short := func(c *Config) { c.ShutdownGrace = 50 * time.Millisecond }
	t.Run("shutdown during login", func(t *testing.T) {
		logic := startFakeLogic(t)
		in := blockLoginsUntilCancelled(logic)
		g := startGate(t, short, logic)
		c := dialRaw(t, g.wsURL(g.tokenFor(t, "alice")), wire.ProtoSubprotocol, nil)
		<-in
		if n := g.handshakes.Load(); n != 1 {
			t.Fatalf("%d handshakes in progress during the login, want 1", n)
		}
		g.stop(t)
		wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN)
		zero(t, g, "shutdown during login")
	})
	t.Run("shutdown during login after release", func(t *testing.T) {
		logic := startFakeLogic(t)
		in := blockLoginsUntilCancelled(logic)
		g := lineGate(t, "paced", 1, time.Second, short, logic)
		c, _ := g.join(t, "alice", "")
		g.advance(t, time.Second)
		<-in
		if n := g.handshakes.Load(); n != 1 {
			t.Fatalf("%d handshakes in progress during the login, want 1", n)
		}
		g.stop(t)
		if f := c.recv(); f.GetAdmitted() == nil {
			t.Fatalf("want Admitted, got %v", f)
		}
		wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN)
		zero(t, g, "shutdown during login after release")
	})
	t.Run("socket closed while waiting in line", func(t *testing.T) {
		g := lineGate(t, "queueing", 1, time.Second, nil)
		c, _ := g.join(t, "alice", "")
		zero(t, g, "waiting in line")
		g.closeClient(t, c, 1)
		testwait.Until(t, "the connection to end", func() bool { return len(g.snapshot(nil)) == 0 })
		if n := g.handshakes.Load(); n != 0 {
			t.Fatalf("%d handshakes in progress after a waiting player left, want 0", n)
		}
	})
	t.Run("socket closed while waiting for the login after release", func(t *testing.T) {
		logic := startFakeLogic(t)
		in := blockLoginsUntilCancelled(logic)
		g := lineGate(t, "paced", 1, time.Second, nil, logic)
		c, _ := g.join(t, "alice", "")
		g.advance(t, time.Second)
		<-in
		_ = c.ws.Close() // the reader ends and cancels the login
		testwait.Until(t, "the connection to end", func() bool { return len(g.snapshot(nil)) == 0 })
		zero(t, g, "socket closed during the login")
	})
	t.Run("socket closed while waiting for the login", func(t *testing.T) {
		logic := startFakeLogic(t)
		release := blockLogins(t, logic)
		g := startGate(t, nil, logic)
		c := dialRaw(t, g.wsURL(g.tokenFor(t, "alice")), wire.ProtoSubprotocol, nil)
		<-logic.got
		_ = c.ws.Close() // nobody reads until the login is answered
		release()
		testwait.Until(t, "the connection to end", func() bool { return len(g.snapshot(nil)) == 0 })
		zero(t, g, "socket closed during the login")
	})
}
