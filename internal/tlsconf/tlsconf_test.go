package tlsconf_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
)

// handshake runs a TLS handshake between a client and a server config
// over loopback TCP and returns each side's error and the client's state.
// The server writes one byte after its handshake and the client reads it,
// so that a refusal the server makes after the client's handshake ended
// (TLS 1.3 checks the client's certificate last) reaches the client.
func handshake(t *testing.T, client, server *tls.Config) (cerr, serr error, cs tls.ConnectionState) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		sc := tls.Server(c, server)
		err = sc.Handshake()
		if err == nil {
			_, err = sc.Write([]byte("x"))
		}
		done <- err
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	cc := tls.Client(raw, client)
	cerr = cc.Handshake()
	if cerr == nil {
		_, cerr = cc.Read(make([]byte, 1))
	}
	cs = cc.ConnectionState()
	raw.Close()
	return cerr, <-done, cs
}

func serial(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].SerialNumber.String()
}

func TestKeyPairReloadsAtMostOncePerSecondAndKeepsTheOldOnABadFile(t *testing.T) {
	ca := tlstest.NewCA(t)
	f := ca.Issue(t, "edge", tlstest.Localhost())
	clk := clock.NewFake(time.Now())
	var logs bytes.Buffer
	kp, err := tlsconf.LoadKeyPair(f.Cert, f.Key, tlsconf.WithClock(clk),
		tlsconf.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	got := func() string { return kp.Certificate().Leaf.SerialNumber.String() }
	if got() != f.Serial.String() {
		t.Fatalf("serial %s, want %s", got(), f.Serial)
	}

	renewed := ca.Write(t, f.Cert, f.Key, tlstest.Localhost())
	clk.Advance(tlsconf.ReloadInterval / 2)
	if got() != f.Serial.String() {
		t.Fatalf("reloaded before ReloadInterval had passed")
	}
	clk.Advance(tlsconf.ReloadInterval / 2)
	if got() != renewed.String() {
		t.Fatalf("after the renewal and ReloadInterval: serial %s, want the renewed %s", got(), renewed)
	}

	// A half-written renewal: the certificate file is garbage. The renewed
	// pair stays in service and the failure is logged.
	if err := os.WriteFile(f.Cert, []byte("-----BEGIN CERTIFICATE-----\nbroken"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk.Advance(tlsconf.ReloadInterval)
	if got() != renewed.String() {
		t.Fatalf("a bad file replaced the pair in service: serial %s", got())
	}
	if !strings.Contains(logs.String(), "does not load") {
		t.Fatalf("the bad file was not logged: %q", logs.String())
	}
	// The next good write is picked up.
	again := ca.Write(t, f.Cert, f.Key, tlstest.Localhost())
	clk.Advance(tlsconf.ReloadInterval)
	if got() != again.String() {
		t.Fatalf("after a good write following a bad one: serial %s, want %s", got(), again)
	}

	// A missing file keeps the pair too.
	if err := os.Remove(f.Key); err != nil {
		t.Fatal(err)
	}
	clk.Advance(tlsconf.ReloadInterval)
	if got() != again.String() {
		t.Fatalf("a removed key file replaced the pair in service")
	}
}

func TestLoadRefusesBadFiles(t *testing.T) {
	ca := tlstest.NewCA(t)
	f := ca.Role(t, tlsconf.RoleGate)
	other := ca.Issue(t, "other", tlstest.Spec{Role: tlsconf.RoleLogic})
	if _, err := tlsconf.LoadKeyPair(f.Cert, other.Key); err == nil {
		t.Fatal("a certificate with another certificate's key loaded")
	}
	if _, err := tlsconf.LoadKeyPair(f.Cert, f.Key+".missing"); err == nil || !strings.Contains(err.Error(), ".missing") {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := tlsconf.LoadCAPool(f.Key); !errors.Is(err, tlsconf.ErrNoCACertificates) {
		t.Fatalf("a key as the CA file: %v", err)
	}
	noRole := ca.Issue(t, "norole", tlstest.Spec{})
	if _, err := tlsconf.LoadCluster(ca.CAFile, noRole.Cert, noRole.Key); !errors.Is(err, tlsconf.ErrWrongRole) {
		t.Fatalf("own certificate without a role: %v", err)
	}
}

func TestServerRefusesEveryWrongClient(t *testing.T) {
	ca := tlstest.NewCA(t)
	otherCA := tlstest.NewCA(t)
	logic := ca.Cluster(t, tlsconf.RoleLogic)
	server := logic.ServerConfig(tlsconf.RoleGate, tlsconf.RoleOps)

	clientWith := func(f tlstest.Files) *tls.Config {
		// The client half of the cluster: its own certificate, checking
		// the server's role.
		c, err := tlsconf.LoadCluster(ca.CAFile, f.Cert, f.Key)
		if err != nil {
			// A certificate the tier would not load itself (another CA's,
			// expired): present it raw.
			kp, err := tlsconf.LoadKeyPair(f.Cert, f.Key)
			if err != nil {
				t.Fatal(err)
			}
			return &tls.Config{GetClientCertificate: kp.GetClientCertificate, InsecureSkipVerify: true}
		}
		return c.ClientConfig(tlsconf.RoleLogic)
	}
	for _, tc := range []struct {
		name   string
		client *tls.Config
		want   error
	}{
		{"gate", clientWith(ca.Role(t, tlsconf.RoleGate)), nil},
		{"ops", clientWith(ca.Role(t, tlsconf.RoleOps)), nil},
		{"battle role", clientWith(ca.Role(t, tlsconf.RoleBattle)), tlsconf.ErrWrongRole},
		{"logic role", clientWith(ca.Issue(t, "logic2", tlstest.Spec{Role: tlsconf.RoleLogic})), tlsconf.ErrWrongRole},
		{"no role", clientWith(ca.Issue(t, "norole", tlstest.Spec{DNS: []string{"gate"}})), tlsconf.ErrWrongRole},
		{"other CA", clientWith(otherCA.Role(t, tlsconf.RoleGate)), tlsconf.ErrUnknownAuthority},
		{"self-signed", clientWith(tlstest.SelfSigned(t, "gate", tlstest.Spec{Role: tlsconf.RoleGate})), tlsconf.ErrUnknownAuthority},
		{"expired", clientWith(ca.Issue(t, "old", tlstest.Expired(tlsconf.RoleGate))), tlsconf.ErrExpired},
		{"no certificate", &tls.Config{InsecureSkipVerify: true}, tlsconf.ErrNoCertificate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := logic.Refusals(tlsconf.Reason(tc.want))
			cerr, serr, _ := handshake(t, tc.client, server)
			if tc.want == nil {
				if cerr != nil || serr != nil {
					t.Fatalf("refused: client %v, server %v", cerr, serr)
				}
				return
			}
			if !errors.Is(serr, tc.want) {
				t.Fatalf("server error %v, want %v", serr, tc.want)
			}
			if cerr == nil {
				t.Fatal("the client was not told it was refused")
			}
			if n := logic.Refusals(tlsconf.Reason(tc.want)); n != before+1 {
				t.Fatalf("refusals[%s] = %d, want %d", tlsconf.Reason(tc.want), n, before+1)
			}
		})
	}
}

func TestClientRefusesAServerWithTheWrongRoleOrCA(t *testing.T) {
	ca := tlstest.NewCA(t)
	otherCA := tlstest.NewCA(t)
	gate := ca.Cluster(t, tlsconf.RoleGate)
	for _, tc := range []struct {
		name   string
		server *tlsconf.Cluster
		want   error
	}{
		{"logic", ca.Cluster(t, tlsconf.RoleLogic), nil},
		{"battle posing as logic", ca.Cluster(t, tlsconf.RoleBattle), tlsconf.ErrWrongRole},
		{"logic of another CA", otherCA.Cluster(t, tlsconf.RoleLogic), tlsconf.ErrUnknownAuthority},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cerr, serr, _ := handshake(t, gate.ClientConfig(tlsconf.RoleLogic), tc.server.ServerConfig(tlsconf.RoleGate))
			if tc.want == nil {
				if cerr != nil || serr != nil {
					t.Fatalf("refused: client %v, server %v", cerr, serr)
				}
				return
			}
			if !errors.Is(cerr, tc.want) {
				t.Fatalf("client error %v, want %v", cerr, tc.want)
			}
		})
	}
	// An expired server certificate: the server is loaded with a pair it
	// would not be given in production.
	exp := ca.Issue(t, "oldlogic", tlstest.Expired(tlsconf.RoleLogic))
	kp, err := tlsconf.LoadKeyPair(exp.Cert, exp.Key)
	if err != nil {
		t.Fatal(err)
	}
	cerr, _, _ := handshake(t, gate.ClientConfig(tlsconf.RoleLogic), &tls.Config{GetCertificate: kp.GetCertificate, ClientAuth: tls.RequestClientCert})
	if !errors.Is(cerr, tlsconf.ErrExpired) {
		t.Fatalf("expired server: client error %v", cerr)
	}
}

func TestClusterReloadsItsCAAndPair(t *testing.T) {
	ca := tlstest.NewCA(t)
	newCA := tlstest.NewCA(t)
	clk := clock.NewFake(time.Now())
	lf := ca.Role(t, tlsconf.RoleLogic)
	logic, err := tlsconf.LoadCluster(ca.CAFile, lf.Cert, lf.Key, tlsconf.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	gate := newCA.Cluster(t, tlsconf.RoleGate)
	server := logic.ServerConfig(tlsconf.RoleGate)
	// Before the rollover a gate of the new CA and logic refuse each
	// other (the gate sees logic's old-CA certificate first).
	if cerr, _, _ := handshake(t, gate.ClientConfig(tlsconf.RoleLogic), server); !errors.Is(cerr, tlsconf.ErrUnknownAuthority) {
		t.Fatalf("before the CA rollover: %v", cerr)
	}
	if _, serr, _ := handshake(t, gate.ClientConfig(tlsconf.RoleLogic), logicAccepting(t, newCA, server)); !errors.Is(serr, tlsconf.ErrUnknownAuthority) {
		t.Fatalf("before the CA rollover, logic with a new-CA certificate: %v", serr)
	}
	both, err := os.ReadFile(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := os.ReadFile(newCA.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca.CAFile, append(both, nb...), 0o600); err != nil {
		t.Fatal(err)
	}
	// Renew logic's own certificate from the new CA as well.
	renewed := newCA.Write(t, lf.Cert, lf.Key, tlstest.Spec{Role: tlsconf.RoleLogic})
	clk.Advance(tlsconf.ReloadInterval)
	// The gate trusts only the new CA: it sees the renewed certificate.
	cerr, serr, cs := handshake(t, gate.ClientConfig(tlsconf.RoleLogic), server)
	if cerr != nil || serr != nil {
		t.Fatalf("after the rollover: client %v, server %v", cerr, serr)
	}
	if serial(cs) != renewed.String() {
		t.Fatalf("server serial %s, want the renewed %s", serial(cs), renewed)
	}
}

func TestEdgeResumesSessions(t *testing.T) {
	ca := tlstest.NewCA(t)
	f := ca.Issue(t, "edge", tlstest.Localhost())
	kp, err := tlsconf.LoadKeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	server := tlsconf.Edge(kp)
	if server.MinVersion != tls.VersionTLS12 {
		t.Fatalf("MinVersion %x", server.MinVersion)
	}
	client := ca.ClientTLS()
	client.ServerName = "localhost"
	client.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	for i, wantResumed := range []bool{false, true} {
		// Resumption needs the ticket, which TLS 1.3 sends after the
		// handshake: read from the connection so it arrives.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			sc := tls.Server(c, server)
			_, _ = sc.Write([]byte("x"))
			sc.Close()
		}()
		c, err := tls.Dial("tcp", ln.Addr().String(), client)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		if got := c.ConnectionState().DidResume; got != wantResumed {
			t.Fatalf("connection %d: resumed %v, want %v", i, got, wantResumed)
		}
		c.Close()
		ln.Close()
	}
	// A client that trusts another CA refuses the edge's certificate.
	if cerr, _, _ := handshake(t, &tls.Config{ServerName: "localhost", RootCAs: tlstest.NewCA(t).ClientTLS().RootCAs}, server); cerr == nil {
		t.Fatal("a client trusting another CA accepted the edge")
	}
}

// logicAccepting is server with a certificate of ca but logic's own
// (old) trust: what logic does with a gate of another CA.
func logicAccepting(t *testing.T, ca *tlstest.CA, server *tls.Config) *tls.Config {
	f := ca.Issue(t, "logic-newca", tlstest.Spec{Role: tlsconf.RoleLogic})
	kp, err := tlsconf.LoadKeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	c := server.Clone()
	c.GetCertificate = kp.GetCertificate
	return c
}
