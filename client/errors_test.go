package client_test

import (
	"testing"

	"github.com/leveehq/levee/client"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// TestErrorClasses pins what a game may do with each code, as the README's
// table of codes states it.
func TestErrorClasses(t *testing.T) {
	type class struct{ busy, notExecuted, outcomeUnknown, retryable, business bool }
	for code, want := range map[leveev2.ErrorCode]class{
		leveev2.ErrorCode_ERROR_CODE_BUSY:              {busy: true, notExecuted: true, retryable: true},
		leveev2.ErrorCode_ERROR_CODE_SERVER_FULL:       {busy: true, notExecuted: true, retryable: true},
		leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED:      {busy: true, notExecuted: true, retryable: true},
		leveev2.ErrorCode_ERROR_CODE_NOT_ADMITTED:      {notExecuted: true, retryable: true},
		leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN:     {outcomeUnknown: true, retryable: true},
		leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE:       {outcomeUnknown: true, retryable: true},
		leveev2.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED: {outcomeUnknown: true, retryable: true},
		leveev2.ErrorCode_ERROR_CODE_REJECTED:          {business: true},
		leveev2.ErrorCode_ERROR_CODE_NOT_FOUND:         {business: true},
		leveev2.ErrorCode_ERROR_CODE_FORBIDDEN:         {business: true},
		leveev2.ErrorCode_ERROR_CODE_TICKET_IN_USE:     {},
		leveev2.ErrorCode_ERROR_CODE_REQUEST_EXPIRED:   {},
		leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST:       {},
		leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE:   {},
		leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED:      {},
		leveev2.ErrorCode_ERROR_CODE_INTERNAL:          {},
	} {
		e := &client.Error{Code: code}
		got := class{e.IsBusy(), e.NotExecuted(), e.OutcomeUnknown(), e.Retryable(), e.IsBusiness()}
		if got != want {
			t.Errorf("%v: %+v, want %+v", code, got, want)
		}
	}
}
