package battle

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"levee/internal/apperr"
)

// busyRetryAfter is the pushback sent with a refusal from the in-flight cap.
const busyRetryAfter = 100 * time.Millisecond

// admitter decides, before any work is done, whether a request may run now.
// On yes it returns done, to call when the work ends; on no an error wrapping
// apperr.ErrBusy and how long the caller should wait. The in-flight cap is the
// tier's hard last line; CPU throttling and adaptive shedding plug in here.
type admitter interface {
	admit(ctx context.Context) (done func(), retryAfter time.Duration, err error)
}

// inflightCap admits at most max requests at once and refuses the rest at
// once, without queueing: a refusal costs one atomic add and one subtract.
type inflightCap struct {
	max int64
	n   atomic.Int64
}

var _ admitter = (*inflightCap)(nil)

func newInflightCap(max int) *inflightCap { return &inflightCap{max: int64(max)} }

func (c *inflightCap) admit(context.Context) (func(), time.Duration, error) {
	if c.n.Add(1) > c.max {
		c.n.Add(-1)
		return nil, busyRetryAfter, fmt.Errorf("battle: %d simulations in flight: %w", c.max, apperr.ErrBusy)
	}
	return c.release, 0, nil
}

func (c *inflightCap) release() { c.n.Add(-1) }
