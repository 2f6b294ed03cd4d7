package grpcdial

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leveehq/levee/internal/freeport"
	"github.com/leveehq/levee/internal/tlsconf"
)

// A callee that was away for several connection attempts is used again
// within MaxBackoff of its return. With gRPC's default backoff (1 s x 1.6
// up to 120 s) the wait after five failed attempts is 6-10 s, and this
// test fails.
func TestReconnectsSoonAfterALongOutage(t *testing.T) {
	// The callee is away, and comes back on this address later: one
	// outside the kernel's ephemeral range, which no outgoing connection
	// takes meanwhile.
	addr := freeport.Addr(t)

	const failures = 5
	var attempts atomic.Int64
	failed := make(chan struct{}, 64)
	dialer := func(ctx context.Context, a string) (net.Conn, error) {
		attempts.Add(1)
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
		if err != nil {
			failed <- struct{}{}
		}
		return c, err
	}
	cc, err := Insecure().Dial(addr, tlsconf.RoleLogic, grpc.WithContextDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cc.Connect()

	deadline := time.After(30 * time.Second)
	for range failures {
		select {
		case <-failed:
		case <-deadline:
			t.Fatalf("only %d connection attempts in 30 s", attempts.Load())
		}
	}

	// The callee comes back on the same address.
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port %s was taken meanwhile: %v", addr, err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	back := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), MaxBackoff+2*time.Second)
	defer cancel()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if s == connectivity.Idle {
			cc.Connect()
		}
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("not connected %v after the callee came back (state %v, %d attempts); want within MaxBackoff (%v)",
				time.Since(back).Round(time.Millisecond), cc.GetState(), attempts.Load(), MaxBackoff)
		}
	}
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health check after reconnecting: %v", err)
	}
}
