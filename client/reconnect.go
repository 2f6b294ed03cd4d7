package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"levee/internal/clock"
	leveev1 "levee/proto/leveev1"
)

// TokenFunc returns the player token for a dial attempt. DialRetry and
// Reconnect call it before every attempt, so a long outage can end with a
// fresh token.
type TokenFunc func(ctx context.Context) (string, error)

// StaticToken is a TokenFunc that always returns tok.
func StaticToken(tok string) TokenFunc {
	return func(context.Context) (string, error) { return tok, nil }
}

// DialRetry is Dial that tries again until it connects, ctx ends, or the
// refusal is one that no retry can fix (bad token or url: UNAUTHORIZED,
// FORBIDDEN, BAD_REQUEST, a 1008 close, a 4xx handshake refusal, an
// unsupported subprotocol). The first attempt goes at once; after a failure
// the redials follow Options.Reconnect: the first after a random delay in
// [0, Spread) (5 s), later ones backing off, each never sooner than the
// refusal's retry_after (a SERVER_FULL reply, a 503's Retry-After). A wait
// that would outlast ctx's deadline is not started: the last dial error is
// returned at once, wrapping ErrRetryDeadline. The waits run on
// Options.Clock. The Client's Stats().DialAttempts counts the attempts.
func DialRetry(ctx context.Context, rawURL string, tokens TokenFunc, opts Options) (*Client, error) {
	return redial(ctx, rawURL, tokens, opts, -1, 0, nil)
}

// Reconnect dials again after a connection ended, as DialRetry does, but
// even the first attempt waits: a random delay in [0, Spread), never sooner
// than cause's retry_after (RetryAfter(cause)), so that the players a gate
// dropped together do not all come back in the same instant. cause is why
// the old connection ended, usually its Err(); it may be nil.
func Reconnect(ctx context.Context, rawURL string, tokens TokenFunc, opts Options, cause error) (*Client, error) {
	return redial(ctx, rawURL, tokens, opts, 0, RetryAfter(cause), cause)
}

// redial is the loop of DialRetry (n = -1: no wait before the first
// attempt) and Reconnect (n = 0). n counts the waits: wait n is
// Reconnect.Delay(n, after); last is the error that led to it.
func redial(ctx context.Context, rawURL string, tokens TokenFunc, opts Options, n int, after time.Duration, last error) (*Client, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	for attempts := uint64(1); ; attempts++ {
		if n >= 0 {
			wait := opts.Reconnect.Delay(n, after, opts.Rand)
			if dl, ok := ctx.Deadline(); ok && wait >= time.Until(dl) {
				return nil, notRedialed(last, ErrRetryDeadline)
			}
			opts.Logger.Debug("redial", "attempt", attempts, "wait", wait, "after", last)
			if err := sleepOn(ctx, opts.Clock, wait); err != nil {
				return nil, notRedialed(last, err)
			}
		}
		tok, err := tokens(ctx)
		if err != nil {
			return nil, fmt.Errorf("client: dial: token: %w", err)
		}
		c, err := Dial(ctx, rawURL, tok, opts)
		if err == nil {
			c.dialAttempts = attempts
			return c, nil
		}
		if ctx.Err() != nil || permanent(err) {
			return nil, err
		}
		last, after = err, RetryAfter(err)
		n++
	}
}

// notRedialed is the error when no further dial was made: the last one's
// (or the old connection's), wrapping why. With neither it is why.
func notRedialed(last, why error) error {
	if last == nil {
		return why
	}
	return fmt.Errorf("%w (not redialed: %w)", last, why)
}

// permanent reports whether a dial error is one that dialing again cannot
// fix.
func permanent(err error) bool {
	if errors.Is(err, errBadURL) || errors.Is(err, errHTTPRefused) || errors.Is(err, ErrSubprotocol) || errors.Is(err, ErrInvalidOptions) {
		return true
	}
	if e := AsError(err); e != nil {
		switch e.Code {
		case leveev1.ErrorCode_ERROR_CODE_UNAUTHORIZED, leveev1.ErrorCode_ERROR_CODE_FORBIDDEN,
			leveev1.ErrorCode_ERROR_CODE_BAD_REQUEST, leveev1.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE:
			return true
		}
		return false
	}
	return CloseCode(err) == websocket.ClosePolicyViolation
}

// sleepOn waits d on clk, or until ctx ends.
func sleepOn(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
