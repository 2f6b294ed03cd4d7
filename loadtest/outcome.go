package loadtest

import (
	"context"
	"errors"
	"strconv"

	"levee/client"
)

// Class is the kind of a request's outcome.
type Class uint8

// Outcome classes. All but ClassLost mean a reply came.
const (
	ClassOK       Class = iota // a result
	ClassBusiness              // a typed game outcome: INSUFFICIENT_GOLD, NOT_FOUND, FORBIDDEN
	ClassOverload              // refused for load: BUSY, SERVER_FULL, RATE_LIMITED, UNAVAILABLE, ...
	ClassFailed                // any other error reply: INTERNAL, BAD_REQUEST, an unexpected payload, ...
	ClassLost                  // no reply: timeout, connection closed, interrupted
)

func (c Class) String() string {
	switch c {
	case ClassOK:
		return "ok"
	case ClassBusiness:
		return "business"
	case ClassOverload:
		return "overload"
	case ClassFailed:
		return "failed"
	case ClassLost:
		return "lost"
	}
	return "unknown"
}

// Answered reports whether the class means a reply came.
func (c Class) Answered() bool { return c != ClassLost }

// Outcome is a request's class and, for errors, its code or reason
// (e.g. "INSUFFICIENT_GOLD", "BUSY", "timeout", "closed").
type Outcome struct {
	Class  Class
	Reason string
}

// Lost reasons.
const (
	LostTimeout     = "timeout"     // the per-request timeout ran out
	LostClosed      = "closed"      // the connection ended while waiting
	LostInterrupted = "interrupted" // the run was stopped (signal)
	LostOther       = "error"       // not sent: a client-side error
)

// Classify sorts a call's error into an Outcome.
func Classify(err error) Outcome {
	if err == nil {
		return Outcome{Class: ClassOK}
	}
	if e := client.AsError(err); e != nil {
		name := client.CodeName(e.Code)
		switch {
		case e.IsBusiness():
			return Outcome{ClassBusiness, name}
		case e.Retryable():
			return Outcome{ClassOverload, name}
		default:
			return Outcome{ClassFailed, name}
		}
	}
	switch {
	case errors.Is(err, client.ErrUnexpectedReply):
		return Outcome{ClassFailed, "UNEXPECTED_REPLY"}
	case errors.Is(err, context.DeadlineExceeded):
		return Outcome{ClassLost, LostTimeout}
	case errors.Is(err, context.Canceled):
		return Outcome{ClassLost, LostInterrupted}
	case errors.Is(err, client.ErrClosed):
		return Outcome{ClassLost, LostClosed}
	}
	return Outcome{ClassLost, LostOther}
}

// dialReason names why a dial failed, for the report.
func dialReason(err error) string {
	if e := client.AsError(err); e != nil {
		return client.CodeName(e.Code)
	}
	if code := client.CloseCode(err); code != 0 {
		return closeReason(code)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return LostTimeout
	case errors.Is(err, context.Canceled):
		return LostInterrupted
	case errors.Is(err, ErrNonLocal):
		return "nonlocal"
	case errors.Is(err, client.ErrClosed):
		return LostClosed
	}
	return LostOther
}

func closeReason(code int) string {
	return "close " + strconv.Itoa(code)
}

// disconnectReason names why a connection ended before its bot was done.
func disconnectReason(err error) string {
	if code := client.CloseCode(err); code != 0 {
		return closeReason(code)
	}
	if errors.Is(err, client.ErrProtocol) {
		return "protocol"
	}
	return "dropped"
}
