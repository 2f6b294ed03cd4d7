package cli

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
)

// runTier runs a tier "logic" that records the security it was given.
func runTier(t *testing.T, args []string, env map[string]string) (code int, sec grpcdial.Security, ran bool, stderr string) {
	t.Helper()
	var out bytes.Buffer
	tier := Tier{
		Name: "logic", EnvPrefix: "LOGIC", GRPCAddr: ":9000",
		Flags:    func(*flag.FlagSet) {},
		Validate: func() error { return nil },
		Run:      func(context.Context, *slog.Logger) error { ran = true; return nil },
		Security: &sec,
	}
	code = Main(tier, args, func(k string) string { return env[k] }, &out)
	return code, sec, ran, out.String()
}

func TestATierMustChooseItsTransportSecurity(t *testing.T) {
	code, _, ran, errOut := runTier(t, nil, nil)
	if code != 2 || ran {
		t.Fatalf("neither: exit %d, ran %v", code, ran)
	}
	for _, want := range []string{"-cluster-ca", "-cluster-cert", "-cluster-key", "-insecure", "LEVEE_INSECURE"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the message does not name %s: %q", want, errOut)
		}
	}

	ca := tlstest.NewCA(t)
	f := ca.Role(t, tlsconf.RoleLogic)
	gateCert := ca.Role(t, tlsconf.RoleGate)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"only the CA", []string{"-cluster-ca", ca.CAFile}, nil, "missing -cluster-cert, -cluster-key"},
		{"both", []string{"-insecure", "-cluster-ca", ca.CAFile}, nil, "exclude each other"},
		{"another tier's certificate", []string{"-cluster-ca", ca.CAFile, "-cluster-cert", gateCert.Cert, "-cluster-key", gateCert.Key}, nil, `want "logic"`},
		{"a missing file", []string{"-cluster-ca", ca.CAFile + ".gone", "-cluster-cert", f.Cert, "-cluster-key", f.Key}, nil, ".gone"},
		{"bad env", nil, map[string]string{"LEVEE_INSECURE": "perhaps"}, "LEVEE_INSECURE"},
	} {
		code, _, ran, errOut := runTier(t, tc.args, tc.env)
		if code != 2 || ran || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, ran %v, stderr %q; want exit 2 naming %q", tc.name, code, ran, errOut, tc.want)
		}
	}

	code, sec, ran, errOut := runTier(t, nil, map[string]string{"LEVEE_INSECURE": "1"})
	if code != 0 || !ran || !sec.IsInsecure() {
		t.Fatalf("LEVEE_INSECURE=1: exit %d, ran %v, %v", code, ran, sec)
	}
	if !strings.Contains(errOut, `"level":"WARN"`) || !strings.Contains(errOut, "-insecure") {
		t.Fatalf("-insecure is not logged as a warning: %q", errOut)
	}

	code, sec, ran, errOut = runTier(t, nil, map[string]string{
		"LEVEE_CLUSTER_CA": ca.CAFile, "LEVEE_CLUSTER_CERT": f.Cert, "LEVEE_CLUSTER_KEY": f.Key})
	if code != 0 || !ran || sec.IsInsecure() {
		t.Fatalf("certificates from the environment: exit %d, ran %v, %v, %s", code, ran, sec, errOut)
	}
	if r, _ := sec.Cluster().Role(); r != tlsconf.RoleLogic {
		t.Fatalf("role %q", r)
	}
}

func TestUsageNamesTheSharedVariables(t *testing.T) {
	_, _, _, errOut := runTier(t, []string{"-h"}, nil)
	for _, want := range []string{"env LEVEE_CLUSTER_CA", "env LEVEE_CLUSTER_CERT", "env LEVEE_CLUSTER_KEY", "env LEVEE_INSECURE"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("usage does not say %q", want)
		}
	}
}

func TestHealthcheckOverMTLS(t *testing.T) {
	ca := tlstest.NewCA(t)
	srv := grpc.NewServer(grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleLogic)).ServerOptions(grpcdial.LogicAccepts...)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	addr := lis.Addr().String()
	var out bytes.Buffer
	if code := Healthcheck(addr, grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleOps)), tlsconf.RoleLogic, 5*time.Second, &out); code != 0 {
		t.Fatalf("ops probe: exit %d: %s", code, out.String())
	}
	for name, sec := range map[string]grpcdial.Security{
		"plaintext":   grpcdial.Insecure(),
		"battle cert": grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleBattle)),
	} {
		if code := Healthcheck(addr, sec, tlsconf.RoleLogic, 2*time.Second, &out); code != 1 {
			t.Errorf("%s probe: exit %d, want 1", name, code)
		}
	}
	// Expecting another role of the server fails too.
	if code := Healthcheck(addr, grpcdial.MTLS(ca.Cluster(t, tlsconf.RoleOps)), tlsconf.RoleBattle, 2*time.Second, &out); code != 1 {
		t.Errorf("probe expecting battle: exit %d, want 1", code)
	}
}
