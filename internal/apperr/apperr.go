// Package apperr is Levee's one table of errors. Each row is one domain
// error (a sentinel such as ErrServerFull) and its player-facing ErrorCode,
// with every property the tiers, the gate and the SDK need of it:
//
//   - the gRPC code it travels as between tiers;
//   - its retry class: Final (do not send again as is), NotExecuted (the
//     request was not executed; send it again, same id, after retry_after)
//     or OutcomeUnknown (it may or may not have been applied; send it again
//     with the same id, which makes a resend safe);
//   - whether it means "overloaded, slow down" (Overload) and whether it is
//     a normal game outcome (Business);
//   - the WebSocket close code after a failed login, the HTTP status of a
//     refused upgrade, the metrics outcome label, the message players see
//     in place of the callee's (for UNAVAILABLE, INTERNAL and
//     DEADLINE_EXCEEDED, whose text may hold addresses or stack traces) and
//     the retry_after when the callee gave none.
//
// Both directions are derived from the table. ToStatus and Overloaded turn
// a domain error into a gRPC status at a server's edge, with the domain code
// (a leveev2.Error) and, for a refusal under load, the leveev2.Backpressure
// in the status details. FromStatus turns a call's error back into an
// *Error that matches its sentinel with errors.Is, so
// errors.Is(FromStatus(err), ErrServerFull) holds after a hop; a status
// without details (gRPC's own: Unavailable, DeadlineExceeded, Canceled, …)
// maps by its gRPC code. Backpressure travels one way, as the
// leveev2.Backpressure message: on replies in LogicReply.backpressure, on
// refusals in the status details, where Backpressure reads it back.
//
// Look-ups use errors.Is, so wrapped errors map like their sentinel; the
// first row that matches wins.
package apperr

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Domain errors. Wrap them with %w to add detail.
var (
	ErrBadRequest     = errors.New("bad request")
	ErrUnknownMessage = errors.New("unknown message type")
	ErrUnauthorized   = errors.New("unauthorized")
	ErrForbidden      = errors.New("forbidden")
	ErrTicketInUse    = errors.New("ticket in use by another connection")
	ErrNotFound       = errors.New("not found")
	ErrRejected       = errors.New("rejected by the game")
	ErrRequestExpired = errors.New("request expired: resent after the idempotency window; not applied again")
	ErrBusy           = errors.New("busy, try again later")
	ErrServerFull     = errors.New("server full")
	ErrDeadline       = errors.New("deadline exceeded")
	ErrUnavailable    = errors.New("service unavailable")
	ErrShuttingDown   = errors.New("server shutting down")
	ErrRateLimited    = errors.New("rate limited")
	ErrNotAdmitted    = errors.New("not admitted yet")
	ErrInternal       = errors.New("internal error")
)

// RetryClass says what a client may do with a request that failed so.
type RetryClass uint8

const (
	// Final: sending the same request again gets the same answer (a
	// business outcome, a bad or refused request, a fault). Do not retry
	// it as is.
	Final RetryClass = iota
	// NotExecuted: the request was refused before it was executed (busy,
	// full, rate limited, not admitted). Send it again, with the same id,
	// after retry_after.
	NotExecuted
	// OutcomeUnknown: the request may or may not have been applied (a tier
	// went away, the budget ran out, a stopping server cut it off: a server
	// shutting down is classed here, as in-flight work may have committed).
	// Mutations are idempotent by their id, so send it again with the same
	// id, within a retry budget.
	OutcomeUnknown
)

func (c RetryClass) String() string {
	switch c {
	case NotExecuted:
		return "not executed"
	case OutcomeUnknown:
		return "outcome unknown"
	}
	return "final"
}

// WebSocket close codes (RFC 6455 section 7.4.1 and the IANA registry) that
// the table names.
const (
	ClosePolicyViolation = 1008
	CloseInternalError   = 1011
	CloseServiceRestart  = 1012
	CloseTryAgainLater   = 1013
	// CloseReplaced (4001, in the private-use range 4000-4999) closes a
	// player's connection that a newer connection of the same player id
	// replaced (one player, one place: docs/protocol.md). The requests it
	// had in flight were answered before it; a client must not reconnect
	// on it, or the two connections would replace each other for ever.
	CloseReplaced = 4001
)

// CloseReplacedText is the close reason sent with CloseReplaced.
const CloseReplacedText = "replaced by a newer session"

