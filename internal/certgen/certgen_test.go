package certgen

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func readCert(t *testing.T, dir, stem string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, stem+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s.crt: no PEM", stem)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pool(t *testing.T, dir string) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(readCert(t, dir, CAName))
	return p
}

func TestWriteRolesAndEdge(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	res, err := Write(Options{Dir: dir, Now: now, EdgeNames: []string{"play.example.com", "10.1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NewCA || len(res.Files) != 2*(len(Roles)+2) {
		t.Fatalf("result %+v", res)
	}
	roots := pool(t, dir)
	ca := readCert(t, dir, CAName)
	if !ca.IsCA || ca.NotAfter.Sub(now) != DefaultCAValidity {
		t.Fatalf("CA: IsCA %v, NotAfter %v", ca.IsCA, ca.NotAfter)
	}
	for _, role := range Roles {
		c := readCert(t, dir, role)
		if len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://levee/"+role {
			t.Errorf("%s: URIs %v", role, c.URIs)
		}
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := c.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("%s: does not verify for usage %v: %v", role, usage, err)
			}
		}
		if err := c.VerifyHostname("127.0.0.1"); err != nil {
			t.Errorf("%s: %v", role, err)
		}
		if c.NotAfter.Sub(now) != DefaultLeafValidity {
			t.Errorf("%s: NotAfter %v", role, c.NotAfter)
		}
		if _, err := tls.LoadX509KeyPair(filepath.Join(dir, role+".crt"), filepath.Join(dir, role+".key")); err != nil {
			t.Errorf("%s: %v", role, err)
		}
	}
	for role, host := range map[string]string{
		"gate": "gate-admin.levee.svc.cluster.local", "logic": "logic-1.logic.levee.svc.cluster.local",
		"battle": "battle-2", "ops": "localhost",
	} {
		if err := readCert(t, dir, role).VerifyHostname(host); err != nil {
			t.Errorf("%s: %v", role, err)
		}
	}
	if err := readCert(t, dir, "logic").VerifyHostname("battle"); err == nil {
		t.Error("logic's certificate is valid for battle's name")
	}
	edge := readCert(t, dir, EdgeName)
	for _, host := range []string{"localhost", "127.0.0.1", "::1", "play.example.com", "10.1.2.3"} {
		if err := edge.VerifyHostname(host); err != nil {
			t.Errorf("edge: %v", err)
		}
	}
	if len(edge.URIs) != 0 {
		t.Errorf("edge carries a cluster role: %v", edge.URIs)
	}
	if _, err := edge.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("the edge certificate is valid as a client certificate")
	}
	for _, f := range res.Files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o644)
		if filepath.Ext(f) == ".key" {
			want = 0o600
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", f, st.Mode().Perm(), want)
		}
	}
}

