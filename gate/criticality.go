package gate

import (
	"context"

	"google.golang.org/grpc/metadata"

	leveev1 "levee/proto/leveev1"
)

// CriticalityKey is the gRPC metadata key that carries a request's
// criticality from tier to tier.
const CriticalityKey = "levee-criticality"

// Criticality values as they travel in metadata.
const (
	CriticalityCritical  = "critical"
	CriticalityDefault   = "default"
	CriticalitySheddable = "sheddable"
)

// CriticalityString is c's metadata value; UNSPECIFIED and unknown values
// are "default".
func CriticalityString(c leveev1.Criticality) string {
	switch c {
	case leveev1.Criticality_CRITICALITY_CRITICAL:
		return CriticalityCritical
	case leveev1.Criticality_CRITICALITY_SHEDDABLE:
		return CriticalitySheddable
	}
	return CriticalityDefault
}

// ParseCriticality reads a metadata value; anything unknown is DEFAULT.
func ParseCriticality(s string) leveev1.Criticality {
	switch s {
	case CriticalityCritical:
		return leveev1.Criticality_CRITICALITY_CRITICAL
	case CriticalitySheddable:
		return leveev1.Criticality_CRITICALITY_SHEDDABLE
	}
	return leveev1.Criticality_CRITICALITY_DEFAULT
}

// WithCriticality returns ctx with c in its outgoing gRPC metadata.
func WithCriticality(ctx context.Context, c leveev1.Criticality) context.Context {
	return metadata.AppendToOutgoingContext(ctx, CriticalityKey, CriticalityString(c))
}

// CriticalityFromIncoming reads the criticality a server-side call was sent
// with; DEFAULT when there is none.
func CriticalityFromIncoming(ctx context.Context) leveev1.Criticality {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(CriticalityKey); len(v) > 0 {
		return ParseCriticality(v[0])
	}
	return leveev1.Criticality_CRITICALITY_DEFAULT
}

// ForwardCriticality copies the incoming criticality of a server-side call
// to the outgoing metadata of ctx, for a tier that calls the next one.
func ForwardCriticality(ctx context.Context) context.Context {
	return WithCriticality(ctx, CriticalityFromIncoming(ctx))
}
