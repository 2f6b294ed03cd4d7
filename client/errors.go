package client

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leveehq/levee/client/pacer"
	"github.com/leveehq/levee/internal/apperr"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Errors the SDK returns. Connection failures wrap ErrClosed.
var (
	ErrClosed          = errors.New("client: connection closed")
	ErrProtocol        = errors.New("client: protocol violation")
	ErrUnexpectedReply = errors.New("client: unexpected reply payload")
	ErrFrameTooLarge   = errors.New("client: frame too large")
	ErrSubprotocol     = errors.New("client: subprotocol not negotiated")

	// ErrReplaced is wrapped (with ErrClosed and the *CloseError) when the
	// gate closed the connection with 4001: a newer connection of the same
	// player id took its place (one player, one place). The gate answered
	// every request it had read first. Reconnect and DialRetry do not
	// dial again after it: the newer connection is the player's now, and a
	// client that came back would replace it in turn, for ever.
	ErrReplaced = errors.New("client: replaced by a newer connection of the same player")

	// ErrRetryBudget is wrapped (with the server's refusal) when a retry
	// was wanted but the client-wide retry budget did not allow it.
	ErrRetryBudget = errors.New("client: retry budget exhausted")
	// ErrRetryDeadline is wrapped (with the server's refusal) when the wait
	// before a retry would outlast the caller's deadline.
	ErrRetryDeadline = errors.New("client: no time left to retry before the deadline")

	// ErrEvicted and ErrQueueFull are the pacer's local refusals, wrapped
	// in a *LocalError.
	ErrEvicted   = pacer.ErrEvicted
	ErrQueueFull = pacer.ErrQueueFull
)

// ErrNotAdmitted matches (errors.Is) the gate's NOT_ADMITTED reply: a
// request sent while the player was still waiting in the admission line.
// Do does not retry it; its RetryAfter is the player's ETA.
var ErrNotAdmitted error = &Error{Code: leveev2.ErrorCode_ERROR_CODE_NOT_ADMITTED}

// IsNotAdmitted reports whether err carries a NOT_ADMITTED *Error.
func IsNotAdmitted(err error) bool { return Code(err) == leveev2.ErrorCode_ERROR_CODE_NOT_ADMITTED }

// LineError carries a player's ticket in the gate's admission line. Dial's
// error wraps one when the player had been given a place in line before
// the dial failed (the connection dropped, ctx ran out, a refusal came):
// Status is the last QueueStatus, whose Ticket resumes the place
// (Options.Ticket) for GraceMs after the drop. A Client's Err wraps one
// (Admitted true) when the player was let in from the line: within GraceMs
// of being let in, that ticket brings a dropped player back in first; Pass
// is then the gate's admission pass, which does that and more (a restarted
// gate lets the player in at once), and is what DialRetry and Reconnect
// present instead, with no end of their own (the gate decides what it is
// good for). DialRetry and Reconnect use it by themselves.
type LineError struct {
	Status   *leveev2.QueueStatus // nil for a player let in who never saw a status on that connection
	Seen     time.Time            // when Status came (for Admitted, when the player was let in), on Options.Clock
	Admitted bool                 // the player had been let in
	Pass     string               // with Admitted: the Admitted push's pass, if the gate sent one
	Err      error
}

func (e *LineError) Error() string {
	if e.Admitted {
		return fmt.Sprintf("%v (let in from the line; its ticket goes first on reconnect)", e.Err)
	}
	return fmt.Sprintf("%v (was %d in line)", e.Err, e.Status.GetPosition())
}

func (e *LineError) Unwrap() error { return e.Err }

// Resumable reports whether the ticket can still keep the place at now:
// it has one and its grace, counted from when the status came, has not
// run out.
func (e *LineError) Resumable(now time.Time) bool {
	grace := time.Duration(e.Status.GetGraceMs()) * time.Millisecond
	return e.Status.GetTicket() != "" && now.Before(e.Seen.Add(grace))
}

// AsLineError returns the *LineError in err's chain, or nil.
func AsLineError(err error) *LineError {
	var le *LineError
	if errors.As(err, &le) {
		return le
	}
	return nil
}

// LocalError is a request the SDK refused itself, without sending it: its
// local pacing queue was full of requests at least as important
// (ErrQueueFull), or a more important request took its place (ErrEvicted).
// It is not a server reply (AsError finds no *Error in it unless an earlier
// attempt was refused by the server), and sending again later is safe.
type LocalError struct {
	Err         error // ErrEvicted or ErrQueueFull
	Criticality leveev2.Criticality
}

func (e *LocalError) Error() string {
	return "client: request refused locally (" + PriorityOf(e.Criticality).String() + "): " + e.Err.Error()
}

func (e *LocalError) Unwrap() error { return e.Err }

// IsLocal reports whether err carries a *LocalError.
func IsLocal(err error) bool {
	var le *LocalError
	return errors.As(err, &le)
}

// Error is a typed error the server sent in reply to a request (or before
// the Welcome, when it refused the connection).
type Error struct {
	Code    leveev2.ErrorCode
	Message string
	// Reason is the game's own code for a validation or business error
	// (BAD_REQUEST, NOT_FOUND, FORBIDDEN or REJECTED from the game's
	// handler), e.g. "out_of_stock"; empty for Levee's own errors.
	Reason     string
	RetryAfter time.Duration // 0 when the server gave none
}

