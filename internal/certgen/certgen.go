// Package certgen mints the certificates a Levee cluster runs with when no
// one else issues them (the compose cluster, the Kubernetes test, a laptop):
// one ECDSA P-256 certificate authority, one client-and-server certificate
// per cluster role (gate, logic, battle, ops) whose role is its URI SAN
// spiffe://levee/<role>, and the gate's public edge certificate for wss.
//
// Write puts them into a directory as PEM files named by Files:
//
//	ca.crt ca.key                      the cluster CA (also signs the edge cert)
//	gate.crt gate.key  logic.crt ...   one pair per role
//	edge.crt edge.key                  the gate's wss/https certificate
//
// Keys are written 0600, or 0640 with Options.GroupReadable (so a container
// that runs as another uid with the file's group added can read them);
// certificates 0644. An existing CA is kept and reused to sign the new
// leaves, unless Options.Force: re-running Write renews the leaves without
// invalidating what the CA already signed. Time is passed in (Options.Now).
package certgen

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Roles are the cluster identities, in the order their files are written.
var Roles = []string{"gate", "logic", "battle", "ops"}

// Defaults of Options.
const (
	DefaultCAValidity   = 5 * 365 * 24 * time.Hour
	DefaultLeafValidity = 90 * 24 * time.Hour
	DefaultNamespace    = "levee"
	// EdgeName is the file stem of the gate's public certificate.
	EdgeName = "edge"
	// CAName is the file stem of the certificate authority.
	CAName = "ca"
)

// Errors of Write; wrapped with the offending value.
var (
	ErrBadOptions = errors.New("certgen: bad options")
	ErrBadCA      = errors.New("certgen: the existing CA cannot be used")
)

// Options say what Write mints.
type Options struct {
	// Dir is where the files go; created (0755) when missing.
	Dir string
	// Now is the issue time (NotBefore is an hour earlier, for clock skew).
	Now time.Time
	// CAValidity and LeafValidity are how long the CA and the other
	// certificates are valid from Now (0: the defaults).
	CAValidity, LeafValidity time.Duration
	// EdgeNames are extra DNS names or IP addresses of the edge certificate
	// (it always has localhost, 127.0.0.1 and ::1).
	EdgeNames []string
	// Namespace is the Kubernetes namespace whose service names go into the
	// role certificates' DNS SANs ("" is DefaultNamespace).
	Namespace string
	// Force mints a new CA even when Dir has one.
	Force bool
	// GroupReadable writes the keys 0640 instead of 0600.
	GroupReadable bool
}

// Result says what Write did.
type Result struct {
	// NewCA is false when an existing CA was reused.
	NewCA bool
	// Files are the paths written, in order.
	Files []string
}

// URI is the URI SAN that names a role: spiffe://levee/<role>.
func URI(role string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: "levee", Path: "/" + role}
}

// DNSNames are the DNS SANs of a role's certificate: the compose service
// names, the Kubernetes service names (short, namespaced and cluster.local,
// with a wildcard for the pods of logic's and battle's headless Services)
// and localhost (the healthcheck dials 127.0.0.1 inside the container).
func DNSNames(role, namespace string) []string {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	var svcs []string // Kubernetes Services of the role
	names := []string{role}
	switch role {
	case "gate":
		svcs = []string{"gate", "gate-admin"}
	case "logic":
		svcs = []string{"logic"}
	case "battle":
		names = append(names, "battle-1", "battle-2")
		svcs = []string{"battle"}
	case "ops":
		// ops is a client identity (probes, admin tools): no Service.
	}
	for _, s := range svcs {
		full := s + "." + namespace + ".svc"
		names = append(names, full, full+".cluster.local")
		if s == "logic" || s == "battle" { // headless: logic-0.logic.levee.svc...
			names = append(names, "*."+full, "*."+full+".cluster.local")
		}
	}
	return append(names, "localhost")
}

