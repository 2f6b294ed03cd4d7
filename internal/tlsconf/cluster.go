package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// Role is a tier's identity in the cluster, carried by its certificate as
// the URI SAN spiffe://levee/<role>.
type Role string

// The cluster's roles. logic accepts gate and ops; battle accepts logic
// and ops (see grpcdial).
const (
	RoleGate   Role = "gate"
	RoleLogic  Role = "logic"
	RoleBattle Role = "battle"
	RoleOps    Role = "ops"
)

// Roles are every role, in the order above.
var Roles = []Role{RoleGate, RoleLogic, RoleBattle, RoleOps}

// URIPrefix is the part of a role's URI SAN before the role.
const URIPrefix = "spiffe://levee/"

// URI is r's URI SAN: spiffe://levee/<r>.
func (r Role) URI() string { return URIPrefix + string(r) }

// RoleOf is the role in cert's URI SAN; ErrWrongRole when it has none, an
// unknown one or several.
func RoleOf(cert *x509.Certificate) (Role, error) {
	var found []Role
	for _, u := range cert.URIs {
		s := u.String()
		if !strings.HasPrefix(s, URIPrefix) {
			continue
		}
		r := Role(strings.TrimPrefix(s, URIPrefix))
		if !slices.Contains(Roles, r) {
			return "", fmt.Errorf("%w: unknown role URI %q", ErrWrongRole, s)
		}
		found = append(found, r)
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: no %s<role> URI SAN", ErrWrongRole, URIPrefix)
	case 1:
		return found[0], nil
	default:
		return "", fmt.Errorf("%w: several role URIs %v", ErrWrongRole, found)
	}
}

// The reasons a peer is refused. Errors from a Cluster's configurations
// wrap exactly one of them.
var (
	ErrNoCertificate    = errors.New("tlsconf: the peer sent no certificate")
	ErrExpired          = errors.New("tlsconf: the peer's certificate is expired or not yet valid")
	ErrUnknownAuthority = errors.New("tlsconf: the peer's certificate is not from the cluster CA")
	ErrWrongRole        = errors.New("tlsconf: the peer's certificate has the wrong role")
	ErrBadCertificate   = errors.New("tlsconf: the peer's certificate is not valid")
)

// Reasons are the labels of Reason, for metrics.
var Reasons = []string{"no_certificate", "expired", "unknown_authority", "wrong_role", "bad_certificate"}

var reasonErrs = []error{ErrNoCertificate, ErrExpired, ErrUnknownAuthority, ErrWrongRole, ErrBadCertificate}

// Reason names the refusal err wraps ("wrong_role", …; see Reasons), ""
// when it wraps none.
func Reason(err error) string {
	for i, e := range reasonErrs {
		if errors.Is(err, e) {
			return Reasons[i]
		}
	}
	return ""
}

// Cluster is the cluster's CA and the tier's own key pair: the mutual TLS
// between the tiers.
type Cluster struct {
	ca       *CAPool
	kp       *KeyPair
	o        options
	refusals [5]atomic.Uint64 // by Reasons' index
}

// LoadCluster reads the cluster CA bundle and the tier's certificate and
// key. The tier's own certificate must carry a role (RoleOf).
func LoadCluster(caFile, certFile, keyFile string, opts ...Option) (*Cluster, error) {
	ca, err := LoadCAPool(caFile, opts...)
	if err != nil {
		return nil, err
	}
	kp, err := LoadKeyPair(certFile, keyFile, opts...)
	if err != nil {
		return nil, err
	}
	return NewCluster(ca, kp, opts...)
}

// NewCluster is LoadCluster from a loaded CA pool and key pair.
func NewCluster(ca *CAPool, kp *KeyPair, opts ...Option) (*Cluster, error) {
	c := &Cluster{ca: ca, kp: kp, o: newOptions(opts)}
	if _, err := c.Role(); err != nil {
		return nil, fmt.Errorf("tlsconf: the tier's own certificate: %w", err)
	}
	return c, nil
}

// Role is the role in the tier's own certificate.
func (c *Cluster) Role() (Role, error) { return RoleOf(c.kp.Certificate().Leaf) }

// KeyPair is the tier's own key pair.
func (c *Cluster) KeyPair() *KeyPair { return c.kp }

// Refusals is how many peers were refused for reason (one of Reasons).
func (c *Cluster) Refusals(reason string) uint64 {
	if i := slices.Index(Reasons, reason); i >= 0 {
		return c.refusals[i].Load()
	}
	return 0
}

// ServerConfig is the configuration of a tier's server: its certificate,
// and a client certificate required from the cluster CA with one of the
// accept roles. A refused client's handshake fails with a bad_certificate
// alert.
func (c *Cluster) ServerConfig(accept ...Role) *tls.Config {
	accept = slices.Clone(accept)
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: c.kp.GetCertificate,
		// Requested, not required, so that a missing certificate is
		// refused by verify with ErrNoCertificate.
		ClientAuth: tls.RequestClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return c.verify(cs, x509.ExtKeyUsageClientAuth, accept, "client")
		},
	}
}

// ClientConfig is the configuration of a tier's client: its certificate
// for the server, and a server certificate from the cluster CA with role
// serverRole. The role is the server's name: the address dialled (an IP,
// a pod name) is not checked against the certificate's DNS names.
func (c *Cluster) ClientConfig(serverRole Role) *tls.Config {
	accept := []Role{serverRole}
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: c.kp.GetClientCertificate,
		// The chain is verified by VerifyConnection against the current
		// (reloaded) CA bundle, with the role instead of the host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return c.verify(cs, x509.ExtKeyUsageServerAuth, accept, "server")
		},
	}
}

// verify checks the peer's chain to the cluster CA, its validity now and
// its role; a refusal is counted and logged.
func (c *Cluster) verify(cs tls.ConnectionState, usage x509.ExtKeyUsage, accept []Role, peer string) error {
	err := c.check(cs.PeerCertificates, usage, accept)
	if err != nil {
		if i := slices.Index(reasonErrs, reasonOf(err)); i >= 0 {
			c.refusals[i].Add(1)
		}
		c.o.log.Warn("tlsconf: refused a "+peer, "reason", Reason(err), "err", err, "server_name", cs.ServerName)
	}
	return err
}

func reasonOf(err error) error {
	for _, e := range reasonErrs {
		if errors.Is(err, e) {
			return e
		}
	}
	return nil
}

// check is verify without the bookkeeping.
func (c *Cluster) check(certs []*x509.Certificate, usage x509.ExtKeyUsage, accept []Role) error {
	if len(certs) == 0 {
		return ErrNoCertificate
	}
	leaf := certs[0]
	inter := x509.NewCertPool()
	for _, ic := range certs[1:] {
		inter.AddCert(ic)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         c.ca.Pool(),
		Intermediates: inter,
		CurrentTime:   c.o.clock.Now(),
		KeyUsages:     []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		var inv x509.CertificateInvalidError
		var ua x509.UnknownAuthorityError
		switch {
		case errors.As(err, &inv) && inv.Reason == x509.Expired:
			return fmt.Errorf("%w: %v", ErrExpired, err)
		case errors.As(err, &ua):
			return fmt.Errorf("%w: %v", ErrUnknownAuthority, err)
		default:
			return fmt.Errorf("%w: %v", ErrBadCertificate, err)
		}
	}
	r, err := RoleOf(leaf)
	if err != nil {
		return err
	}
	if !slices.Contains(accept, r) {
		return fmt.Errorf("%w: %s, want one of %v", ErrWrongRole, r, accept)
	}
	return nil
}
