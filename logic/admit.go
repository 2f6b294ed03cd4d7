package logic

import (
	"fmt"
	"math"
	"time"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/priority"
)

// Bounds of the retry delay sent with a queue_full refusal.
const (
	minRetryAfter = 50 * time.Millisecond
	maxRetryAfter = 5 * time.Second
)

// admitBelow is the channel length from which a request is refused: a
// request is admitted while len(ch) < limit. "Refuse when the channel is at
// least fill × capacity full" is len >= fill × capacity, and for an integer
// len that is len >= ceil(fill × capacity). The small epsilon keeps float
// noise (0.7 × 10 = 7.000000000000001) from moving the boundary by one.
func admitBelow(fill float64, capacity int) int {
	n := int(math.Ceil(fill*float64(capacity) - 1e-9))
	return min(max(n, 1), capacity)
}

// limits is the admitBelow of each class: SHEDDABLE from -reject-fill-
// sheddable, DEFAULT from -reject-fill, CRITICAL only a full channel.
func limits(cfg Config) [priority.NumClasses]int {
	var l [priority.NumClasses]int
	l[priority.Sheddable] = admitBelow(cfg.RejectFillSheddable, cfg.QueueSize)
	l[priority.Default] = admitBelow(cfg.RejectFill, cfg.QueueSize)
	l[priority.Critical] = cfg.QueueSize
	return l
}

// waitLimits is the estimated wait (in ns) above which each class is
// refused at admission: DEFAULT at maxWait, SHEDDABLE at half of it,
// CRITICAL never (0: no time rule).
func waitLimits(maxWait time.Duration) [priority.NumClasses]int64 {
	var w [priority.NumClasses]int64
	if maxWait > 0 {
		w[priority.Sheddable] = max(int64(maxWait/2), 1)
		w[priority.Default] = int64(maxWait)
	}
	return w
}

// verdict is what offer decided.
type verdict uint8

const (
	admitted verdict = iota
	refusedFull
	refusedWait
)

// waitFloor is the queue length below which the time rule does not apply:
// so short a queue is worked off by one group commit, while perOp, measured
// over small batches at low load, is about one disk sync per request and
// would overstate the wait many times over.
const waitFloor = 32

// offer puts o on the channel, without ever blocking, if o's class may still
// enter; n is the channel's length when it looked. A class is refused when
// the channel holds limit[c] requests (the fill rule, the hard ceiling) or
// when the estimated wait n × perOp exceeds maxWait[c] (the time rule;
// tested as n > maxWait/perOp, which cannot overflow). The check and the
// send are not one atomic step: concurrent admissions can overshoot a
// class's limit by at most their number, and the channel's capacity stays
// the hard bound.
func (sh *shard) offer(o *op) (n int, v verdict) {
	n = len(sh.ch)
	c := o.class.Index()
	if n >= sh.limit[c] {
		return n, refusedFull
	}
	if w := sh.maxWait[c]; w > 0 && n >= sh.waitFloor {
		if per := sh.perOp.Load(); per > 0 && int64(n) > w/per {
			return n, refusedWait
		}
	}
	select {
	case sh.ch <- o:
		sh.depth.Set(float64(len(sh.ch)))
		return n, admitted
	default:
		return cap(sh.ch), refusedFull
	}
}

// retryAfter is how long the shard takes to work off depth requests at its
// measured pace (an EWMA of the time per request over recent batches),
// clamped to [50 ms, 5 s]. Before the first measurement it is 50 ms.
func (sh *shard) retryAfter(depth int) time.Duration {
	return drainTime(depth, time.Duration(sh.perOp.Load()))
}

func drainTime(depth int, perOp time.Duration) time.Duration {
	if perOp <= 0 || depth <= 0 {
		return minRetryAfter
	}
	if perOp > maxRetryAfter/time.Duration(depth) {
		return maxRetryAfter
	}
	return min(max(time.Duration(depth)*perOp, minRetryAfter), maxRetryAfter)
}

// observeBatch folds one batch (n requests in d) into the shard's pace.
// Only the shard's goroutine calls it.
func (sh *shard) observeBatch(n int, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	per := int64(d) / int64(n)
	old := sh.perOp.Load()
	if old == 0 {
		sh.perOp.Store(per)
		return
	}
	sh.perOp.Store(old + (per-old)/5) // α = 0.2
}

// refusals are the errors a shard refuses with at admission, built once so
// that a refusal allocates nothing: by the fill rule, and by the time rule.
func refusals(id int, lim [priority.NumClasses]int, capacity int, wait [priority.NumClasses]int64) (full, slow [priority.NumClasses]error) {
	for i, c := range priority.Classes {
		full[i] = fmt.Errorf("%w: shard %d queue is full for %s requests (%d of %d)", apperr.ErrBusy, id, c, lim[i], capacity)
		slow[i] = fmt.Errorf("%w: shard %d queue wait would exceed %v for %s requests", apperr.ErrBusy, id, time.Duration(wait[i]), c)
	}
	return full, slow
}

// admit puts o on sh's channel or says why not. It is the one place that
// decides whether a request gets in. With -reject-early (the default) it
// never blocks: a request of class c is refused when the channel holds at
// least limit[c] requests, or when the estimated wait exceeds maxWait[c],
// with the channel's length then and a retry delay for the refusal's
// status details (apperr.Overloaded). Without it the caller waits for room until
// its context ends. Internal messages (battle results) do not pass through
// here.
func (s *Server) admit(sh *shard, o *op) (depth int, retryAfter time.Duration, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopping {
		return 0, 0, apperr.ErrShuttingDown
	}
	if sh.closed.Load() {
		// Released or lost (dynamic hosting): the caller looks for the
		// owner. One that passed this check a moment before the shard's
		// last drain is answered by its waiter when the shard is done.
		return 0, 0, errNotHosted
	}
	if !s.rejectEarly {
		return 0, 0, s.enqueue(sh, o)
	}
	n, v := sh.offer(o)
	switch v {
	case admitted:
		return 0, 0, nil
	case refusedWait:
		sh.rejectedWait[o.class.Index()].Inc()
		return n, sh.retryAfter(n), sh.slow[o.class.Index()]
	}
	sh.rejected[o.class.Index()].Inc()
	return n, sh.retryAfter(n), sh.refusal[o.class.Index()]
}

// enqueue is admission with -reject-early off, the seed's story before the
// fix: wait for room in the channel. The wait ends when the caller's
// context does, so a stalled shard cannot pile up handler goroutines
// forever; such a request counts as expired. (It holds s.mu's read lock
// while it waits; stopShards waits for it, and the shards keep draining
// until then.)
func (s *Server) enqueue(sh *shard, o *op) error {
	select {
	case sh.ch <- o:
		sh.depth.Set(float64(len(sh.ch)))
		return nil
	default:
	}
	s.m.blocked.Inc()
	defer s.m.blocked.Dec()
	select {
	case sh.ch <- o:
		sh.depth.Set(float64(len(sh.ch)))
		return nil
	case <-sh.done:
		return errNotHosted
	case <-o.ctx.Done():
		sh.expired[o.class.Index()].Inc()
		return fmt.Errorf("%w: waited for room in the queue of shard %d: %w", apperr.ErrDeadline, sh.id, o.ctx.Err())
	}
}
