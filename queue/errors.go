package queue

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by the Queue. Join refusals (ErrClosed, ErrLineFull) come
// wrapped in a *RefusedError that carries the retry-after; use errors.Is to
// test for them and RetryAfter to read the delay.
var (
	// ErrClosed: the line is closed for maintenance.
	ErrClosed = errors.New("queue: closed")
	// ErrLineFull: the line already holds its maximum length.
	ErrLineFull = errors.New("queue: line full")
	// ErrUnknownTicket: no such ticket in the line (never issued, already
	// admitted, cancelled, or expired and swept).
	ErrUnknownTicket = errors.New("queue: unknown ticket")
	// ErrTicketExpired: the ticket's grace period ended before it was resumed.
	ErrTicketExpired = errors.New("queue: ticket expired")
	// ErrTicketInUse: the ticket is held by a connection that has not left.
	ErrTicketInUse = errors.New("queue: ticket in use")
	// ErrWrongPlayer: the ticket belongs to another player.
	ErrWrongPlayer = errors.New("queue: ticket belongs to another player")
	// ErrBadPlayer: the player id is empty.
	ErrBadPlayer = errors.New("queue: empty player id")
	// ErrInvalidRate: SetRate or Config.Rate out of bounds; nothing changed.
	ErrInvalidRate = errors.New("queue: invalid rate")
	// ErrInvalidMode: not one of Open, Queueing, Paced, Closed.
	ErrInvalidMode = errors.New("queue: invalid mode")
	// ErrInvalidLength: SetMaxLength or Config.MaxLength out of bounds.
	ErrInvalidLength = errors.New("queue: invalid max length")
	// ErrInvalidRetryAfter: SetRetryAfter or Config.ClosedRetryAfter out of
	// bounds.
	ErrInvalidRetryAfter = errors.New("queue: invalid retry-after")
	// ErrInvalidConfig wraps the other Config.Validate errors.
	ErrInvalidConfig = errors.New("queue: invalid config")
)

// RefusedError is a refused Join: Err is ErrClosed or ErrLineFull and
// RetryAfter says when trying again makes sense.
type RefusedError struct {
	Err        error
	RetryAfter time.Duration
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", e.Err, e.RetryAfter)
}

// Unwrap returns Err.
func (e *RefusedError) Unwrap() error { return e.Err }

// RetryAfter returns the retry-after of a refusal anywhere in err's chain.
func RetryAfter(err error) (time.Duration, bool) {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.RetryAfter, true
	}
	return 0, false
}
