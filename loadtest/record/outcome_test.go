package record

import (
	"context"
	"fmt"
	"testing"

	"github.com/leveehq/levee/client"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func serverErr(code leveev2.ErrorCode) error {
	return fmt.Errorf("call: %w", &client.Error{Code: code, Message: "x"})
}

func TestClassify(t *testing.T) {
	closed := fmt.Errorf("%w: %w", client.ErrClosed, &client.CloseError{Code: 1013, Text: "overloaded"})
	cases := []struct {
		err  error
		want Outcome
	}{
		{nil, Outcome{OK, ""}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_REJECTED), Outcome{Business, "REJECTED"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_NOT_FOUND), Outcome{Business, "NOT_FOUND"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_FORBIDDEN), Outcome{Business, "FORBIDDEN"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_BUSY), Outcome{Refused, "BUSY"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_SERVER_FULL), Outcome{Refused, "SERVER_FULL"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED), Outcome{Refused, "RATE_LIMITED"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE), Outcome{Refused, "UNAVAILABLE"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN), Outcome{Refused, "SHUTTING_DOWN"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED), Outcome{Refused, "DEADLINE_EXCEEDED"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_NOT_ADMITTED), Outcome{Refused, "NOT_ADMITTED"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_INTERNAL), Outcome{Failed, "INTERNAL"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST), Outcome{Failed, "BAD_REQUEST"}},
		{serverErr(leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED), Outcome{Failed, "UNAUTHORIZED"}},
		{fmt.Errorf("%w: want x", client.ErrUnexpectedReply), Outcome{Failed, "UNEXPECTED_REPLY"}},
		{context.DeadlineExceeded, Outcome{Lost, LostTimeout}},
		{context.Canceled, Outcome{Lost, LostInterrupted}},
		{closed, Outcome{Lost, LostClosed}},
		{client.ErrFrameTooLarge, Outcome{Lost, LostOther}},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %+v, want %+v", c.err, got, c.want)
		}
	}
}
