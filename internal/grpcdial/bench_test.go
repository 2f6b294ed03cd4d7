package grpcdial

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
)

// BenchmarkUnary is the cost of one unary call between two tiers on an
// open connection, plaintext against mutual TLS (the handshake is paid
// once per connection; this is the per-request record encryption):
//
//	go test -run '^$' -bench Unary -benchmem ./internal/grpcdial/
func BenchmarkUnary(b *testing.B) {
	ca := tlstest.NewCA(b)
	for _, tc := range []struct {
		name           string
		server, client Security
	}{
		{"insecure", Insecure(), Insecure()},
		{"mtls", MTLS(ca.Cluster(b, tlsconf.RoleLogic)), MTLS(ca.Cluster(b, tlsconf.RoleGate))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := grpc.NewServer(tc.server.ServerOptions(LogicAccepts...)...)
			healthpb.RegisterHealthServer(srv, health.NewServer())
			go srv.Serve(lis)
			defer srv.Stop()
			cc, err := tc.client.Dial(lis.Addr().String(), tlsconf.RoleLogic)
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			hc := healthpb.NewHealthClient(cc)
			ctx := context.Background()
			if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
