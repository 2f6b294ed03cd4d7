// Package apperr is Levee's one table of domain errors: each maps to a gRPC
// code (between tiers) and to a typed player-facing ErrorCode (at the gate).
// Look-ups use errors.Is, so wrapped errors map like their sentinel.
package apperr

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	leveev1 "levee/proto/leveev1"
)

// Domain errors. Wrap them with %w to add detail.
var (
	ErrBadRequest       = errors.New("bad request")
	ErrUnknownMessage   = errors.New("unknown message type")
	ErrUnauthorized     = errors.New("unauthorized")
	ErrForbidden        = errors.New("forbidden")
	ErrNotFound         = errors.New("not found")
	ErrInsufficientGold = errors.New("insufficient gold")
	ErrBusy             = errors.New("busy, try again later")
	ErrServerFull       = errors.New("server full")
	ErrDeadline         = errors.New("deadline exceeded")
	ErrUnavailable      = errors.New("service unavailable")
	ErrShuttingDown     = errors.New("server shutting down")
	ErrRateLimited      = errors.New("rate limited")
	ErrNotAdmitted      = errors.New("not admitted yet")
	ErrInternal         = errors.New("internal error")
	ErrRequestExpired   = errors.New("request expired")
)

type entry struct {
	err  error
	grpc codes.Code
	code leveev1.ErrorCode
}

// table is ordered: the first entry whose error matches wins.
var table = []entry{
	{ErrBadRequest, codes.InvalidArgument, leveev1.ErrorCode_ERROR_CODE_BAD_REQUEST},
	{ErrUnknownMessage, codes.Unimplemented, leveev1.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE},
	{ErrUnauthorized, codes.Unauthenticated, leveev1.ErrorCode_ERROR_CODE_UNAUTHORIZED},
	{ErrForbidden, codes.PermissionDenied, leveev1.ErrorCode_ERROR_CODE_FORBIDDEN},
	{ErrNotFound, codes.NotFound, leveev1.ErrorCode_ERROR_CODE_NOT_FOUND},
	{ErrInsufficientGold, codes.FailedPrecondition, leveev1.ErrorCode_ERROR_CODE_INSUFFICIENT_GOLD},
	{ErrBusy, codes.ResourceExhausted, leveev1.ErrorCode_ERROR_CODE_BUSY},
	{ErrServerFull, codes.ResourceExhausted, leveev1.ErrorCode_ERROR_CODE_SERVER_FULL},
	{ErrRateLimited, codes.ResourceExhausted, leveev1.ErrorCode_ERROR_CODE_RATE_LIMITED},
	{ErrDeadline, codes.DeadlineExceeded, leveev1.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED},
	{context.DeadlineExceeded, codes.DeadlineExceeded, leveev1.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED},
	{context.Canceled, codes.Canceled, leveev1.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED},
	{ErrUnavailable, codes.Unavailable, leveev1.ErrorCode_ERROR_CODE_UNAVAILABLE},
	{ErrShuttingDown, codes.Unavailable, leveev1.ErrorCode_ERROR_CODE_SHUTTING_DOWN},
	{ErrNotAdmitted, codes.FailedPrecondition, leveev1.ErrorCode_ERROR_CODE_NOT_ADMITTED},
	{ErrInternal, codes.Internal, leveev1.ErrorCode_ERROR_CODE_INTERNAL},
	{ErrRequestExpired, codes.FailedPrecondition, leveev1.ErrorCode_ERROR_CODE_REQUEST_EXPIRED},
}

// Code is the player-facing code for err; unknown errors are INTERNAL.
func Code(err error) leveev1.ErrorCode {
	if err == nil {
		return leveev1.ErrorCode_ERROR_CODE_UNSPECIFIED
	}
	for _, e := range table {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return leveev1.ErrorCode_ERROR_CODE_INTERNAL
}

// GRPCCode is the gRPC code for err; unknown errors are Internal.
func GRPCCode(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	for _, e := range table {
		if errors.Is(err, e.err) {
			return e.grpc
		}
	}
	return codes.Internal
}

// PushbackKey is the trailer that carries a retry delay in milliseconds, with
// the meaning gRPC gives grpc-retry-pushback-ms.
const PushbackKey = "grpc-retry-pushback-ms"

// ToStatus turns err into a gRPC status error at a server's edge. When
// retryAfter > 0 it is also set as the pushback trailer on ctx's stream.
func ToStatus(ctx context.Context, err error, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if retryAfter > 0 {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, strconv.FormatInt(retryAfter.Milliseconds(), 10)))
	}
	return status.Error(GRPCCode(err), err.Error())
}

