// Package grpcdial is how one Levee tier dials another: a plaintext
// ClientConn to one host:port (the cluster's own network; see DESIGN.md),
// resolved afresh at every connection attempt, and reconnecting within a
// few seconds of the callee's return however long it was away.
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

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Keepalive of the caller's side: a ping after KeepaliveTime without
// anything read (gRPC's floor: it uses 10 s for anything shorter), the
// connection closed when the ping is not answered within KeepaliveTimeout.
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 3 * time.Second
)

// ServerOptions are the callee's side of Dial's keepalive: pings as often
// as every KeepaliveTime/2 are allowed, also without calls in flight
// (gRPC's default allows one every 5 minutes and answers more frequent
// ones with GOAWAY).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		MinTime:             KeepaliveTime / 2,
		PermitWithoutStream: true,
	})}
}

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

// Dial returns a lazily connecting ClientConn to addr (host:port). opts
// are added after Levee's own.
func Dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(connectParams),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                KeepaliveTime,
			Timeout:             KeepaliveTimeout,
			PermitWithoutStream: true,
		}),
	}
	return grpc.NewClient("passthrough:///"+addr, append(base, opts...)...)
}