// ErrReplaced is the refusal of a request read on a connection that a
// newer connection of the same player replaced, in the moment before its
// CloseReplaced close goes out. It travels as FORBIDDEN (final: not
// executed, and not to be sent again on this connection).
var ErrReplaced = fmt.Errorf("%w: this connection was replaced by a newer session of the same player", ErrForbidden)

// alias is another error that maps to a row, with the gRPC code it travels
// as (context.Canceled is a DEADLINE_EXCEEDED that travels as Canceled).
type alias struct {
	err  error
	grpc codes.Code
}

// row is one line of the table.
type row struct {
	err     error             // the domain error
	aliases []alias           // other errors that map to this row
	code    leveev2.ErrorCode // the player's code
	grpc    codes.Code        // between tiers
	bare    []codes.Code      // statuses without details of these codes map here
	class   RetryClass
	// overload: the callee (or the connection) is overloaded; slow down.
	overload bool
	// business: a normal game outcome, not a fault.
	business bool
	// permanent: a refused connection with this code is refused again when
	// dialed again with the same token.
	permanent bool
	close     int           // the WebSocket close code after a failed login
	http      int           // the HTTP status of a refused upgrade; 0 if none
	public    string        // when set, what players see instead of the callee's message
	retry     time.Duration // retry_after when a status came without one
	outcome   string        // metrics label (set in init: the code's name, lowercased)
}

// table is THE table. It is ordered: the first row whose error matches wins
// (a deadline wrapped in an internal error is a deadline).
var table = []row{
	{err: ErrBadRequest, code: leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, grpc: codes.InvalidArgument,
		bare: []codes.Code{codes.InvalidArgument}, class: Final, permanent: true, close: CloseInternalError},
	{err: ErrUnknownMessage, code: leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE, grpc: codes.Unimplemented,
		bare: []codes.Code{codes.Unimplemented}, class: Final, permanent: true, close: CloseInternalError},
	{err: ErrUnauthorized, code: leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED, grpc: codes.Unauthenticated,
		bare: []codes.Code{codes.Unauthenticated}, class: Final, permanent: true, close: ClosePolicyViolation, http: 401},
	{err: ErrForbidden, code: leveev2.ErrorCode_ERROR_CODE_FORBIDDEN, grpc: codes.PermissionDenied,
		bare: []codes.Code{codes.PermissionDenied}, class: Final, business: true, permanent: true, close: ClosePolicyViolation, http: 403},
	// A login with a line ticket whose place another connection still
	// holds. Only the gate says it, to a player; FailedPrecondition says
	// what it is should it ever travel: the place is taken for now.
	{err: ErrTicketInUse, code: leveev2.ErrorCode_ERROR_CODE_TICKET_IN_USE, grpc: codes.FailedPrecondition,
		class: Final, permanent: true, close: ClosePolicyViolation},
	{err: ErrNotFound, code: leveev2.ErrorCode_ERROR_CODE_NOT_FOUND, grpc: codes.NotFound,
		bare: []codes.Code{codes.NotFound}, class: Final, business: true, close: CloseInternalError},
	{err: ErrRejected, code: leveev2.ErrorCode_ERROR_CODE_REJECTED, grpc: codes.FailedPrecondition,
		class: Final, business: true, close: CloseInternalError},
	{err: ErrRequestExpired, code: leveev2.ErrorCode_ERROR_CODE_REQUEST_EXPIRED, grpc: codes.FailedPrecondition,
		class: Final, close: CloseInternalError},
	{err: ErrBusy, code: leveev2.ErrorCode_ERROR_CODE_BUSY, grpc: codes.ResourceExhausted,
		bare: []codes.Code{codes.ResourceExhausted}, class: NotExecuted, overload: true, close: CloseTryAgainLater,
		retry: 100 * time.Millisecond},
	{err: ErrServerFull, code: leveev2.ErrorCode_ERROR_CODE_SERVER_FULL, grpc: codes.ResourceExhausted,
		class: NotExecuted, overload: true, close: CloseTryAgainLater, http: 503, retry: 100 * time.Millisecond},
	{err: ErrRateLimited, code: leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED, grpc: codes.ResourceExhausted,
		class: NotExecuted, overload: true, close: CloseTryAgainLater, http: 429, retry: 100 * time.Millisecond},
	{err: ErrDeadline, code: leveev2.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED, grpc: codes.DeadlineExceeded,
		aliases: []alias{{context.DeadlineExceeded, codes.DeadlineExceeded}, {context.Canceled, codes.Canceled}},
		bare:    []codes.Code{codes.DeadlineExceeded, codes.Canceled}, class: OutcomeUnknown, close: CloseTryAgainLater,
		public: "the request ran out of time"},
	{err: ErrUnavailable, code: leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, grpc: codes.Unavailable,
		bare: []codes.Code{codes.Unavailable}, class: OutcomeUnknown, close: CloseTryAgainLater,
		public: "service unavailable, try again later", retry: time.Second},
	{err: ErrShuttingDown, code: leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN, grpc: codes.Unavailable,
		class: OutcomeUnknown, close: CloseServiceRestart, retry: time.Second},
	{err: ErrNotAdmitted, code: leveev2.ErrorCode_ERROR_CODE_NOT_ADMITTED, grpc: codes.FailedPrecondition,
		class: NotExecuted, close: CloseTryAgainLater},
	{err: ErrInternal, code: leveev2.ErrorCode_ERROR_CODE_INTERNAL, grpc: codes.Internal,
		class: Final, close: CloseInternalError, public: "internal error"},
}

