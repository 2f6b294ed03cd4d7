package battle

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Only logic (and ops) may call battle: a gate's certificate is refused
// at the handshake and its job never runs.
func TestBattleAcceptsOnlyLogicOverMTLS(t *testing.T) {
	ca := tlstest.NewCA(t)
	cfg := testConfig()
	cfg.Security = grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleBattle))
	r := start(t, cfg, nil)
	addr := r.srv.GRPCAddr().String()
	run := func(t *testing.T, sec grpcdial.Security, plain bool) error {
		t.Helper()
		var cc *grpc.ClientConn
		var err error
		if plain {
			cc, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		} else {
			cc, err = sec.Dial(addr, tlsconf.RoleBattle)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = leveev2.NewJobsClient(cc).Run(ctx, jobRequest(t, skirmish(1)))
		return err
	}
	if err := run(t, grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleLogic)), false); err != nil {
		t.Fatalf("logic's job: %v", err)
	}
	for name, sec := range map[string]grpcdial.Security{
		"gate": grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleGate)),
	} {
		if err := run(t, sec, false); status.Code(err) != codes.Unavailable {
			t.Fatalf("%s's job: %v, want UNAVAILABLE", name, err)
		}
	}
	if err := run(t, grpcdial.Insecure(), true); status.Code(err) != codes.Unavailable {
		t.Fatalf("a plaintext job: %v, want UNAVAILABLE", err)
	}
	if n := testutil.ToFloat64(r.srv.m.requests.WithLabelValues("ok")); n != 1 {
		t.Fatalf("%v jobs ran, want only logic's", n)
	}
	if n := cfg.Security.Cluster().Refusals("wrong_role"); n != 1 {
		t.Fatalf("wrong_role refusals %d, want 1", n)
	}
}