func fromProto(e *leveev2.Error) *Error {
	return &Error{
		Code:       e.GetCode(),
		Message:    e.GetMessage(),
		Reason:     e.GetReason(),
		RetryAfter: time.Duration(e.GetRetryAfterMs()) * time.Millisecond,
	}
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("client: server error ")
	b.WriteString(CodeName(e.Code))
	if e.Reason != "" {
		b.WriteString(" (")
		b.WriteString(e.Reason)
		b.WriteString(")")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfter)
	}
	return b.String()
}

// Is makes errors.Is(err, &Error{Code: c}) match any *Error with code c,
// and errors.Is(err, &Error{Code: c, Reason: r}) only those with reason r
// too.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Reason == "" || t.Reason == e.Reason)
}

// Reason is the game's reason code in err (see Error.Reason), or "".
func Reason(err error) string {
	if e := AsError(err); e != nil {
		return e.Reason
	}
	return ""
}

// The properties below come from Levee's one error table
// (levee/internal/apperr), as the README's table of codes states them.

// IsBusy reports whether the server refused the request because it, or the
// connection, is overloaded: BUSY, SERVER_FULL or RATE_LIMITED. Slow down
// and retry after RetryAfter.
func (e *Error) IsBusy() bool { return apperr.Overload(e.Code) }

// NotExecuted reports whether the server refused the request before
// executing it (BUSY, SERVER_FULL, RATE_LIMITED, NOT_ADMITTED): sending it again, with the same id, after RetryAfter is
// safe.
func (e *Error) NotExecuted() bool { return apperr.Class(e.Code) == apperr.NotExecuted }

// OutcomeUnknown reports whether the request may or may not have been
// applied (UNAVAILABLE, DEADLINE_EXCEEDED, SHUTTING_DOWN): a tier went
// away, the budget ran out, or a stopping server cut in-flight work off. Every mutation is idempotent by its request id, so send it
// again with the same id, never with a new one.
func (e *Error) OutcomeUnknown() bool { return apperr.Class(e.Code) == apperr.OutcomeUnknown }

// Retryable reports whether the same request may succeed later: it was
// not executed, or its outcome is unknown (the busy codes plus
// UNAVAILABLE, SHUTTING_DOWN, NOT_ADMITTED and DEADLINE_EXCEEDED). Every
// other code is final for its request. The SDK retries the busy codes,
// UNAVAILABLE and DEADLINE_EXCEEDED by itself (see Client.Do); when one
// reaches the caller the SDK has given up on that request.
func (e *Error) Retryable() bool { return apperr.Class(e.Code) != apperr.Final }

// IsBusiness reports whether the error is a normal game outcome rather than
// a fault: REJECTED (the game refused the action by its rules), NOT_FOUND
// or FORBIDDEN. Like every final error of a mutation it is the request's
// outcome: a resend gets it again.
func (e *Error) IsBusiness() bool { return apperr.Business(e.Code) }

// AsError returns the *Error in err's chain, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// IsBusy reports whether err carries a busy *Error (see Error.IsBusy).
func IsBusy(err error) bool {
	e := AsError(err)
	return e != nil && e.IsBusy()
}

// Retryable reports whether err carries a retryable *Error (see
// Error.Retryable).
func Retryable(err error) bool {
	e := AsError(err)
	return e != nil && e.Retryable()
}

// RetryAfter is the delay the server asked for in err: its *Error's, else
// its *CloseError's; 0 if none.
func RetryAfter(err error) time.Duration {
	if e := AsError(err); e != nil {
		return e.RetryAfter
	}
	var ce *CloseError
	if errors.As(err, &ce) {
		return ce.RetryAfter
	}
	return 0
}

// Code is the server's error code in err, or ERROR_CODE_UNSPECIFIED.
func Code(err error) leveev2.ErrorCode {
	if e := AsError(err); e != nil {
		return e.Code
	}
	return leveev2.ErrorCode_ERROR_CODE_UNSPECIFIED
}

// CodeName is the short name of an error code, e.g. "REJECTED".
func CodeName(c leveev2.ErrorCode) string {
	return strings.TrimPrefix(c.String(), "ERROR_CODE_")
}

// CloseError is the close code and reason the server sent when it closed the
// connection, e.g. 1008 (policy: bad token), 1012 (restarting), 1013 (try
// again later: overloaded), 1009 (frame too big).
type CloseError struct {
	Code int
	Text string
	// RetryAfter is the retry_after of the last notice (a typed error
	// pushed without a request id, e.g. SHUTTING_DOWN) the server sent
	// before it closed the connection; 0 if none.
	RetryAfter time.Duration
}

func (e *CloseError) Error() string {
	s := fmt.Sprintf("close %d", e.Code)
	if n := closeNames[e.Code]; n != "" {
		s += " (" + n + ")"
	}
	if e.Text != "" {
		s += ": " + e.Text
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	return s
}

var closeNames = map[int]string{
	1000: "normal closure",
	1001: "going away",
	1002: "protocol error",
	1006: "abnormal closure",
	1008: "policy violation",
	1009: "message too big",
	1011: "internal error",
	4001: "replaced by a newer session",
	1012: "service restart",
	1013: "try again later",
}

// CloseCode is the server's close code in err's chain, or 0.
func CloseCode(err error) int {
	var ce *CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}
