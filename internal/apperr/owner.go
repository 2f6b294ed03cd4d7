package apperr

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Shard ownership, for logic on PostgreSQL, whose shards move between logic
// processes by their leases. A logic process asked for a shard it does not
// hold answers one of two refusals, neither of which executed the request:
//
//   - NotOwner: it knows the owner. gRPC code FAILED_PRECONDITION with a
//     leveev2.ShardOwner{shard, addr} in the status details; the gate reads
//     it with OwnerOf, remembers the owner and sends the same request again
//     to addr.
//   - NoOwner: no live owner is known (the shard is in a move). A typed
//     UNAVAILABLE with a retry_after, which the player gets as
//     ERROR_CODE_UNAVAILABLE with retry_after_ms.

// NotOwner is the refusal of a request for shard by a logic process that
// does not hold it, naming the owner's address (host:port of its gRPC).
// The status also carries a leveev2.Error with the code BUSY (not
// executed, send it again), which is what a caller that does not read
// ShardOwner (apperr.FromStatus) makes of it. A negative shard or an empty
// addr is a caller's mistake: the result is then an INTERNAL status naming
// it (use NoOwner when no owner is known).
func NotOwner(shard int, addr string) error {
	if shard < 0 || shard > 1<<32-1 || addr == "" {
		return status.Errorf(codes.Internal, "apperr.NotOwner: shard %d, owner address %q: want a shard >= 0 and an address", shard, addr)
	}
	st := status.New(codes.FailedPrecondition, fmt.Sprintf("shard %d is not served here; its owner is at %s (not executed)", shard, addr))
	withDetails, err := st.WithDetails(&leveev2.ShardOwner{Shard: uint32(shard), Addr: addr},
		&leveev2.Error{Code: leveev2.ErrorCode_ERROR_CODE_BUSY})
	if err != nil { // cannot happen with these messages
		return st.Err()
	}
	return withDetails.Err()
}

// OwnerOf reads a NotOwner refusal: the shard and its owner's address, ok
// true when err is a FAILED_PRECONDITION status (possibly wrapped) with a
// leveev2.ShardOwner detail that names an address. Any other error, nil
// included, is not a redirect (ok false).
func OwnerOf(err error) (shard int, addr string, ok bool) {
	if err == nil {
		return 0, "", false
	}
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.FailedPrecondition {
		return 0, "", false
	}
	for _, d := range st.Details() {
		if o, isOwner := d.(*leveev2.ShardOwner); isOwner && o.GetAddr() != "" {
			return int(o.GetShard()), o.GetAddr(), true
		}
	}
	return 0, "", false
}

// NoOwner is the refusal of a request for shard while no live owner is
// known (the shard is moving between logic processes): UNAVAILABLE with
// retryAfter (when > 0) in the details and as the pushback trailer on
// ctx's stream, as ToStatus makes it. The request was not executed; the
// player gets ERROR_CODE_UNAVAILABLE with retry_after_ms and sends it
// again, with the same id.
func NoOwner(ctx context.Context, shard int, retryAfter time.Duration) error {
	return ToStatus(ctx, fmt.Errorf("%w: shard %d has no owner right now (it is moving between logic processes); not executed, try again", ErrUnavailable, shard), retryAfter)
}
