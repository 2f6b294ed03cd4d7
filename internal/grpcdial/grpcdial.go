// Package grpcdial is how one Levee tier dials another, and the one place
// the transport security between the tiers lives: a ClientConn to one
// host:port, resolved afresh at every connection attempt, reconnecting
// within a few seconds of the callee's return however long it was away,
// and secured by a Security: mutual TLS with the cluster's certificates
// (MTLS; package internal/tlsconf checks the chain, the expiry and the
// peer's role both ways) or, only when an operator asked for it with
// -insecure, plaintext (Insecure).
//
// The roles each server accepts are fixed here: logic accepts gate (and
// ops), battle accepts logic (and ops), the gate's own gRPC server (health
// only) accepts ops and gate (a gate's own healthcheck).
//
// The target is passthrough:///addr, so the name is looked up by the dialer
// each time the connection is (re)made. With gRPC's dns resolver a
// restarted Kubernetes pod's new address would be found only after the
// resolver's minimum interval between lookups (30 s) and, while the pod was
// missing from DNS, its lookups backed off up to 2 minutes: players of that
// logic shard would have had UNAVAILABLE for half a minute after logic-N
// was back. Reconnection backs off from 250 ms up to MaxBackoff (gRPC's
// default goes up to 120 s), so a callee back after a long outage is used
// again within MaxBackoff.
//
// The connection is also pinged when it has been silent for KeepaliveTime
// (gRPC's shortest) and closed when a ping goes unanswered for
// KeepaliveTimeout. Without it a callee cut off the network (or frozen)
// kept its connection READY for as long as TCP retried, about 15 minutes:
// every call sent on it waited for its deadline, and after the callee came
// back (at a new address, as a rescheduled pod or a reconnected container
// does) the caller went on sending into the dead connection. With it, the
// connection is closed within KeepaliveTime + KeepaliveTimeout of the
// silence, calls fail at once (UNAVAILABLE, retried by the caller with
// its hint) while the callee is away, and the next connection finds it
// where it is. The callee must allow the pings: ServerOptions.
package grpcdial

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/leveehq/levee/internal/tlsconf"
)

// Keepalive of the caller's side: a ping after KeepaliveTime without
// anything read (gRPC's floor: it uses 10 s for anything shorter), the
// connection closed when the ping is not answered within KeepaliveTimeout.
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 3 * time.Second
)

// MaxBackoff is the longest wait between two connection attempts.
const MaxBackoff = 3 * time.Second

// connectParams are the reconnection backoff: 250 ms, x1.6 per failed
// attempt, ±20 % jitter, at most MaxBackoff; an attempt may take 5 s.
var connectParams = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  250 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   MaxBackoff,
	},
	MinConnectTimeout: 5 * time.Second,
}

// Security is how a tier's gRPC traffic is secured: MTLS or Insecure.
// The zero value is Insecure (for tests and in-process clusters; the
// binaries make operators choose, see internal/cli).
type Security struct {
	cluster *tlsconf.Cluster
}

// Insecure is plaintext gRPC: anyone who reaches the port may call it.
func Insecure() Security { return Security{} }

// MTLS is mutual TLS with the cluster's CA and the tier's own certificate.
func MTLS(cluster *tlsconf.Cluster) Security { return Security{cluster: cluster} }

// IsInsecure reports whether s is plaintext.
func (s Security) IsInsecure() bool { return s.cluster == nil }

// Cluster is the cluster of an MTLS Security, nil for Insecure.
func (s Security) Cluster() *tlsconf.Cluster { return s.cluster }

// String is "insecure" or "mtls".
func (s Security) String() string {
	if s.IsInsecure() {
		return "insecure"
	}
	return "mtls"
}

// Accepted roles of each tier's gRPC server.
var (
	LogicAccepts  = []tlsconf.Role{tlsconf.RoleGate, tlsconf.RoleOps}
	BattleAccepts = []tlsconf.Role{tlsconf.RoleLogic, tlsconf.RoleOps}
	GateAccepts   = []tlsconf.Role{tlsconf.RoleOps, tlsconf.RoleGate}
)

// ServerOptions are a tier's gRPC server options: the transport security
// (with MTLS, a client is accepted only with a certificate of one of the
// accept roles) and the callee's side of Dial's keepalive: pings as often
// as every KeepaliveTime/2 are allowed, also without calls in flight
// (gRPC's default allows one every 5 minutes and answers more frequent
// ones with GOAWAY).
func (s Security) ServerOptions(accept ...tlsconf.Role) []grpc.ServerOption {
	opts := []grpc.ServerOption{grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		MinTime:             KeepaliveTime / 2,
		PermitWithoutStream: true,
	})}
	if s.cluster != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.cluster.ServerConfig(accept...))))
	}
	return opts
}

// DialCredentials are the transport credentials of a connection to a
// server of role server (not checked when s is Insecure).
func (s Security) DialCredentials(server tlsconf.Role) credentials.TransportCredentials {
	if s.cluster == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(s.cluster.ClientConfig(server))
}

// Dial returns a lazily connecting ClientConn to addr (host:port), whose
// server must have role server when s is MTLS. opts are added after
// Levee's own.
func (s Security) Dial(addr string, server tlsconf.Role, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(s.DialCredentials(server)),
		grpc.WithConnectParams(connectParams),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                KeepaliveTime,
			Timeout:             KeepaliveTimeout,
			PermitWithoutStream: true,
		}),
	}
	return grpc.NewClient("passthrough:///"+addr, append(base, opts...)...)
}

// RegisterMetrics adds <prefix>_tls_refusals_total{reason} to reg: the
// peers the cluster's mTLS refused, by tlsconf.Reason. Nothing for
// Insecure.
func (s Security) RegisterMetrics(reg prometheus.Registerer, prefix string) error {
	if s.cluster == nil {
		return nil
	}
	for _, r := range tlsconf.Reasons {
		c := s.cluster
		err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        prefix + "_tls_refusals_total",
			Help:        "Peers refused by the cluster's mutual TLS, by reason (no_certificate, expired, unknown_authority, wrong_role, bad_certificate).",
			ConstLabels: prometheus.Labels{"reason": r},
		}, func() float64 { return float64(c.Refusals(r)) }))
		if err != nil {
			return err
		}
	}
	return nil
}
