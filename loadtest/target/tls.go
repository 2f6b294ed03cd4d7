package target

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/gorilla/websocket"
)

// TLS is how the bots trust wss:// gates: -ca-file, -insecure-skip-verify
// and -tls-session-cache. The zero value trusts the system roots and
// resumes sessions. It is plain data, passed to worker processes as is.
type TLS struct {
	// CAFile is a PEM file of the CAs to trust instead of the system
	// roots (levee-certs' ca.crt); "" for the system roots.
	CAFile string `json:"ca_file,omitempty"`
	// InsecureSkipVerify accepts any certificate: for a test gate only
	// (the command warns on stderr).
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
	// NoSessionCache turns TLS session resumption off, so every
	// connection pays a full handshake (to measure what that costs).
	NoSessionCache bool `json:"no_session_cache,omitempty"`
}

// InsecureWarning is what the command prints on stderr for
// -insecure-skip-verify.
const InsecureWarning = "loadtest: -insecure-skip-verify: certificates are not verified; anyone on the path can read and change the traffic (use it only against a test gate)"

// Config is the base tls.Config of the bots (no session cache: see
// Dialers). A CA file that cannot be read or holds no PEM certificate is
// an error naming -ca-file.
func (t TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // the flag says so, with a warning
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca-file %s: no PEM certificate in it", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Dialers is base with t's TLS configuration, one copy per gate URL, each
// with its own TLS session cache unless NoSessionCache: all the bots of a
// process that dial one gate share that gate's cache, so after the first
// full handshake the rest resume. (A session cache is keyed by server
// name, which is the host without its port: gates on different ports of
// 127.0.0.1 sharing one cache would overwrite each other's tickets, and
// each gate rejects the others', so every connection would pay a full
// handshake. For the same reason one entry per gate is all a cache needs,
// however many bots share it.)
func (t TLS) Dialers(base *websocket.Dialer, gates []string) (map[string]*websocket.Dialer, error) {
	cfg, err := t.Config()
	if err != nil {
		return nil, err
	}
	out := make(map[string]*websocket.Dialer, len(gates))
	for _, g := range gates {
		if _, ok := out[g]; ok {
			continue
		}
		d := *base
		d.TLSClientConfig = cfg.Clone()
		if t.NoSessionCache {
			d.TLSClientConfig.SessionTicketsDisabled = true
		} else {
			d.TLSClientConfig.ClientSessionCache = tls.NewLRUClientSessionCache(sessionsPerGate)
		}
		out[g] = &d
	}
	return out, nil
}

// sessionsPerGate is the size of a gate's session cache: the entries are
// per server name, so one is used; a few spare cover a gate reached by
// more than one name.
const sessionsPerGate = 4
