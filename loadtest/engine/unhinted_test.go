package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/loadtest/fault"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func TestUnhinted(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("connection closed"), false},
		{&client.Error{Code: leveev2.ErrorCode_ERROR_CODE_BUSY}, true},
		{fmt.Errorf("wrapped: %w", &client.Error{Code: leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE}), true},
		{&client.Error{Code: leveev2.ErrorCode_ERROR_CODE_BUSY, RetryAfter: 200 * time.Millisecond}, false},
		{&client.Error{Code: leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, RetryAfter: time.Second}, false},
		{&client.Error{Code: leveev2.ErrorCode_ERROR_CODE_REJECTED}, false},
	} {
		if got := unhinted(c.err); got != c.want {
			t.Errorf("unhinted(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// Requests due during a lasting fault's planned time are judged apart;
// an instant fault (a kill) has no such time.
func TestInFault(t *testing.T) {
	p := &plan{timeline: []step{
		{at: 10 * time.Second, fault: &fault.Fault{Do: fault.Cut, Target: "logic", For: 30 * time.Second}},
		{at: 50 * time.Second, fault: &fault.Fault{Do: fault.Kill, Target: "battle-1"}},
		{at: 60 * time.Second, mode: "open"},
	}}
	for at, want := range map[time.Duration]bool{
		9 * time.Second: false, 10 * time.Second: true, 39 * time.Second: true, 40 * time.Second: false,
		50 * time.Second: false, 60 * time.Second: false,
	} {
		if got := p.inFault(at); got != want {
			t.Errorf("inFault(%v) = %v, want %v", at, got, want)
		}
	}
}
