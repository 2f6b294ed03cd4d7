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
package grpcdial

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
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

// Dial returns a lazily connecting ClientConn to addr (host:port). opts
// are added after Levee's own.
func Dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(connectParams),
	}
	return grpc.NewClient("passthrough:///"+addr, append(base, opts...)...)
}
