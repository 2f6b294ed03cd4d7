package grpcdial_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
)

// BenchmarkUnary is the mTLS cost per request between tiers: one small
// unary call (the health check: no work of its own, so what is measured
// is the transport) from a gate-role caller to a logic-role server on
// loopback, over Insecure() and over MTLS with the cluster's certificates
// (ECDSA P-256), on one connection set up before the timer. parallel=16
// keeps 16 calls in flight, as a gate's many players do.
func BenchmarkUnary(b *testing.B) {
	ca := tlstest.NewCA(b)
	for _, c := range []struct {
		name           string
		server, client grpcdial.Security
	}{
		{"insecure", grpcdial.Insecure(), grpcdial.Insecure()},
		{"mtls", grpcdial.MTLS(ca.Cluster(b, tlsconf.RoleLogic)), grpcdial.MTLS(ca.Cluster(b, tlsconf.RoleGate))},
	} {
		for _, parallel := range []bool{false, true} {
			name := c.name + "/serial"
			if parallel {
				name = c.name + "/parallel=16"
			}
			b.Run(name, func(b *testing.B) { benchUnary(b, c.server, c.client, parallel) })
		}
	}
}

func benchUnary(b *testing.B, server, client grpcdial.Security, parallel bool) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(server.ServerOptions(grpcdial.LogicAccepts...)...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(srv.Stop)
	cc, err := client.Dial(lis.Addr().String(), tlsconf.RoleLogic)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	hc := healthpb.NewHealthClient(cc)
	ctx := context.Background()
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		b.Fatalf("first call: %v", err) // also: the handshake is done before the timer
	}
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		for b.Loop() {
			if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(8) // 8 x GOMAXPROCS (2 here) = 16 callers
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
