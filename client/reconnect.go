package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
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
// unsupported subprotocol, or a 4001 close: ErrReplaced). The first attempt goes at once; after a failure
// the redials follow Options.Reconnect: the first after a random delay in
// [0, Spread) (5 s), later ones backing off, each never sooner than the
// refusal's retry_after (a SERVER_FULL reply, a 503's Retry-After). A wait
// that would outlast ctx's deadline is not started: the last dial error is
// returned at once, wrapping ErrRetryDeadline. The waits run on
// Options.Clock. The Client's Stats().DialAttempts counts the attempts.
//
// A place in the admission line survives the redials: an attempt that
// failed after the gate gave the player a place (its error wraps a
// *LineError) makes the next attempts carry that ticket
// (Options.Ticket) while its grace lasts, so the player comes back to the
// same place. If the gate refuses an attempt that carried a ticket with a
// refusal that would otherwise end the loop (the ticket was forged,
// expired or another player's), the next attempt goes at once without it;
// TICKET_IN_USE (an old connection of the player's, not dropped yet,
// holds the place) is retried with the ticket, backing off, while its
// grace lasts.
func DialRetry(ctx context.Context, rawURL string, tokens TokenFunc, opts Options) (*Client, error) {
	return redial(ctx, rawURL, tokens, opts, -1, 0, nil)
}

// Reconnect dials again after a connection ended, as DialRetry does, but
// even the first attempt waits: a random delay in [0, Spread), never sooner
// than cause's retry_after (RetryAfter(cause)), so that the players a gate
// dropped together do not all come back in the same instant. cause is why
// the old connection ended, usually its Err(), or a failed Dial's error; it
// may be nil. When cause wraps a *LineError whose grace has not run out
// (the player was dropped while waiting in line), the redials carry its
// ticket, as DialRetry's do; when it wraps the *LineError of a player let
// in with an admission pass (a Client's Err), its pass; otherwise
// Options.Ticket, if set (a ticket or a pass, Client.Ticket).
//
// A cause that wraps ErrReplaced (the gate closed the connection with
// 4001: a newer connection of the player took its place) is not redialed:
// Reconnect returns at once with an error wrapping it.
func Reconnect(ctx context.Context, rawURL string, tokens TokenFunc, opts Options, cause error) (*Client, error) {
	if errors.Is(cause, ErrReplaced) {
		return nil, cause
	}
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
	place := lineTicket{ticket: opts.Ticket}
	place.update(last, opts.Clock.Now())
	for attempts := uint64(1); ; attempts++ {
		if n >= 0 {
			wait := opts.Reconnect.Delay(n, after, opts.Rand)
			if dl, ok := ctx.Deadline(); ok && wait >= time.Until(dl) {
				return nil, notRedialed(last, ErrRetryDeadline)
			}
			opts.Logger.Debug("redial", "attempt", attempts, "wait", wait, "after", last)
			if err := clock.Sleep(ctx, opts.Clock, wait); err != nil {
				return nil, notRedialed(last, err)
			}
		}
		tok, err := tokens(ctx)
		if err != nil {
			return nil, fmt.Errorf("client: dial: token: %w", err)
		}
		o := opts
		o.Ticket = place.current(opts.Clock.Now())
		c, err := Dial(ctx, rawURL, tok, o)
		if err == nil {
			c.dialAttempts = attempts
			return c, nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrReplaced) {
			return nil, err
		}
		if permanent(err) {
			switch {
			case o.Ticket == "" || !ticketRefusal(err):
				return nil, err
			case ticketInUse(err):
				// The gate still holds the place for the old connection
				// (it drops a dead one after its ping timeout): try again
				// later with the ticket, while its grace lasts.
				place.holdUntil(opts.Clock.Now().Add(defaultLineGrace))
			default:
				// Perhaps only the ticket was refused: once more, at
				// once, as a new arrival.
				opts.Logger.Debug("ticket refused; dialing without it", "err", err)
				place = lineTicket{}
				last = err
				continue
			}
		}
		place.update(err, opts.Clock.Now())
		last, after = err, RetryAfter(err)
		n++
	}
}

// lineTicket is the ticket that keeps a player's place in the admission
// line across redials.
type lineTicket struct {
	ticket string
	until  time.Time // zero: no known end (a ticket the caller gave)
}

// update takes the ticket of err's *LineError, if it has one: the
// admission pass of a player let in, with no end (the gate that let them in
// honours it within its grace, a restarted or another gate in its return
// window, and elsewhere it is as no ticket), else the line ticket while its
// grace lasts.
func (l *lineTicket) update(err error, now time.Time) {
	le := AsLineError(err)
	if le != nil && le.Admitted && le.Pass != "" {
		*l = lineTicket{ticket: le.Pass}
		return
	}
	if le == nil || le.Status.GetTicket() == "" {
		return
	}
	if !le.Resumable(now) {
		*l = lineTicket{}
		return
	}
	l.ticket = le.Status.GetTicket()
	l.until = le.Seen.Add(time.Duration(le.Status.GetGraceMs()) * time.Millisecond)
}

// holdUntil gives a ticket with no known end one: until.
func (l *lineTicket) holdUntil(until time.Time) {
	if l.until.IsZero() {
		l.until = until
	}
}

// defaultLineGrace is how long a ticket whose grace is not known (one the
// caller gave) is retried while the gate says it is in use: the gate's
// default grace.
const defaultLineGrace = 60 * time.Second

// ticketInUse reports whether err is the gate's refusal of a ticket whose
// place another connection still holds: TICKET_IN_USE.
func ticketInUse(err error) bool {
	return Code(err) == leveev2.ErrorCode_ERROR_CODE_TICKET_IN_USE
}

// current is the ticket to dial with at now, or "" once its grace is over.
func (l *lineTicket) current(now time.Time) string {
	if l.ticket == "" || (!l.until.IsZero() && !now.Before(l.until)) {
		return ""
	}
	return l.ticket
}

// ticketRefusal reports whether a permanent dial error may be the gate's
// refusal of the ticket rather than of the player (a typed refusal, a
// policy close or a 4xx handshake refusal, not a bad url or options).
func ticketRefusal(err error) bool {
	return !errors.Is(err, errBadURL) && !errors.Is(err, ErrSubprotocol) && !errors.Is(err, ErrInvalidOptions) && !errors.Is(err, ErrCertificate)
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
	if errors.Is(err, ErrReplaced) || errors.Is(err, errBadURL) || errors.Is(err, errHTTPRefused) || errors.Is(err, ErrSubprotocol) || errors.Is(err, ErrInvalidOptions) || errors.Is(err, ErrCertificate) {
		return true
	}
	if e := AsError(err); e != nil {
		// UNAUTHORIZED, FORBIDDEN, BAD_REQUEST, UNKNOWN_MESSAGE.
		return apperr.Permanent(e.Code)
	}
	return CloseCode(err) == websocket.ClosePolicyViolation
}
