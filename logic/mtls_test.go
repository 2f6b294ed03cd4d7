package logic

import (
	"crypto/tls"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// loadAs is a Cluster of cert files f that trusts ca: the tier's own
// checks pass (its role), whatever the certificate's issuer or validity.
func loadAs(t *testing.T, ca *tlstest.CA, f tlstest.Files) *tlsconf.Cluster {
	t.Helper()
	c, err := tlsconf.LoadCluster(ca.CAFile, f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Only gates (and ops) may call logic: a caller with a battle-role
// certificate, another CA's, an expired one, none, or plaintext is refused
// at the handshake, its request is never executed, and the refusal is
// counted by reason.
func TestLogicAcceptsOnlyGatesOverMTLS(t *testing.T) {
	ca := tlstest.NewCA(t)
	otherCA := tlstest.NewCA(t)
	e := start(t, envOpts{cfg: func(c *Config) { c.Security = grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleLogic)) }})
	addr := e.srv.GRPCAddr().String()
	dial := func(creds credentials.TransportCredentials) leveev2.LogicClient {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return leveev2.NewLogicClient(cc)
	}
	// The env's own client becomes a gate.
	e.conn.Close()
	cc, err := grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleGate)).Dial(addr, tlsconf.RoleLogic)
	if err != nil {
		t.Fatal(err)
	}
	e.conn, e.cli = cc, leveev2.NewLogicClient(cc)

	e.login("alice")
	before := e.profile("alice")
	if r := e.call(buyReq("alice", 10, "sword", 1)); r.GetBuyItem() == nil {
		t.Fatalf("a gate's purchase: %v", r)
	}
	afterGate := e.profile("alice")
	if samePlayer(before, afterGate) {
		t.Fatal("the gate's purchase changed nothing")
	}
	ops := dial(grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleOps)).DialCredentials(tlsconf.RoleLogic))
	if _, err := ops.Do(ctxT(t), profileReq("alice", "")); err != nil {
		t.Fatalf("ops: %v", err)
	}

	for i, tc := range []struct {
		name   string
		creds  credentials.TransportCredentials
		reason string // "" when the refusal happens before TLS (plaintext)
	}{
		{"battle role", grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleBattle)).DialCredentials(tlsconf.RoleLogic), "wrong_role"},
		{"logic role", grpcdial.MTLS(loadAs(t, ca, ca.Issue(t, "logic2", tlstest.Spec{Role: tlsconf.RoleLogic}))).DialCredentials(tlsconf.RoleLogic), "wrong_role"},
		{"another CA", grpcdial.MTLS(loadAs(t, ca, otherCA.Role(t, tlsconf.RoleGate))).DialCredentials(tlsconf.RoleLogic), "unknown_authority"},
		{"expired", grpcdial.MTLS(loadAs(t, ca, ca.Issue(t, "oldgate", tlstest.Expired(tlsconf.RoleGate)))).DialCredentials(tlsconf.RoleLogic), "expired"},
		{"no certificate", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}), "no_certificate"},
		{"plaintext", insecure.NewCredentials(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n float64
			if tc.reason != "" {
				n = tlsRefusals(t, e.srv, tc.reason)
			}
			_, err := dial(tc.creds).Do(ctxT(t), buyReq("alice", uint64(100+i), "sword", 1))
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("Do: %v, want UNAVAILABLE", err)
			}
			if tc.reason != "" {
				if got := tlsRefusals(t, e.srv, tc.reason); got != n+1 {
					t.Fatalf("logic_tls_refusals_total{reason=%q} = %v, want %v", tc.reason, got, n+1)
				}
			}
		})
	}
	if after := e.profile("alice"); !samePlayer(afterGate, after) {
		t.Fatal("a refused caller changed the player's state")
	}
}

// tlsRefusals is logic_tls_refusals_total{reason} as /metrics shows it.
func tlsRefusals(t *testing.T, s *Server, reason string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "logic_tls_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no logic_tls_refusals_total{reason=%q}", reason)
	return 0
}