// Write mints the CA (unless one is there and !opts.Force), every role's
// pair and the edge pair into opts.Dir. Every file is replaced atomically
// (a reloading tier never reads half of one); bad options or an unusable
// existing CA are an error before any file is written.
func Write(opts Options) (*Result, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	res := &Result{}
	ca, caKey, err := loadCA(opts.Dir)
	switch {
	case err == nil && !opts.Force:
	case opts.Force || errors.Is(err, fs.ErrNotExist):
		ca, caKey, err = newCA(opts)
		if err != nil {
			return nil, err
		}
		res.NewCA = true
	default:
		return nil, fmt.Errorf("%w (%v); pass -force to replace it", ErrBadCA, err)
	}
	type pair struct {
		stem    string
		certPEM []byte
		keyPEM  []byte
	}
	var pairs []pair
	if res.NewCA {
		keyPEM, err := encodeKey(caKey)
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, pair{CAName, encodeCert(ca.Raw), keyPEM})
	}
	for _, role := range Roles {
		tmpl := leafTemplate(opts, role)
		tmpl.URIs = []*url.URL{URI(role)}
		tmpl.DNSNames = DNSNames(role, opts.Namespace)
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		c, k, err := sign(tmpl, ca, caKey)
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, pair{role, c, k})
	}
	edge := leafTemplate(opts, EdgeName)
	edge.DNSNames = []string{"localhost"}
	edge.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, n := range opts.EdgeNames {
		if ip := net.ParseIP(n); ip != nil {
			edge.IPAddresses = append(edge.IPAddresses, ip)
		} else {
			edge.DNSNames = append(edge.DNSNames, n)
		}
	}
	edge.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	c, k, err := sign(edge, ca, caKey)
	if err != nil {
		return nil, err
	}
	pairs = append(pairs, pair{EdgeName, c, k})

	keyMode := fs.FileMode(0o600)
	if opts.GroupReadable {
		keyMode = 0o640
	}
	for _, p := range pairs {
		// The key first: a certificate is never on disk beside an old key.
		kf := filepath.Join(opts.Dir, p.stem+".key")
		if err := writeFile(kf, p.keyPEM, keyMode); err != nil {
			return res, err
		}
		cf := filepath.Join(opts.Dir, p.stem+".crt")
		if err := writeFile(cf, p.certPEM, 0o644); err != nil {
			return res, err
		}
		res.Files = append(res.Files, kf, cf)
	}
	if !res.NewCA && opts.GroupReadable { // the kept CA key's mode follows too
		if err := os.Chmod(filepath.Join(opts.Dir, CAName+".key"), keyMode); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (o *Options) check() error {
	if o.Dir == "" {
		return fmt.Errorf("%w: no directory", ErrBadOptions)
	}
	if o.Now.IsZero() {
		return fmt.Errorf("%w: no issue time", ErrBadOptions)
	}
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.LeafValidity == 0 {
		o.LeafValidity = DefaultLeafValidity
	}
	if o.CAValidity < 0 || o.LeafValidity < 0 {
		return fmt.Errorf("%w: negative validity", ErrBadOptions)
	}
	for _, n := range o.EdgeNames {
		if n == "" || strings.ContainsAny(n, " /:,") && net.ParseIP(n) == nil {
			return fmt.Errorf("%w: edge name %q is neither a DNS name nor an IP address", ErrBadOptions, n)
		}
	}
	if o.Namespace != "" && strings.ContainsAny(o.Namespace, " ./:") {
		return fmt.Errorf("%w: namespace %q", ErrBadOptions, o.Namespace)
	}
	return nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func newCA(opts Options) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{Organization: []string{"Levee"}, CommonName: "Levee cluster CA"},
		NotBefore:             opts.Now.Add(-time.Hour),
		NotAfter:              opts.Now.Add(opts.CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func leafTemplate(opts Options, name string) *x509.Certificate {
	notAfter := opts.Now.Add(opts.LeafValidity)
	return &x509.Certificate{
		Subject:   pkix.Name{Organization: []string{"Levee"}, CommonName: "levee-" + name},
		NotBefore: opts.Now.Add(-time.Hour),
		NotAfter:  notAfter,
		KeyUsage:  x509.KeyUsageDigitalSignature,
	}
}

// sign makes a fresh P-256 key for tmpl and signs it with the CA; a leaf
// never outlives its CA.
func sign(tmpl, ca *x509.Certificate, caKey crypto.Signer) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, nil, err
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	return encodeCert(der), keyPEM, err
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// loadCA reads Dir's ca.crt and ca.key: fs.ErrNotExist when neither is
// there, another error when they are unusable (one missing, unparsable, not
// a CA, or not each other's).
func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, cerr := os.ReadFile(filepath.Join(dir, CAName+".crt"))
	keyPEM, kerr := os.ReadFile(filepath.Join(dir, CAName+".key"))
	if errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist) {
		return nil, nil, fs.ErrNotExist
	}
	if cerr != nil {
		return nil, nil, fmt.Errorf("ca.crt: %w", noNotExist(cerr))
	}
	if kerr != nil {
		return nil, nil, fmt.Errorf("ca.key: %w", noNotExist(kerr))
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("ca.crt holds no PEM certificate")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("ca.crt: %w", err)
	}
	if !ca.IsCA {
		return nil, nil, errors.New("ca.crt is not a CA certificate")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("ca.key holds no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		if ek, err2 := x509.ParseECPrivateKey(kb.Bytes); err2 == nil {
			k, err = ek, nil
		} else {
			return nil, nil, fmt.Errorf("ca.key: %w", err)
		}
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("ca.key is not a signing key")
	}
	pub, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		return nil, nil, err
	}
	if !bytes.Equal(pub, ca.RawSubjectPublicKeyInfo) {
		return nil, nil, errors.New("ca.key is not ca.crt's key")
	}
	return ca, signer, nil
}

// noNotExist keeps a half-missing CA from reading as "no CA".
func noNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("missing beside the other CA file")
	}
	return err
}

// writeFile replaces path atomically (a temp file renamed over it), so a
// tier reloading the file never reads half of it.
func writeFile(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
