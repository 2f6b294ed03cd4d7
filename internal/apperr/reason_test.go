package apperr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// A game's error keeps its code, message and reason over a hop (battle's
// job to logic), over a second one (a tier passing it on), and into the
// player's reply.
func TestGameErrorReasonTravels(t *testing.T) {
	for _, c := range []struct {
		kind error
		code leveev2.ErrorCode
		grpc codes.Code
	}{
		{ErrRejected, leveev2.ErrorCode_ERROR_CODE_REJECTED, codes.FailedPrecondition},
		{ErrBadRequest, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, codes.InvalidArgument},
		{ErrNotFound, leveev2.ErrorCode_ERROR_CODE_NOT_FOUND, codes.NotFound},
		{ErrForbidden, leveev2.ErrorCode_ERROR_CODE_FORBIDDEN, codes.PermissionDenied},
	} {
		sent := &GameError{Kind: c.kind, Reason: "no_ore", Message: "you need 3 more ore"}
		st := ToStatus(context.Background(), sent, 0)
		if status.Code(st) != c.grpc {
			t.Errorf("%v: gRPC code %v, want %v", c.code, status.Code(st), c.grpc)
		}
		back := FromStatus(hop(t, st))
		if back.Code != c.code || back.Reason != "no_ore" || back.Message != "you need 3 more ore" || !errors.Is(back, c.kind) {
			t.Errorf("%v: came back as %+v", c.code, back)
		}
		again := FromStatus(hop(t, ToStatus(context.Background(), fmt.Errorf("logic: job craft: %w", back), 0)))
		if again.Code != c.code || again.Reason != "no_ore" {
			t.Errorf("%v: second hop: %+v", c.code, again)
		}
		for what, e := range map[string]*leveev2.Error{
			"Player":                 back.Player(),
			"Reply of the hop's":     Reply(fmt.Errorf("logic: %w", back), 0),
			"Reply of the GameError": Reply(sent, 0),
		} {
			if e.GetCode() != c.code || e.GetReason() != "no_ore" || e.GetMessage() != "you need 3 more ore" {
				t.Errorf("%v: %s = %v", c.code, what, e)
			}
		}
	}
	// Levee's own errors carry no reason.
	back := FromStatus(hop(t, ToStatus(context.Background(), fmt.Errorf("shard: %w", ErrBusy), 0)))
	if back.Reason != "" || back.Player().GetReason() != "" {
		t.Errorf("BUSY came back with reason %q", back.Reason)
	}
}