// internal is the row of unknown errors and of statuses no row claims.
var internal = &table[len(table)-1]

var (
	// byCode[code] is the row of code, nil for codes without one.
	byCode []*row
	// byBare[grpc code] is the row a status without details maps to.
	byBare [17]*row
	// byHTTP maps an upgrade's HTTP status back to its row.
	byHTTP = map[int]*row{}
	// unknownRow holds the properties of codes without a row: final, and
	// closed with 1011 after a login.
	unknownRow = &row{code: leveev2.ErrorCode_ERROR_CODE_UNSPECIFIED, class: Final, close: CloseInternalError, outcome: "unknown"}
)

func init() {
	var top int32
	for n := range leveev2.ErrorCode_name {
		top = max(top, n)
	}
	byCode = make([]*row, top+1)
	for i := range table {
		r := &table[i]
		if byCode[r.code] != nil {
			panic("apperr: two rows for " + r.code.String())
		}
		r.outcome = strings.ToLower(strings.TrimPrefix(r.code.String(), "ERROR_CODE_"))
		byCode[r.code] = r
		for _, c := range r.bare {
			if byBare[c] != nil {
				panic("apperr: two rows for a bare " + c.String())
			}
			byBare[c] = r
		}
		if r.http != 0 {
			if byHTTP[r.http] != nil {
				panic("apperr: two rows for HTTP " + strconv.Itoa(r.http))
			}
			byHTTP[r.http] = r
		}
	}
}

// rowOf is code's row, or unknownRow.
func rowOf(code leveev2.ErrorCode) *row {
	if code >= 0 && int(code) < len(byCode) && byCode[code] != nil {
		return byCode[code]
	}
	return unknownRow
}

// match is err's row and the gRPC code it travels as; unknown errors are
// internal.
func match(err error) (*row, codes.Code) {
	for i := range table {
		r := &table[i]
		if errors.Is(err, r.err) {
			return r, r.grpc
		}
		for _, a := range r.aliases {
			if errors.Is(err, a.err) {
				return r, a.grpc
			}
		}
	}
	return internal, internal.grpc
}

// Code is the player-facing code for err; unknown errors are INTERNAL.
func Code(err error) leveev2.ErrorCode {
	if err == nil {
		return leveev2.ErrorCode_ERROR_CODE_UNSPECIFIED
	}
	r, _ := match(err)
	if r == internal {
		return passedOn(err, r.code)
	}
	return r.code
}

// passedOn is the code of an *Error in err's chain whose code this build
// has no row for (a newer tier's), so that it is passed on as it came;
// otherwise def.
func passedOn(err error, def leveev2.ErrorCode) leveev2.ErrorCode {
	var e *Error
	if errors.As(err, &e) && rowOf(e.Code) == unknownRow {
		return e.Code
	}
	return def
}

// GRPCCode is the gRPC code for err; unknown errors are Internal.
func GRPCCode(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	_, c := match(err)
	return c
}

// Class is code's retry class; codes without a row are Final.
func Class(code leveev2.ErrorCode) RetryClass { return rowOf(code).class }

// Overload reports whether code says that the server, or the connection,
// is overloaded (BUSY, SERVER_FULL, RATE_LIMITED): slow down.
func Overload(code leveev2.ErrorCode) bool { return rowOf(code).overload }

