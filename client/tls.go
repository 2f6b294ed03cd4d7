package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrCertificate is wrapped by Dial's error when the gate's TLS certificate
// could not be verified (signed by a CA the client does not trust, expired,
// or for another name). Dialing again cannot fix it, so DialRetry and
// Reconnect give up at once; trust the gate's CA with Options.TLS (for
// example TLSConfigFromCAFile), or fix the gate's certificate.
var ErrCertificate = errors.New("client: the gate's TLS certificate is not trusted")

// DefaultSessionCacheSize is the number of TLS sessions the SDK's shared
// session cache keeps (one per gate address and server name): enough for
// a game process that talks to a few gates. A load tool running many bots
// against one gate needs only one entry per gate, but sets its own
// tls.Config.ClientSessionCache (tls.NewLRUClientSessionCache) when it
// dials many names.
const DefaultSessionCacheSize = 64

// sessionCache is the ClientSessionCache of every tls.Config the SDK uses
// that has none: shared by all the Clients of the process, so a reconnect
// (Reconnect, DialRetry, or a new Dial to the same gate) resumes the TLS
// session instead of paying for a full handshake.
var sessionCache = tls.NewLRUClientSessionCache(DefaultSessionCacheSize)

// TLSConfigFromCAFile is a tls.Config for Options.TLS that trusts only the
// certificate authorities in the PEM file at path (like curl's --cacert:
// the system roots are not added), for a gate whose certificate comes from
// a private CA (levee-certs' ca.crt, a studio's internal CA). It has its
// own ClientSessionCache (DefaultSessionCacheSize entries) so reconnects
// resume. A file that cannot be read or holds no PEM certificate is an
// error. For a gate whose certificate a public CA signed, leave
// Options.TLS nil: the system roots are used.
func TLSConfigFromCAFile(path string) (*tls.Config, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client: CA file %s: no PEM certificate in it", path)
	}
	return &tls.Config{
		RootCAs:            pool,
		MinVersion:         tls.VersionTLS12,
		ClientSessionCache: tls.NewLRUClientSessionCache(DefaultSessionCacheSize),
	}, nil
}

// tlsConfig is the TLS configuration a dial uses for wss:// URLs:
// Options.TLS, else the Dialer's TLSClientConfig, else Go's defaults (the
// system roots); one without a ClientSessionCache gets the SDK's shared
// one (a copy is made; the caller's config is not modified).
func (o Options) tlsConfig() *tls.Config {
	cfg := o.TLS
	if cfg == nil && o.Dialer != nil {
		cfg = o.Dialer.TLSClientConfig
	}
	if cfg == nil {
		return &tls.Config{MinVersion: tls.VersionTLS12, ClientSessionCache: sessionCache}
	}
	if cfg.ClientSessionCache == nil && !cfg.SessionTicketsDisabled {
		cfg = cfg.Clone()
		cfg.ClientSessionCache = sessionCache
	}
	return cfg
}

// certificateError wraps err with ErrCertificate when it is a failed
// verification of the server's certificate.
func certificateError(err error) error {
	var ve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var inv x509.CertificateInvalidError
	var host x509.HostnameError
	if errors.As(err, &ve) || errors.As(err, &ua) || errors.As(err, &inv) || errors.As(err, &host) {
		return fmt.Errorf("%w: %w (trust the gate's CA with Options.TLS, e.g. client.TLSConfigFromCAFile)", ErrCertificate, err)
	}
	return err
}

// TLS is the connection's TLS state (version, cipher suite, whether the
// session was resumed: DidResume), nil for a ws:// connection.
func (c *Client) TLS() *tls.ConnectionState {
	tc, ok := c.conn.NetConn().(*tls.Conn)
	if !ok {
		return nil
	}
	st := tc.ConnectionState()
	return &st
}
