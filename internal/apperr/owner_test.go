package apperr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// A NotOwner refusal crosses the wire as FAILED_PRECONDITION and OwnerOf
// reads the shard and the owner back; a caller that knows nothing of
// ShardOwner sees BUSY (not executed), never INTERNAL.
func TestNotOwnerRoundTrip(t *testing.T) {
	err := hop(t, NotOwner(17, "10.0.0.7:9000"))
	if c := status.Code(err); c != codes.FailedPrecondition {
		t.Fatalf("code %v, want FailedPrecondition", c)
	}
	msg := status.Convert(err).Message()
	for _, want := range []string{"17", "10.0.0.7:9000", "not executed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not name %q", msg, want)
		}
	}
	shard, addr, ok := OwnerOf(err)
	if !ok || shard != 17 || addr != "10.0.0.7:9000" {
		t.Fatalf("OwnerOf = %d, %q, %v; want 17, 10.0.0.7:9000, true", shard, addr, ok)
	}
	if _, _, ok := OwnerOf(fmt.Errorf("calling logic: %w", err)); !ok {
		t.Error("OwnerOf does not see through a wrapped status")
	}
	e := FromStatus(err)
	if e.Code != leveev2.ErrorCode_ERROR_CODE_BUSY || Class(e.Code) != NotExecuted {
		t.Errorf("FromStatus code %v (%v), want BUSY, not executed", e.Code, Class(e.Code))
	}
}

// Only a FAILED_PRECONDITION with a ShardOwner that names an address is a
// redirect: a business refusal, a bare status, a ShardOwner on another
// code and a plain error are not.
func TestOwnerOfIgnoresOthers(t *testing.T) {
	owner := &leveev2.ShardOwner{Shard: 3, Addr: "b:9000"}
	withDetail := func(c codes.Code, o *leveev2.ShardOwner) error {
		st, err := status.New(c, "x").WithDetails(o)
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	for name, err := range map[string]error{
		"nil":                   nil,
		"plain":                 errors.New("shard 3 is at b:9000"),
		"rejected":              ToStatus(context.Background(), ErrRejected, 0),
		"bare failed":           status.Error(codes.FailedPrecondition, "wrong shard"),
		"owner on unavailable":  withDetail(codes.Unavailable, owner),
		"owner without address": withDetail(codes.FailedPrecondition, &leveev2.ShardOwner{Shard: 3}),
		"no owner":              NoOwner(context.Background(), 3, time.Second),
	} {
		if shard, addr, ok := OwnerOf(err); ok {
			t.Errorf("%s: OwnerOf = %d, %q, true; want not a redirect", name, shard, addr)
		}
	}
	if _, _, ok := OwnerOf(hop(t, withDetail(codes.FailedPrecondition, owner))); !ok {
		t.Error("a hand-made ShardOwner detail is not read")
	}
}

// NotOwner without an owner (or with a negative shard) is a caller's
// mistake, refused INTERNAL with a message naming it, never a redirect.
func TestNotOwnerRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		shard int
		addr  string
	}{{-1, "b:9000"}, {4, ""}} {
		err := NotOwner(tc.shard, tc.addr)
		if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "apperr.NotOwner") {
			t.Errorf("NotOwner(%d, %q) = %v, want INTERNAL naming apperr.NotOwner", tc.shard, tc.addr, err)
		}
		if _, _, ok := OwnerOf(err); ok {
			t.Errorf("NotOwner(%d, %q) reads as a redirect", tc.shard, tc.addr)
		}
	}
}

// NoOwner reaches the player as UNAVAILABLE with its retry_after_ms and the
// public text (not the shard's internals).
func TestNoOwnerIsUnavailableWithRetry(t *testing.T) {
	err := hop(t, NoOwner(context.Background(), 9, 750*time.Millisecond))
	if c := status.Code(err); c != codes.Unavailable {
		t.Fatalf("code %v, want Unavailable", c)
	}
	if !strings.Contains(status.Convert(err).Message(), "shard 9") {
		t.Errorf("message %q does not name the shard", status.Convert(err).Message())
	}
	e := FromStatus(err)
	if !errors.Is(e, ErrUnavailable) {
		t.Errorf("FromStatus = %v, want ErrUnavailable", e)
	}
	p := e.Player()
	if p.GetCode() != leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE || p.GetRetryAfterMs() != 750 {
		t.Errorf("player sees %v, want UNAVAILABLE with retry_after_ms 750", p)
	}
	if strings.Contains(p.GetMessage(), "shard") {
		t.Errorf("player message %q leaks the shard's internals", p.GetMessage())
	}
}
