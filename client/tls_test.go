package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
)

// newTLSGate is a wss:// fake gate playing arena, and the path of a file
// holding its CA.
func newTLSGate(t *testing.T) (*clienttest.Gate, string) {
	t.Helper()
	g := clienttest.NewTLSGameGate(secret, arena.Game(), nil, nil)
	t.Cleanup(g.Close)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, g.CAPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return g, ca
}

func TestWSSWithCAFile(t *testing.T) {
	g, ca := newTLSGate(t)
	if !strings.HasPrefix(g.URL(), "wss://") {
		t.Fatalf("url %s", g.URL())
	}
	cfg, err := client.TLSConfigFromCAFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, g, "alice", client.Options{TLS: cfg})
	st := c.TLS()
	if st == nil || !st.HandshakeComplete || st.Version < tls.VersionTLS12 {
		t.Fatalf("TLS state = %+v", st)
	}
	if st.DidResume {
		t.Fatal("first connection resumed a session it cannot have")
	}
	if _, err := getProfile(ctx5s(t), c, ""); err != nil {
		t.Fatalf("call over wss: %v", err)
	}
}

func TestPlainHasNoTLSState(t *testing.T) {
	g := newGate(t, arenaPlay)
	if st := dial(t, g, "alice", client.Options{}).TLS(); st != nil {
		t.Fatalf("ws:// connection has TLS state %+v", st)
	}
}

// Without the gate's CA (the system roots do not hold httptest's), Dial
// fails with ErrCertificate, and DialRetry does not try again.
func TestWSSUntrustedCertificate(t *testing.T) {
	g, _ := newTLSGate(t)
	_, err := client.Dial(ctx5s(t), g.URL(), mint(t, "alice"), withArena(client.Options{}))
	if !errors.Is(err, client.ErrCertificate) {
		t.Fatalf("dial without the CA: %v, want ErrCertificate", err)
	}
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) || !strings.Contains(err.Error(), "TLSConfigFromCAFile") {
		t.Fatalf("error does not say what is wrong and what to do: %v", err)
	}
	if strings.Contains(err.Error(), "token=") {
		t.Fatalf("error echoes the token: %v", err)
	}
	dials := 0
	opts := withArena(client.Options{})
	_, err = client.DialRetry(ctx5s(t), g.URL(), func(context.Context) (string, error) { dials++; return mint(t, "alice"), nil }, opts)
	if !errors.Is(err, client.ErrCertificate) || dials != 1 {
		t.Fatalf("DialRetry: %v after %d dials, want ErrCertificate after 1", err, dials)
	}
}

// A CA file with another CA is refused the same way.
func TestWSSOtherCA(t *testing.T) {
	g, _ := newTLSGate(t)
	other := filepath.Join(t.TempDir(), "other.crt")
	if err := os.WriteFile(other, otherCAPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := client.TLSConfigFromCAFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Dial(ctx5s(t), g.URL(), mint(t, "alice"), withArena(client.Options{TLS: cfg})); !errors.Is(err, client.ErrCertificate) {
		t.Fatalf("dial trusting another CA: %v, want ErrCertificate", err)
	}
}

// A reconnect resumes the TLS session: with TLSConfigFromCAFile's own
// cache, and with a caller's config that has none (the SDK's shared one).
func TestWSSReconnectResumes(t *testing.T) {
	g, ca := newTLSGate(t)
	fromFile, err := client.TLSConfigFromCAFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(g.CAPEM())
	bare := &tls.Config{RootCAs: pool}
	for name, cfg := range map[string]*tls.Config{"TLSConfigFromCAFile": fromFile, "no cache": bare} {
		t.Run(name, func(t *testing.T) {
			first := dial(t, g, "alice", client.Options{TLS: cfg})
			if first.TLS().DidResume {
				t.Fatal("first connection resumed")
			}
			// The session ticket comes after the handshake: a reply read
			// on the connection means it was read too.
			if _, err := getProfile(ctx5s(t), first, ""); err != nil {
				t.Fatal(err)
			}
			first.Close()
			opts := withArena(client.Options{TLS: cfg, Reconnect: backoff.Reconnect{Spread: time.Millisecond, Base: time.Millisecond, Cap: time.Millisecond}})
			again, err := client.Reconnect(ctx5s(t), g.URL(), client.StaticToken(mint(t, "alice")), opts, first.Err())
			if err != nil {
				t.Fatalf("reconnect: %v", err)
			}
			defer again.Close()
			if st := again.TLS(); st == nil || !st.DidResume {
				t.Fatalf("reconnect did a full handshake: %+v", st)
			}
		})
	}
	if bare.ClientSessionCache != nil {
		t.Fatal("the caller's tls.Config was modified")
	}
}

// otherCAPEM is a self-signed CA certificate that signed nothing the gate
// serves (httptest's servers all share one certificate).
func otherCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "another CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestTLSConfigFromCAFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := client.TLSConfigFromCAFile(filepath.Join(dir, "missing.crt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	junk := filepath.Join(dir, "junk.crt")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.TLSConfigFromCAFile(junk); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("junk file: %v", err)
	}
}
