// Package priority carries a request's criticality from tier to tier in gRPC
// metadata, so that every tier sheds sheddable work first and critical work
// last.
package priority

import (
	"context"

	"google.golang.org/grpc/metadata"

	"levee/internal/shed"
	leveev1 "levee/proto/leveev1"
)

// Key is the gRPC metadata key that carries a request's criticality.
const Key = "levee-criticality"

// Values as they travel in metadata.
const (
	Critical  = "critical"
	Default   = "default"
	Sheddable = "sheddable"
)

// String is c's metadata value; UNSPECIFIED and unknown values are "default".
func String(c leveev1.Criticality) string {
	switch c {
	case leveev1.Criticality_CRITICALITY_CRITICAL:
		return Critical
	case leveev1.Criticality_CRITICALITY_SHEDDABLE:
		return Sheddable
	}
	return Default
}

// Parse reads a metadata value; anything unknown is DEFAULT.
func Parse(s string) leveev1.Criticality {
	switch s {
	case Critical:
		return leveev1.Criticality_CRITICALITY_CRITICAL
	case Sheddable:
		return leveev1.Criticality_CRITICALITY_SHEDDABLE
	}
	return leveev1.Criticality_CRITICALITY_DEFAULT
}

// Normalize maps UNSPECIFIED and unknown values to DEFAULT.
func Normalize(c leveev1.Criticality) leveev1.Criticality { return Parse(String(c)) }

// Outgoing returns ctx with c in its outgoing gRPC metadata.
func Outgoing(ctx context.Context, c leveev1.Criticality) context.Context {
	return metadata.AppendToOutgoingContext(ctx, Key, String(c))
}

// FromIncoming reads the criticality a server-side call was sent with;
// DEFAULT when there is none.
func FromIncoming(ctx context.Context) leveev1.Criticality {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(Key); len(v) > 0 {
		return Parse(v[0])
	}
	return leveev1.Criticality_CRITICALITY_DEFAULT
}

// Forward copies the incoming criticality of a server-side call to the
// outgoing metadata of ctx, for a tier that calls the next one.
func Forward(ctx context.Context) context.Context {
	return Outgoing(ctx, FromIncoming(ctx))
}

// Shed maps c to the shedder's criticality.
func Shed(c leveev1.Criticality) shed.Criticality {
	switch c {
	case leveev1.Criticality_CRITICALITY_CRITICAL:
		return shed.Critical
	case leveev1.Criticality_CRITICALITY_SHEDDABLE:
		return shed.Sheddable
	}
	return shed.Default
}
