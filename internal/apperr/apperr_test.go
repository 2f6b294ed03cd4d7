package apperr

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	leveev1 "levee/proto/leveev1"
)

func TestWrappedErrorsMapLikeTheirSentinel(t *testing.T) {
	err := fmt.Errorf("buy sword: %w", ErrInsufficientGold)
	if got := Code(err); got != leveev1.ErrorCode_ERROR_CODE_INSUFFICIENT_GOLD {
		t.Fatalf("Code = %v", got)
	}
	if got := GRPCCode(err); got != codes.FailedPrecondition {
		t.Fatalf("GRPCCode = %v", got)
	}
	if got := Code(fmt.Errorf("x: %w", context.DeadlineExceeded)); got != leveev1.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED {
		t.Fatalf("deadline Code = %v", got)
	}
	if got := Code(fmt.Errorf("surprise")); got != leveev1.ErrorCode_ERROR_CODE_INTERNAL {
		t.Fatalf("unknown error Code = %v", got)
	}
}

func TestFromGRPCBusyCarriesRetryAfter(t *testing.T) {
	e := FromGRPC(status.Error(codes.ResourceExhausted, "shard full"), 250e6)
	if e.Code != leveev1.ErrorCode_ERROR_CODE_BUSY || e.RetryAfterMs != 250 {
		t.Fatalf("got %v", e)
	}
	e = FromGRPC(status.Error(codes.Internal, "secret stack trace"), 0)
	if e.Message != "internal error" {
		t.Fatalf("internal detail leaked to player: %q", e.Message)
	}
}

func TestBackpressureFromTrailer(t *testing.T) {
	md := metadata.Pairs(PushbackKey, "250", QueueDepthKey, "921", FillRatioKey, "0.900")
	bp := BackpressureFrom(md)
	if bp.GetQueueDepth() != 921 || bp.GetRatio() != 0.9 || bp.GetRetryAfterMs() != 250 {
		t.Fatalf("got %v", bp)
	}
	if BackpressureFrom(metadata.MD{}) != nil {
		t.Fatal("hints from an empty trailer")
	}
	if bp := BackpressureFrom(metadata.Pairs(FillRatioKey, "7")); bp.GetRatio() != 0 {
		t.Fatalf("absurd ratio accepted: %v", bp)
	}
}
