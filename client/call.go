package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/client/pacer"
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Do sends f and waits for its reply. It sets f.RequestId to a fresh id,
// f.IssuedAtMs to the wall time (both kept on every retry) and,
// when ctx has a deadline, f.TimeoutMs to the remaining budget (or less, if
// f already asked for less). An UNSPECIFIED f.Criticality takes the one set
// with WithCriticality, if any. f must not be used concurrently by others.
//
// Before each attempt f waits its turn in the pacer (unless NoPacing), by
// the priority of its criticality; a local refusal is a *LocalError. Two
// kinds of answer are retried with the same request id (unless NoRetry)
// after Options.Retry's delay, never sooner than the server's retry_after,
// at most Retry.MaxAttempts attempts in all, and only while the retry
// budget allows:
//
//   - a refusal for load (BUSY, SERVER_FULL, RATE_LIMITED): not executed;
//   - an answer that leaves the outcome unknown (UNAVAILABLE,
//     DEADLINE_EXCEEDED; see Error.OutcomeUnknown): the request may have
//     been executed, and since the server executes a request id at most
//     once, only a resend with the same id is safe (a new id would, for
//     a purchase, charge twice).
//
// A retry is made only when, after its delay, at least MinRetryBudget of
// ctx's deadline is left: an attempt with less would race the deadline
// (its answer, even the server's DEADLINE_EXCEEDED, could arrive just
// after the call gave up).
//
// When no retry follows, the last answer is returned, wrapping
// ErrRetryBudget or ErrRetryDeadline (or the ctx or connection error that
// cut the wait) when that was the reason. Other errors are returned at
// once, NOT_ADMITTED among them (ErrNotAdmitted: the gate has not let the
// player in yet; its RetryAfter is the player's ETA in the line).
//
// When a reply ends it, Do returns it; if it is an error reply, err is the
// matching *Error (and the frame is still returned, for its backpressure).
// If ctx ends while the request is paced or in flight Do returns an error
// wrapping ctx.Err() and a late reply is discarded. If the connection ends
// first the error wraps ErrClosed.
//
// Whenever Do gives up on a request that may have been executed (an
// outcome-unknown answer or SHUTTING_DOWN was the last word, or ctx or the
// connection ended while it was in flight) the error also wraps an
// *UnresolvedError (and ErrOutcomeUnknown) holding the frame with its
// request id: send it again with Resend, on this Client or on the one
// Reconnect gives, never as a new request.
func (c *Client) Do(ctx context.Context, f *leveev2.ClientFrame) (*leveev2.ServerFrame, error) {
	if f.Criticality == leveev2.Criticality_CRITICALITY_UNSPECIFIED {
		if crit, ok := ctx.Value(critKey{}).(leveev2.Criticality); ok {
			f.Criticality = crit
		}
	}
	// Wall time for the server's idempotency window, set once per request:
	// every retry and Resend of it carries the same stamp.
	f.IssuedAtMs = uint64(time.Now().UnixMilli())
	c.requests.Add(1)
	return c.call(ctx, f, c.nextID.Add(1), false)
}

// CallInfo is what one call did on the wire, for a caller that keeps its
// own record of its requests (a load tool's ledger, a client's
// diagnostics). Pass it with WithCallInfo.
type CallInfo struct {
	// RequestID is the request id the call used: a fresh one for Do (and
	// Call, Send), f's own for Resend. 0 when the
	// call returned before choosing one (Resend of a frame without an id).
	RequestID uint64
	// Attempts is how many times the call sent the frame on the wire: 1
	// when it was not retried, 0 when nothing was sent (a local refusal,
	// ctx ended before the first send, the retry budget refused a
	// Resend). A send whose write failed counts: it may have reached the
	// server.
	Attempts int
	// Replayed says the reply was the stored first outcome of this
	// mutation (a resend: nothing was applied again); Version is the
	// version of the player's state the action read or wrote. Both are
	// the answering frame's, zero without one.
	Replayed bool
	Version  uint64
}

type callInfoKey struct{}

// WithCallInfo returns a ctx under which the SDK's calls (Do, Resend,
// Call, Send) fill info when they return, whatever
// they return: the request id used and the number of sends. One info per
// call: calls made concurrently under the same ctx would overwrite each
// other's.
func WithCallInfo(ctx context.Context, info *CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

type maxAttemptsKey struct{}

// WithMaxAttempts returns a ctx under which a call makes at most n sends
// (n >= 1), fewer than Options.Retry allows when n is smaller: for a
// caller resending a request that already went out, so that the request's
// sends in all stay within its policy.
func WithMaxAttempts(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, maxAttemptsKey{}, max(n, 1))
}

// callInfo is the *CallInfo set with WithCallInfo, reset for a new call
// with request id id; nil when none was set.
func callInfo(ctx context.Context, id uint64) *CallInfo {
	info, _ := ctx.Value(callInfoKey{}).(*CallInfo)
	if info != nil {
		*info = CallInfo{RequestID: id}
	}
	return info
}

// ErrNoRequestID is Resend's error for a frame without the request id of
// its first send.
var ErrNoRequestID = errors.New("client: resend needs the request id of the first send")

