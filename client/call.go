package client

import (
	"context"
	"fmt"
	"time"

	"levee/client/pacer"
	"levee/internal/priority"
	leveev1 "levee/proto/leveev1"
)

// Do sends f and waits for its reply. It sets f.RequestId to a fresh id and,
// when ctx has a deadline, f.TimeoutMs to the remaining budget (or less, if
// f already asked for less). An UNSPECIFIED f.Criticality takes the one set
// with WithCriticality, if any. f must not be used concurrently by others.
//
// Before each attempt f waits its turn in the pacer (unless NoPacing), by
// the priority of its criticality; a local refusal is a *LocalError. A
// refusal for load (BUSY, SERVER_FULL, RATE_LIMITED) is retried with the
// same request id (unless NoRetry) after Options.Retry's delay, never
// sooner than the server's retry_after, at most Retry.MaxAttempts attempts
// in all, and only while the retry budget allows; when no retry follows,
// the last refusal is returned, wrapping ErrRetryBudget or
// ErrRetryDeadline (or the ctx or connection error that cut the wait) when
// that was the reason. Other errors are returned at once, NOT_ADMITTED
// among them (ErrNotAdmitted: the gate has not let the player in yet; its
// RetryAfter is the player's ETA in the line).
//
// When a reply ends it, Do returns it; if it is an error reply, err is the
// matching *Error (and the frame is still returned, for its backpressure).
// If ctx ends while the request is paced or in flight Do returns ctx.Err()
// and a late reply is discarded. If the connection ends first the error
// wraps ErrClosed.
func (c *Client) Do(ctx context.Context, f *leveev1.ClientFrame) (*leveev1.ServerFrame, error) {
	if f.Criticality == leveev1.Criticality_CRITICALITY_UNSPECIFIED {
		if crit, ok := ctx.Value(critKey{}).(leveev1.Criticality); ok {
			f.Criticality = crit
		}
	}
	return c.call(ctx, f, c.nextID.Add(1))
}

// call is Do's retry loop around pacing and one round trip; every attempt
// carries request id id.
func (c *Client) call(ctx context.Context, f *leveev1.ClientFrame, id uint64) (*leveev1.ServerFrame, error) {
	c.requests.Add(1)
	if c.budget != nil {
		c.budget.OnRequest(c.clk.Now())
	}
	var last *leveev1.ServerFrame // the previous attempt's refusal
	var lastErr error
	for attempt := 1; ; attempt++ {
		if err := c.pace(ctx, f.GetCriticality()); err != nil {
			return last, notRetried(lastErr, err)
		}
		out, err := c.roundTrip(ctx, f, id)
		if err == nil || c.budget == nil {
			return out, err
		}
		e := AsError(err)
		if e == nil || !e.IsBusy() || !c.opts.Retry.CanRetry(attempt) {
			return out, err
		}
		wait := c.opts.Retry.Delay(attempt-1, retryAfter(e, out), c.opts.Rand)
		if dl, ok := ctx.Deadline(); ok && wait >= time.Until(dl) {
			c.retryDeadline.Add(1)
			return out, notRetried(err, ErrRetryDeadline)
		}
		if !c.budget.TryRetry(c.clk.Now()) {
			c.budgetRefused.Add(1)
			return out, notRetried(err, ErrRetryBudget)
		}
		if werr := c.sleep(ctx, wait); werr != nil {
			return out, notRetried(err, werr)
		}
		c.retries.Add(1)
		last, lastErr = out, err
	}
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
func retryAfter(e *Error, f *leveev1.ServerFrame) time.Duration {
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
func (c *Client) pace(ctx context.Context, crit leveev1.Criticality) error {
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
func (c *Client) feedPressure(f *leveev1.ServerFrame) {
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
func PriorityOf(crit leveev1.Criticality) pacer.Priority {
	c, _ := priority.FromProto(crit)
	return c
}

type critKey struct{}

// WithCriticality returns a ctx under which the SDK's calls (GetProfile,
// BuyItem, StartBattle, and Do with an UNSPECIFIED criticality) carry crit
// instead of their own, e.g. to mark a cosmetic purchase or a background
// profile refresh SHEDDABLE. The gate's policy decides every action's
// class: a lower class than the action's is honoured, a higher one is
// ignored (the request is served with the action's class). crit also
// orders the call in the SDK's own pacer.
func WithCriticality(ctx context.Context, crit leveev1.Criticality) context.Context {
	return context.WithValue(ctx, critKey{}, crit)
}

// criticality is the one set with WithCriticality, else def.
func criticality(ctx context.Context, def leveev1.Criticality) leveev1.Criticality {
	if crit, ok := ctx.Value(critKey{}).(leveev1.Criticality); ok && crit != leveev1.Criticality_CRITICALITY_UNSPECIFIED {
		return crit
	}
	return def
}
