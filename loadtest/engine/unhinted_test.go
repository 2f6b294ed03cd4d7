package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"levee/client"
	leveev1 "levee/proto/leveev1"
)

func TestUnhinted(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("connection closed"), false},
		{&client.Error{Code: leveev1.ErrorCode_ERROR_CODE_BUSY}, true},
		{fmt.Errorf("wrapped: %w", &client.Error{Code: leveev1.ErrorCode_ERROR_CODE_UNAVAILABLE}), true},
		{&client.Error{Code: leveev1.ErrorCode_ERROR_CODE_BUSY, RetryAfter: 200 * time.Millisecond}, false},
		{&client.Error{Code: leveev1.ErrorCode_ERROR_CODE_UNAVAILABLE, RetryAfter: time.Second}, false},
		{&client.Error{Code: leveev1.ErrorCode_ERROR_CODE_INSUFFICIENT_GOLD}, false},
	} {
		if got := unhinted(c.err); got != c.want {
			t.Errorf("unhinted(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