// Resend sends f again with the request id it already has (f.RequestId,
// which must not be 0), for a request whose outcome is unknown: the
// Request of an *UnresolvedError (see Unresolved), typically on the Client
// that Reconnect made after the one that sent it was lost. The server
// executes a request id at most once (a job action once per key), so
// when the first send was executed the resend gets its outcome back and
// nothing is applied twice.
//
// A resend is a retry: it spends one from the retry budget (unless
// NoRetry), and when the budget refuses, Resend sends nothing and returns
// an error wrapping ErrRetryBudget and an *UnresolvedError, so the
// request can be resent later. Otherwise it is Do with f's own id: paced,
// its refusals and outcome-unknown answers retried with that id, its
// TimeoutMs lowered to ctx's remaining budget. f must not be used
// concurrently by others.
func (c *Client) Resend(ctx context.Context, f *leveev2.ClientFrame) (*leveev2.ServerFrame, error) {
	id := f.GetRequestId()
	callInfo(ctx, id)
	if id == 0 {
		return nil, ErrNoRequestID
	}
	if c.budget != nil && !c.budget.TryRetry(c.clk.Now()) {
		c.budgetRefused.Add(1)
		return nil, unresolved(f, f.GetTimeoutMs(), ErrRetryBudget)
	}
	c.retries.Add(1)
	return c.call(ctx, f, id, true)
}

// call is Do's and Resend's retry loop around pacing and one round trip;
// every attempt carries request id id. unknown says whether an earlier
// send of id (a Resend's first) may have been executed.
func (c *Client) call(ctx context.Context, f *leveev2.ClientFrame, id uint64, unknown bool) (*leveev2.ServerFrame, error) {
	timeout := f.GetTimeoutMs()   // as the caller set it, for a later Resend
	var last *leveev2.ServerFrame // the previous attempt's refusal
	var lastErr error
	info := callInfo(ctx, id)
	for attempt := 1; ; attempt++ {
		if err := c.pace(ctx, f.GetCriticality()); err != nil {
			return last, maybeUnresolved(unknown, f, timeout, notRetried(lastErr, err))
		}
		out, sent, err := c.roundTrip(ctx, f, id)
		if sent && info != nil {
			info.Attempts++
		}
		if info != nil && out != nil {
			info.Replayed, info.Version = out.GetReplayed(), out.GetVersion()
		}
		if err == nil {
			c.answered()
			return out, nil
		}
		e := AsError(err)
		if e != nil && !e.Retryable() {
			c.answered()
		}
		// No answer at all (ctx or the connection ended, or f could not be
		// sent), or an answer that does not say whether f was executed.
		unknown = unknown || (e == nil && sent) || (e != nil && e.OutcomeUnknown())
		if e != nil && !e.Retryable() {
			// A final answer is the id's outcome, whatever earlier
			// attempts left open: the server executes an id at most once.
			unknown = false
		}
		if n, capped := ctx.Value(maxAttemptsKey{}).(int); capped && attempt >= n {
			return out, maybeUnresolved(unknown, f, timeout, err)
		}
		if e == nil || c.budget == nil || !retriedHere(e) || !c.opts.Retry.CanRetry(attempt) {
			return out, maybeUnresolved(unknown, f, timeout, err)
		}
		wait := c.opts.Retry.Delay(attempt-1, retryAfter(e, out), c.opts.Rand)
		if dl, ok := ctx.Deadline(); ok && wait+MinRetryBudget > time.Until(dl) {
			c.retryDeadline.Add(1)
			return out, maybeUnresolved(unknown, f, timeout, notRetried(err, ErrRetryDeadline))
		}
		if !c.budget.TryRetry(c.clk.Now()) {
			c.budgetRefused.Add(1)
			return out, maybeUnresolved(unknown, f, timeout, notRetried(err, ErrRetryBudget))
		}
		if werr := c.sleep(ctx, wait); werr != nil {
			return out, maybeUnresolved(unknown, f, timeout, notRetried(err, werr))
		}
		c.retries.Add(1)
		last, lastErr = out, err
	}
}

// answered funds the retry budget for a request that got a final answer
// (a result, or an error that is its outcome). Refused and unknown ones do
// not: the budget allows retries as a share of the requests the server
// answers, so that while a tier is down (every answer a refusal) only
// what the answered requests of the last window left, and the budget's
// reserve, pay for retries, instead of a tenth of the failing requests
// themselves, and the load on the failing tier stays near what the
// players ask for.
func (c *Client) answered() {
	if c.budget != nil {
		c.budget.OnRequest(c.clk.Now())
	}
}

// retriedHere reports whether Do retries e on the same connection: a
// refusal for load, or an outcome-unknown answer other than SHUTTING_DOWN
// (the gate that sent it is closing the connection; the request is resent
// on the next one).
func retriedHere(e *Error) bool {
	return e.IsBusy() || (e.OutcomeUnknown() && e.Code != leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN)
}

// ErrOutcomeUnknown is wrapped (by an *UnresolvedError) when the SDK gave
// up on a request that may have been executed.
var ErrOutcomeUnknown = errors.New("client: outcome unknown; resend with the same request id")

