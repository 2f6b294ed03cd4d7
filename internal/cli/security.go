package cli

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/tlsconf"
)

// SharedEnvPrefix is the prefix of the variables of the flags every tier
// shares (the cluster's security): LEVEE_CLUSTER_CA for -cluster-ca on
// gate, logic and battle alike, so one environment serves them all.
const SharedEnvPrefix = "LEVEE"

// sharedFlags are the flags whose variable is LEVEE_<NAME>.
var sharedFlags = map[string]bool{"cluster-ca": true, "cluster-cert": true, "cluster-key": true, "insecure": true}

// envOf is the variable of flag name in a binary with prefix.
func envOf(prefix, name string) string {
	if sharedFlags[name] {
		return EnvName(SharedEnvPrefix, name)
	}
	return EnvName(prefix, name)
}

// ErrNoSecurity is the error of a tier started with neither the cluster's
// certificates nor -insecure.
var ErrNoSecurity = errors.New("choose how the tiers talk: -cluster-ca, -cluster-cert and -cluster-key (mutual TLS with the cluster's certificates; env LEVEE_CLUSTER_CA, LEVEE_CLUSTER_CERT, LEVEE_CLUSTER_KEY) or -insecure (plaintext gRPC, for development only; env LEVEE_INSECURE=1)")

// ClusterFlags are the transport-security flags of every tier (and of its
// healthcheck).
type ClusterFlags struct {
	CA, Cert, Key string
	Insecure      bool
}

// Register binds the flags to fs.
func (c *ClusterFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.CA, "cluster-ca", "", "PEM file of the cluster CA: peers' certificates must chain to it (mutual TLS between the tiers; re-read when it changes)")
	fs.StringVar(&c.Cert, "cluster-cert", "", "PEM certificate of this tier, with the URI SAN spiffe://levee/<role> (re-read when it changes)")
	fs.StringVar(&c.Key, "cluster-key", "", "PEM private key of -cluster-cert")
	fs.BoolVar(&c.Insecure, "insecure", false, "plaintext gRPC between the tiers, without certificates (development only; logged at start-up)")
}

func (c *ClusterFlags) anyFile() bool { return c.CA != "" || c.Cert != "" || c.Key != "" }

// Security loads the cluster's certificates, or returns Insecure for
// -insecure. A tier's own certificate must carry role. Neither choice is
// ErrNoSecurity unless optional (the healthcheck's plaintext default);
// both, or only some of the three files, are an error too.
func (c *ClusterFlags) Security(role tlsconf.Role, optional bool, logger *slog.Logger) (grpcdial.Security, error) {
	switch {
	case c.Insecure && c.anyFile():
		return grpcdial.Security{}, errors.New("-insecure and -cluster-ca/-cluster-cert/-cluster-key exclude each other; give one")
	case c.Insecure:
		return grpcdial.Insecure(), nil
	case !c.anyFile():
		if optional {
			return grpcdial.Insecure(), nil
		}
		return grpcdial.Security{}, ErrNoSecurity
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"-cluster-ca", c.CA}, {"-cluster-cert", c.Cert}, {"-cluster-key", c.Key}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return grpcdial.Security{}, fmt.Errorf("mutual TLS needs all of -cluster-ca, -cluster-cert and -cluster-key; missing %s", strings.Join(missing, ", "))
	}
	cl, err := tlsconf.LoadCluster(c.CA, c.Cert, c.Key, tlsconf.WithLogger(logger))
	if err != nil {
		return grpcdial.Security{}, fmt.Errorf("-cluster-cert: %w", err)
	}
	if role != "" {
		if got, _ := cl.Role(); got != role {
			return grpcdial.Security{}, fmt.Errorf("-cluster-cert: its role is %q (%s), want %q", got, got.URI(), role)
		}
	}
	return grpcdial.MTLS(cl), nil
}
