// Package tlstest mints certificates for tests: a cluster CA, role
// certificates (URI SAN spiffe://levee/<role>), edge certificates for
// localhost, and the bad ones tests try to get in with (expired, from
// another CA, self-signed, the wrong role or name). Everything is written
// into t.TempDir(); nothing is committed.
package tlstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/tlsconf"
)

var serials atomic.Int64

func init() { serials.Store(time.Now().UnixNano()) }

// CA is a certificate authority whose certificate is in CAFile.
type CA struct {
	Cert   *x509.Certificate
	key    crypto.Signer
	CAFile string
	dir    string
}

// NewCA mints a CA valid from an hour ago for a day, and writes its
// certificate to ca.crt in a new temporary directory.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serials.Add(1)),
		Subject:               pkix.Name{CommonName: "levee test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	dir := t.TempDir()
	ca := &CA{Cert: cert, key: key, dir: dir, CAFile: filepath.Join(dir, "ca.crt")}
	writeFile(t, ca.CAFile, pemBlock("CERTIFICATE", der))
	return ca
}

// Spec is what a minted certificate says. The zero value is a leaf valid
// from an hour ago for a day, for client and server use, without names.
type Spec struct {
	Role      tlsconf.Role // "": no role URI
	DNS       []string
	IPs       []net.IP
	NotBefore time.Time // zero: an hour ago
	NotAfter  time.Time // zero: a day from now
}

// Expired is a Spec whose validity ended an hour ago.
func Expired(role tlsconf.Role) Spec {
	now := time.Now()
	return Spec{Role: role, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)}
}

// Localhost is the spec of an edge certificate for localhost and 127.0.0.1.
func Localhost() Spec {
	return Spec{DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
}

// Files are a written certificate and key, and the certificate's serial.
type Files struct {
	Cert, Key string
	Serial    *big.Int
}

// Issue mints a certificate for s signed by ca and writes it as
// <name>.crt and <name>.key in ca's directory.
func (ca *CA) Issue(t testing.TB, name string, s Spec) Files {
	t.Helper()
	f := Files{Cert: filepath.Join(ca.dir, name+".crt"), Key: filepath.Join(ca.dir, name+".key")}
	f.Serial = ca.Write(t, f.Cert, f.Key, s)
	return f
}

// Role is Issue of a valid certificate for role, named after it, with
// the DNS name localhost.
func (ca *CA) Role(t testing.TB, role tlsconf.Role) Files {
	t.Helper()
	return ca.Issue(t, string(role), Spec{Role: role, DNS: []string{"localhost"}})
}

// Write mints a certificate for s and writes it over certFile and
// keyFile (a renewal), returning its serial. The key is written first
// and the certificate last, each in place, as a renewal tool might.
func (ca *CA) Write(t testing.TB, certFile, keyFile string, s Spec) *big.Int {
	t.Helper()
	certPEM, keyPEM, serial := ca.mint(t, s)
	writeFile(t, keyFile, keyPEM)
	writeFile(t, certFile, certPEM)
	return serial
}

// Cluster loads a tlsconf.Cluster for role from a fresh certificate of ca.
func (ca *CA) Cluster(t testing.TB, role tlsconf.Role, opts ...tlsconf.Option) *tlsconf.Cluster {
	t.Helper()
	f := ca.Role(t, role)
	c, err := tlsconf.LoadCluster(ca.CAFile, f.Cert, f.Key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ClientTLS is a client configuration that trusts ca only (for the edge).
func (ca *CA) ClientTLS() *tls.Config {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return &tls.Config{RootCAs: p, MinVersion: tls.VersionTLS12}
}

func (ca *CA) mint(t testing.TB, s Spec) (certPEM, keyPEM []byte, serial *big.Int) {
	t.Helper()
	return mint(t, s, ca.Cert, ca.key)
}

// mint signs a certificate for s by issuer; a nil issuer: by itself.
func mint(t testing.TB, s Spec, issuer *x509.Certificate, issuerKey crypto.Signer) (certPEM, keyPEM []byte, serial *big.Int) {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	if s.NotBefore.IsZero() {
		s.NotBefore = now.Add(-time.Hour)
	}
	if s.NotAfter.IsZero() {
		s.NotAfter = now.Add(24 * time.Hour)
	}
	serial = big.NewInt(serials.Add(1))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: string(s.Role)},
		NotBefore:    s.NotBefore,
		NotAfter:     s.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     s.DNS,
		IPAddresses:  s.IPs,
	}
	if s.Role != "" {
		u, err := url.Parse(s.Role.URI())
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	if issuer == nil {
		issuer, issuerKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), issuerKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", kder), serial
}

// SelfSigned writes a certificate for s that signs itself (no CA) as
// <name>.crt/.key in a new temporary directory.
func SelfSigned(t testing.TB, name string, s Spec) Files {
	t.Helper()
	dir := t.TempDir()
	f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	certPEM, keyPEM, serial := mint(t, s, nil, nil)
	writeFile(t, f.Key, keyPEM)
	writeFile(t, f.Cert, certPEM)
	f.Serial = serial
	return f
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