// UnresolvedError is a request that may have been executed although no
// final answer came: the connection or ctx ended while it was in flight, or
// the server's last answer was UNAVAILABLE, DEADLINE_EXCEEDED or
// SHUTTING_DOWN and the SDK stopped retrying. Send Request again with
// Resend (after Reconnect when the connection is gone): it keeps the
// request id, so the server applies it at most once. Sending the same
// action as a new request (Do, Call) would apply it a second time.
type UnresolvedError struct {
	// Request is the frame as the caller built it, with the request id of
	// its sends. It is the Unresolved error's own copy.
	Request *leveev2.ClientFrame
	Err     error // what the last attempt ended with
}

func (e *UnresolvedError) Error() string {
	return fmt.Sprintf("%v (outcome unknown: resend request id %d)", e.Err, e.Request.GetRequestId())
}

// Unwrap gives the last attempt's error and ErrOutcomeUnknown.
func (e *UnresolvedError) Unwrap() []error { return []error{e.Err, ErrOutcomeUnknown} }

// Unresolved returns the request to Resend when err says its outcome is
// unknown (it carries an *UnresolvedError), else nil.
func Unresolved(err error) *leveev2.ClientFrame {
	var ue *UnresolvedError
	if errors.As(err, &ue) {
		return ue.Request
	}
	return nil
}

// maybeUnresolved is err, wrapped in an *UnresolvedError when unknown.
func maybeUnresolved(unknown bool, f *leveev2.ClientFrame, timeoutMs uint32, err error) error {
	if !unknown {
		return err
	}
	return unresolved(f, timeoutMs, err)
}

// unresolved wraps err in an *UnresolvedError for a copy of f whose
// TimeoutMs is timeoutMs again (the one a later send starts from).
func unresolved(f *leveev2.ClientFrame, timeoutMs uint32, err error) error {
	req := proto.CloneOf(f)
	req.TimeoutMs = timeoutMs
	return &UnresolvedError{Request: req, Err: err}
}

// notRetried is the error of a request whose retry did not happen: the
// server's last refusal, wrapping why. With no refusal yet it is why.
func notRetried(refusal, why error) error {
	if refusal == nil {
		return why
	}
	return fmt.Errorf("%w (not retried: %w)", refusal, why)
}

// retryAfter is the longer of the refusal's retry_after and the one in the
// frame's backpressure hints.
func retryAfter(e *Error, f *leveev2.ServerFrame) time.Duration {
	hint := time.Duration(f.GetBackpressure().GetRetryAfterMs()) * time.Millisecond
	return max(e.RetryAfter, hint)
}

// sleep waits d on the client's clock; it returns early with ctx's error,
// or the connection's if it ends.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := c.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.Err()
	}
}

// pace waits for the request's turn in the pacer. Its local refusals come
// back as *LocalError.
func (c *Client) pace(ctx context.Context, crit leveev2.Criticality) error {
	if c.pacer == nil {
		return nil
	}
	err := c.pacer.Wait(ctx, PriorityOf(crit))
	if err == pacer.ErrEvicted || err == pacer.ErrQueueFull {
		return &LocalError{Err: err, Criticality: crit}
	}
	return err
}

// feedPressure passes a frame's backpressure ratio to the pacer. A busy
// refusal without hints counts as full pressure (the server is refusing);
// the next reply that carries a ratio sets it again.
func (c *Client) feedPressure(f *leveev2.ServerFrame) {
	if c.pacer == nil {
		return
	}
	if bp := f.GetBackpressure(); bp != nil {
		c.pacer.SetPressure(bp.GetRatio())
		return
	}
	if e := f.GetError(); e != nil && f.GetRequestId() != 0 && (&Error{Code: e.GetCode()}).IsBusy() {
		c.pacer.SetPressure(1)
	}
}

// PriorityOf is the pacer priority of a criticality: CRITICAL goes first and
// evicts the others, SHEDDABLE goes last and is evicted first; DEFAULT,
// UNSPECIFIED and unknown values sit between. It is the cluster's class of
// the same name (package pacer's Priority).
func PriorityOf(crit leveev2.Criticality) pacer.Priority {
	c, _ := priority.FromProto(crit)
	return c
}

type critKey struct{}

// WithCriticality returns a ctx under which the SDK's calls (Call, Send,
// and Do with an UNSPECIFIED criticality) carry crit instead of their
// action's class, e.g. to mark a cosmetic change or a background
// refresh SHEDDABLE. The game's declaration decides every
// action's class: a lower class than the action's is honoured, a higher one is
// ignored (the request is served with the action's class). crit also
// orders the call in the SDK's own pacer.
func WithCriticality(ctx context.Context, crit leveev2.Criticality) context.Context {
	return context.WithValue(ctx, critKey{}, crit)
}

// criticality is the one set with WithCriticality, else def.
func criticality(ctx context.Context, def leveev2.Criticality) leveev2.Criticality {
	if crit, ok := ctx.Value(critKey{}).(leveev2.Criticality); ok && crit != leveev2.Criticality_CRITICALITY_UNSPECIFIED {
		return crit
	}
	return def
}