// The pairs work for a real mutual-TLS handshake against the CA.
func TestHandshake(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(Options{Dir: dir, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	load := func(stem string) tls.Certificate {
		kp, err := tls.LoadX509KeyPair(filepath.Join(dir, stem+".crt"), filepath.Join(dir, stem+".key"))
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	roots := pool(t, dir)
	c1, c2 := net.Pipe()
	srv := tls.Server(c1, &tls.Config{Certificates: []tls.Certificate{load("logic")}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert})
	cl := tls.Client(c2, &tls.Config{Certificates: []tls.Certificate{load("gate")}, RootCAs: roots, ServerName: "logic-0.logic.levee.svc.cluster.local"})
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	if err := cl.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	peer := srv.ConnectionState().PeerCertificates[0]
	if peer.URIs[0].String() != "spiffe://levee/gate" {
		t.Fatalf("server sees %v", peer.URIs)
	}
	c1.Close() // not cl.Close: its close_notify would wait for a reader
	c2.Close()
}

func TestRerunKeepsCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(Options{Dir: dir, Now: now, GroupReadable: true}); err != nil {
		t.Fatal(err)
	}
	caBefore, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	gateBefore := readCert(t, dir, "gate")
	res, err := Write(Options{Dir: dir, Now: now.Add(time.Hour), GroupReadable: true})
	if err != nil {
		t.Fatal(err)
	}
	caAfter, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if res.NewCA || !bytes.Equal(caBefore, caAfter) {
		t.Fatal("the CA was replaced without Force")
	}
	if slices.Contains(res.Files, filepath.Join(dir, "ca.key")) {
		t.Fatal("ca.key rewritten")
	}
	gateAfter := readCert(t, dir, "gate")
	if gateAfter.SerialNumber.Cmp(gateBefore.SerialNumber) == 0 {
		t.Fatal("the gate's certificate was not renewed")
	}
	if _, err := gateAfter.Verify(x509.VerifyOptions{Roots: pool(t, dir), CurrentTime: now.Add(time.Hour), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("renewed leaf not signed by the kept CA: %v", err)
	}
	for _, stem := range append([]string{CAName, EdgeName}, Roles...) {
		st, _ := os.Stat(filepath.Join(dir, stem+".key"))
		if st.Mode().Perm() != 0o640 {
			t.Errorf("%s.key: mode %v", stem, st.Mode().Perm())
		}
	}

	res, err = Write(Options{Dir: dir, Now: now, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	caForced, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if !res.NewCA || bytes.Equal(caForced, caAfter) {
		t.Fatal("Force kept the CA")
	}
}

// A broken or half CA is refused and nothing is written.
func TestBadCAChangesNothing(t *testing.T) {
	good := t.TempDir()
	if _, err := Write(Options{Dir: good, Now: now}); err != nil {
		t.Fatal(err)
	}
	otherKey, _ := os.ReadFile(filepath.Join(good, "gate.key"))
	caCrt, _ := os.ReadFile(filepath.Join(good, "ca.crt"))
	cases := map[string]map[string][]byte{
		"garbage cert":  {"ca.crt": []byte("not pem"), "ca.key": otherKey},
		"only the cert": {"ca.crt": caCrt},
		"only the key":  {"ca.key": otherKey},
		"leaf as CA":    {"ca.crt": must(os.ReadFile(filepath.Join(good, "gate.crt"))), "ca.key": otherKey},
		"someone's key": {"ca.crt": caCrt, "ca.key": otherKey},
		"garbage key":   {"ca.crt": caCrt, "ca.key": []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for f, b := range files {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Write(Options{Dir: dir, Now: now})
			if !errors.Is(err, ErrBadCA) {
				t.Fatalf("err %v, want ErrBadCA", err)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != len(files) {
				t.Fatalf("%d files after a refusal, want %d", len(ents), len(files))
			}
			for f, b := range files {
				if got, _ := os.ReadFile(filepath.Join(dir, f)); !bytes.Equal(got, b) {
					t.Fatalf("%s changed", f)
				}
			}
		})
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestBadOptions(t *testing.T) {
	base := t.TempDir()
	for name, o := range map[string]Options{
		"no dir":        {Now: now},
		"no time":       {Dir: "x"},
		"negative":      {Dir: "x", Now: now, LeafValidity: -time.Hour},
		"bad edge name": {Dir: "x", Now: now, EdgeNames: []string{"a b"}},
		"empty edge":    {Dir: "x", Now: now, EdgeNames: []string{""}},
		"bad namespace": {Dir: "x", Now: now, Namespace: "a.b"},
	} {
		if o.Dir != "" {
			o.Dir = filepath.Join(base, name)
		}
		if _, err := Write(o); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%s: err %v", name, err)
		}
		if o.Dir != "" {
			if _, err := os.Stat(o.Dir); err == nil {
				t.Errorf("%s: directory created", name)
			}
		}
	}
}

func TestLeafNeverOutlivesCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(Options{Dir: dir, Now: now, CAValidity: 24 * time.Hour, LeafValidity: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if got, ca := readCert(t, dir, "battle").NotAfter, readCert(t, dir, CAName).NotAfter; got.After(ca) {
		t.Fatalf("leaf until %v, CA until %v", got, ca)
	}
}

func TestNamespace(t *testing.T) {
	names := DNSNames("logic", "games")
	if !slices.Contains(names, "*.logic.games.svc.cluster.local") || slices.Contains(names, "logic.levee.svc") {
		t.Fatalf("names %v", names)
	}
}