// Business reports whether code is a normal game outcome rather than a
// fault (REJECTED, NOT_FOUND, FORBIDDEN).
func Business(code leveev2.ErrorCode) bool { return rowOf(code).business }

// Permanent reports whether a connection refused with code is refused again
// when dialed again with the same token (UNAUTHORIZED, FORBIDDEN,
// BAD_REQUEST, UNKNOWN_MESSAGE) and, for TICKET_IN_USE, the same line
// ticket while the connection that holds its place stays open.
func Permanent(code leveev2.ErrorCode) bool { return rowOf(code).permanent }

// LoginCloseCode is the WebSocket close code after a login that failed with
// code: 1013 (Try Again Later) when retrying makes sense, 1012 (Service
// Restart) when the server stops, 1008 (Policy Violation) for auth
// failures, 1011 (Internal Error) otherwise.
func LoginCloseCode(code leveev2.ErrorCode) int { return rowOf(code).close }

// Outcome is code's metrics outcome label: its name, lowercased, without
// the ERROR_CODE_ prefix ("busy", "not_found"); "unknown" for a
// code without a row.
func Outcome(code leveev2.ErrorCode) string { return rowOf(code).outcome }

// FromHTTP is the code of an upgrade refused with an HTTP status (401, 403,
// 429, 503); false for a status without one.
func FromHTTP(httpStatus int) (leveev2.ErrorCode, bool) {
	if r, ok := byHTTP[httpStatus]; ok {
		return r.code, true
	}
	return leveev2.ErrorCode_ERROR_CODE_UNSPECIFIED, false
}

// PushbackKey is the trailer that carries a retry delay in milliseconds, with
// the meaning gRPC gives grpc-retry-pushback-ms. ToStatus sets it for gRPC's
// own retry logic; Levee reads the delay from the status details.
const PushbackKey = "grpc-retry-pushback-ms"

// ToStatus turns err into a gRPC status error at a server's edge: the code
// from the table, err's text as the message, and a leveev2.Error with the
// domain code and retryAfter in the details. When retryAfter > 0 it is also
// set as the pushback trailer on ctx's stream. An error that is a status
// already is returned as is.
func ToStatus(ctx context.Context, err error, retryAfter time.Duration) error {
	return toStatus(ctx, err, retryAfter, nil)
}

// Overloaded is ToStatus for a refusal under load: besides the pushback it
// puts the refusing tier's backpressure (queue depth or work in flight, how
// full it is 0..1, and retryAfter) in the status details.
func Overloaded(ctx context.Context, err error, retryAfter time.Duration, depth int, ratio float64) error {
	return toStatus(ctx, err, retryAfter, NewBackpressure(depth, ratio, retryAfter))
}

func toStatus(ctx context.Context, err error, retryAfter time.Duration, bp *leveev2.Backpressure) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if retryAfter > 0 {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, strconv.FormatInt(retryAfter.Milliseconds(), 10)))
	}
	return encode(err, retryAfter, bp).Err()
}

// encode is err's status with its details.
func encode(err error, retryAfter time.Duration, bp *leveev2.Backpressure) *status.Status {
	r, c := match(err)
	code := r.code
	if r == internal {
		code = passedOn(err, code)
	}
	st := status.New(c, err.Error())
	detail := &leveev2.Error{Code: code, RetryAfterMs: millis(retryAfter)}
	detail.Reason, _ = gameReason(err)
	var withDetails *status.Status
	var derr error
	if bp != nil {
		withDetails, derr = st.WithDetails(detail, bp)
	} else {
		withDetails, derr = st.WithDetails(detail)
	}
	if derr != nil { // cannot happen with these messages; the code alone then
		return st
	}
	return withDetails
}

// NewBackpressure is the hints of a tier that holds depth requests (or
// works on them) and is ratio full (clamped to 0..1), asking for retryAfter.
func NewBackpressure(depth int, ratio float64, retryAfter time.Duration) *leveev2.Backpressure {
	if !(ratio >= 0) { // NaN too
		ratio = 0
	}
	return &leveev2.Backpressure{
		QueueDepth:   uint32(min(max(depth, 0), 1<<32-1)),
		Ratio:        min(ratio, 1),
		RetryAfterMs: millis(retryAfter),
	}
}

// millis is d in whole milliseconds for the wire, 0 for d <= 0.
func millis(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	return uint32(min(d.Milliseconds(), 1<<32-1))
}