// Pushback reads the retry delay from trailers received by a client call.
func Pushback(trailer metadata.MD) time.Duration {
	v := trailer.Get(PushbackKey)
	if len(v) == 0 {
		return 0
	}
	ms, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || ms < 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// FromGRPC maps an error returned by a gRPC call to a player-facing error.
// retryAfter is the pushback the callee sent, if any.
func FromGRPC(err error, retryAfter time.Duration) *leveev1.Error {
	s, _ := status.FromError(err)
	e := &leveev1.Error{Message: s.Message(), RetryAfterMs: uint32(retryAfter.Milliseconds())}
	switch s.Code() {
	case codes.InvalidArgument:
		e.Code = leveev1.ErrorCode_ERROR_CODE_BAD_REQUEST
	case codes.Unimplemented:
		e.Code = leveev1.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE
	case codes.Unauthenticated:
		e.Code = leveev1.ErrorCode_ERROR_CODE_UNAUTHORIZED
	case codes.PermissionDenied:
		e.Code = leveev1.ErrorCode_ERROR_CODE_FORBIDDEN
	case codes.NotFound:
		e.Code = leveev1.ErrorCode_ERROR_CODE_NOT_FOUND
	case codes.ResourceExhausted:
		e.Code = leveev1.ErrorCode_ERROR_CODE_BUSY
		if e.RetryAfterMs == 0 {
			e.RetryAfterMs = 100
		}
	case codes.DeadlineExceeded, codes.Canceled:
		e.Code = leveev1.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED
		e.Message = "the request ran out of time"
	case codes.Unavailable:
		// The transport's text (addresses, dial errors) is not for players.
		e.Code = leveev1.ErrorCode_ERROR_CODE_UNAVAILABLE
		e.Message = "service unavailable, try again later"
		if e.RetryAfterMs == 0 {
			e.RetryAfterMs = 1000
		}
	default:
		e.Code = leveev1.ErrorCode_ERROR_CODE_INTERNAL
		e.Message = "internal error"
	}
	return e
}

// Reply builds the typed error reply for a domain error.
func Reply(err error, retryAfter time.Duration) *leveev1.Error {
	return &leveev1.Error{Code: Code(err), Message: err.Error(), RetryAfterMs: uint32(retryAfter.Milliseconds())}
}

// Trailer keys with which an overloaded tier reports the state that made it
// refuse, so that the gate can pass the hints on to the player.
const (
	QueueDepthKey = "levee-queue-depth"
	FillRatioKey  = "levee-fill-ratio"
)

// Overloaded is ToStatus for a refusal under load: besides the pushback it
// sets the queue depth and fill ratio trailers.
func Overloaded(ctx context.Context, err error, retryAfter time.Duration, depth int, ratio float64) error {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(
		QueueDepthKey, strconv.Itoa(depth),
		FillRatioKey, strconv.FormatFloat(ratio, 'f', 3, 64),
	))
	return ToStatus(ctx, err, retryAfter)
}

// BackpressureFrom reads the hints of an overload refusal from a call's
// trailer; nil when it carries none.
func BackpressureFrom(trailer metadata.MD) *leveev1.Backpressure {
	d, r := trailer.Get(QueueDepthKey), trailer.Get(FillRatioKey)
	if len(d) == 0 && len(r) == 0 {
		return nil
	}
	bp := &leveev1.Backpressure{RetryAfterMs: uint32(Pushback(trailer).Milliseconds())}
	if len(d) > 0 {
		if n, err := strconv.ParseUint(d[0], 10, 32); err == nil {
			bp.QueueDepth = uint32(n)
		}
	}
	if len(r) > 0 {
		if f, err := strconv.ParseFloat(r[0], 64); err == nil && f >= 0 && f <= 1 {
			bp.Ratio = f
		}
	}
	return bp
}
