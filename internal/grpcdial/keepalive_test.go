package grpcdial

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leveehq/levee/internal/tlsconf"
)

// freezer is a TCP proxy that can stop forwarding while keeping its
// sockets open: a callee frozen (docker pause) or cut off the network,
// whose connections neither answer nor end.
type freezer struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
}

func (f *freezer) serve() {
	for {
		c, err := f.lis.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", f.target)
		if err != nil {
			c.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, c, up)
		f.mu.Unlock()
		go f.pipe(c, up)
		go f.pipe(up, c)
	}
}

// pipe copies until frozen; then it reads and drops, so that nothing
// comes back and the sender's TCP stays happy.
func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		f.mu.Lock()
		frozen := f.frozen
		f.mu.Unlock()
		if !frozen {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

func (f *freezer) freeze() { f.mu.Lock(); f.frozen = true; f.mu.Unlock() }

func (f *freezer) close() {
	f.lis.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

// A callee that stops answering without closing its connection is given
// up within KeepaliveTime + KeepaliveTimeout: the connection leaves READY,
// so that calls fail at once instead of each waiting for its deadline,
// and the next connection is made afresh. Without the keepalive the
// connection stays READY for as long as TCP retries and this test fails.
func TestKeepaliveGivesUpASilentCallee(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(Insecure().ServerOptions()...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	plis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{lis: plis, target: lis.Addr().String()}
	go f.serve()
	defer f.close()

	cc, err := Insecure().Dial(plis.Addr().String(), tlsconf.RoleLogic)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	// The call's success does not mean GetState says READY yet: gRPC
	// hands the READY picker to calls before it records the READY state
	// (balancer_wrapper.go UpdateState), and on a loaded machine the call
	// can finish in between. Wait for READY itself, with a deadline: the
	// freeze must start from READY, or WaitForStateChange below would
	// return at once and prove nothing.
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		cc.Connect()
		if !cc.WaitForStateChange(rctx, s) {
			t.Fatalf("state %v 5s after a successful call, want READY", s)
		}
	}
	f.freeze()
	frozeAt := time.Now()
	limit := KeepaliveTime + KeepaliveTimeout + 5*time.Second
	wctx, wcancel := context.WithTimeout(context.Background(), limit)
	defer wcancel()
	if !cc.WaitForStateChange(wctx, connectivity.Ready) {
		t.Fatalf("the connection to a silent callee was still READY %v after it froze", limit)
	}
	t.Logf("gave up the silent callee after %v (state %v)", time.Since(frozeAt).Round(100*time.Millisecond), cc.GetState())
}