// Error is a domain error that came over a gRPC hop (see FromStatus).
// errors.Is matches it with its row's sentinel (ErrServerFull, …).
type Error struct {
	Code       leveev2.ErrorCode
	Message    string        // the callee's message, not for players as is (see Player)
	RetryAfter time.Duration // the callee's retry delay, 0 when it gave none
	// Reason is the game's own code of a game error (GameError.Reason),
	// "" for Levee's errors.
	Reason string
	// Backpressure is the callee's hints on a refusal under load; nil
	// when it sent none.
	Backpressure *leveev2.Backpressure
}

func (e *Error) Error() string {
	if e.Message != "" {
		return e.Message
	}
	if r := rowOf(e.Code); r != unknownRow {
		return r.err.Error()
	}
	return strings.ToLower(strings.TrimPrefix(e.Code.String(), "ERROR_CODE_"))
}

// Unwrap is the sentinel of e's code, so errors.Is(e, ErrServerFull) works.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	if r := rowOf(e.Code); r != unknownRow {
		return r.err
	}
	return nil
}

// Player is the player's reply for e: its code, the message (or, for
// UNAVAILABLE, INTERNAL and DEADLINE_EXCEEDED, a fixed text, as the callee's
// may hold addresses or stack traces) and retry_after: the callee's, else
// its backpressure's, else the code's default.
func (e *Error) Player() *leveev2.Error {
	r := rowOf(e.Code)
	msg := e.Message
	if r.public != "" {
		msg = r.public
	}
	retry := millis(e.RetryAfter)
	if retry == 0 {
		retry = e.Backpressure.GetRetryAfterMs()
	}
	if retry == 0 {
		retry = millis(r.retry)
	}
	return &leveev2.Error{Code: e.Code, Message: msg, RetryAfterMs: retry, Reason: e.Reason}
}

// FromStatus maps an error returned by a gRPC call back to the domain: the
// code, retry delay and backpressure from the status details, or, for a
// status without them (gRPC's own), the row of its gRPC code (INTERNAL when
// none claims it). An error that is not a status maps like Code does.
// FromStatus(nil) is nil.
func FromStatus(err error) *Error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return &Error{Code: Code(err), Message: err.Error()}
	}
	e := &Error{Code: internal.code, Message: st.Message()}
	if c := st.Code(); int(c) < len(byBare) && byBare[c] != nil {
		e.Code = byBare[c].code
	}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *leveev2.Error:
			e.Code = d.GetCode()
			e.RetryAfter = time.Duration(d.GetRetryAfterMs()) * time.Millisecond
			e.Reason = d.GetReason()
		case *leveev2.Backpressure:
			e.Backpressure = d
		}
	}
	return e
}

// Backpressure is the hints in a refusal's status details, nil when it
// carries none.
func Backpressure(err error) *leveev2.Backpressure {
	var e *Error
	if errors.As(err, &e) {
		return e.Backpressure
	}
	return FromStatus(err).GetBackpressure()
}

// GetBackpressure is e's backpressure; nil for a nil e.
func (e *Error) GetBackpressure() *leveev2.Backpressure {
	if e == nil {
		return nil
	}
	return e.Backpressure
}

// Reply builds the typed error reply for a domain error; a game's error
// (GameError) carries its reason.
func Reply(err error, retryAfter time.Duration) *leveev2.Error {
	e := &leveev2.Error{Code: Code(err), Message: err.Error(), RetryAfterMs: millis(retryAfter)}
	if reason, msg := gameReason(err); reason != "" || msg != "" {
		e.Reason, e.Message = reason, msg
	}
	return e
}

// gameReason is the reason and player-safe message of a game's error in
// err's chain: a GameError, or one that came over a hop with its reason
// (an *Error whose Reason is set). Both "" when there is none.
func gameReason(err error) (reason, message string) {
	var ge *GameError
	if errors.As(err, &ge) {
		return ge.Reason, ge.Message
	}
	var e *Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason, e.Message
	}
	return "", ""
}

// GameError is a game's own validation or business error: one of
// ErrBadRequest, ErrNotFound, ErrForbidden and ErrRejected (Kind), the
// game's reason code and a message safe to show to a player. Package game
// makes them (game.Invalid, game.Reject, ...).
type GameError struct {
	Kind    error
	Reason  string
	Message string
}

func (e *GameError) Error() string { return e.Message }

// Unwrap is e's Kind, so that Code and the table see a game's error as
// its row.
func (e *GameError) Unwrap() error { return e.Kind }
