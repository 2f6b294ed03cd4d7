package record

import (
	"context"
	"errors"

	"github.com/leveehq/levee/client"
)

// Outcome is a request's class and, for errors, its code or reason
// (e.g. "REJECTED", "BUSY", "timeout", "closed"): a Sample's
// Class and Reason.
type Outcome struct {
	Class  Class
	Reason string
}

// Lost reasons: why a request got no reply.
const (
	LostTimeout     = "timeout"     // the per-request timeout ran out
	LostClosed      = "closed"      // the connection ended while waiting
	LostInterrupted = "interrupted" // the run was stopped (signal)
	LostOther       = "error"       // not sent: a client-side error
)

// Classify sorts a call's error (from the client SDK) into an Outcome: a
// typed error reply is Business, Refused or Failed by the cluster's one
// error table (levee/internal/apperr, through client.Error), with its
// code's name as the reason; no reply is Lost with a Lost reason.
func Classify(err error) Outcome {
	if err == nil {
		return Outcome{Class: OK}
	}
	if e := client.AsError(err); e != nil {
		name := client.CodeName(e.Code)
		switch {
		case e.IsBusiness():
			return Outcome{Business, name}
		case e.Retryable():
			return Outcome{Refused, name}
		default:
			return Outcome{Failed, name}
		}
	}
	switch {
	case errors.Is(err, client.ErrUnexpectedReply):
		return Outcome{Failed, "UNEXPECTED_REPLY"}
	case errors.Is(err, context.DeadlineExceeded):
		return Outcome{Lost, LostTimeout}
	case errors.Is(err, context.Canceled):
		return Outcome{Lost, LostInterrupted}
	case errors.Is(err, client.ErrClosed):
		return Outcome{Lost, LostClosed}
	}
	return Outcome{Lost, LostOther}
}
