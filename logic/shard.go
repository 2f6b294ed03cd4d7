package logic

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// op is one message to a shard: a player's request (on the shard's request
// channel), or (job != nil) the result of a job call coming back to be
// applied (on its internal channel).
type op struct {
	ctx     context.Context
	req     *leveev2.LogicRequest
	class   priority.Class // the class it arrived with (the gate's decision)
	arrived time.Time      // when the request reached logic (the server's clock)
	done    chan result    // buffered 1; gets exactly one result
	job     *jobResult

	// A call (nil for a login): its declared action and its decoded
	// request, and route, the player whose state it reads or writes (the
	// sender, or the target of a query that reads another player).
	action *gamedef.Action
	msg    proto.Message
	route  string
}

// result is what the handler waiting on an op gets back.
type result struct {
	reply    *leveev2.LogicReply
	err      error
	pushback time.Duration
}

// jobResult is a finished job call, sent back into its shard.
type jobResult struct {
	key      string // the flight's key
	rep      []byte // the job's encoded reply
	err      error
	pushback time.Duration
}

// flight is one job call in progress; every request for the same player,
// job and key that arrives meanwhile waits for it too.
type flight struct {
	key      string   // the job's outcome key
	keys     []string // its outcome keys: key, then the request id keys of the requests that wait for it
	playerID string
	jobKey   string // the key the game chose
	req      []byte // the job's encoded request (Start's)
	first    *op    // the call runs on its context
	waiters  []*op
}

// shard owns its players. Everything but the fields up to srv is touched
// only by the shard's goroutine.
type shard struct {
	id int
	// ch carries the players' requests, which pass admission; in carries
	// internal messages (job results), which do not, and which the loop
	// always takes first so that they never wait behind new requests.
	ch    chan *op
	in    chan *op
	depth prometheus.Gauge
	limit [priority.NumClasses]int // admit a class while len(ch) < limit
	// maxWait is the estimated wait in ns above which a class is refused
	// (0: no time rule); staleAfter is how long a non-critical request may
	// have waited when it is picked up (0: no guard).
	maxWait    [priority.NumClasses]int64
	waitFloor  int // the time rule applies from this queue length on
	staleAfter time.Duration
	// perOp is the measured time per request in ns (EWMA), for retryAfter
	// and the time rule; written by the shard's goroutine only.
	perOp         atomic.Int64
	refusal       [priority.NumClasses]error
	slow          [priority.NumClasses]error
	staleErr      [priority.NumClasses]error
	rejected      [priority.NumClasses]prometheus.Counter // reason queue_full
	rejectedWait  [priority.NumClasses]prometheus.Counter // reason wait_estimate
	stale         [priority.NumClasses]prometheus.Counter // reason queue_wait
	expired       [priority.NumClasses]prometheus.Counter // reason expired
	coolingRefuse [priority.NumClasses]prometheus.Counter // reason battle_cooling
	store         shardStore
	srv           *Server

	// The shard's life: stop is closed to end it (finish what it accepted,
	// unless lost), done once run has returned. epoch is the lease epoch it
	// serves under (0: static hosting, -store=bolt). closed refuses new
	// requests (a released or lost shard); lost says to answer what is left
	// in its channels unexecuted and to fail its commits' replies: it lost
	// its lease. stopErr answers what a stopping shard no longer serves (a
	// job to start, a flight in progress).
	stop     <-chan struct{}
	ownStop  chan struct{} // stop, when the shard has its own (dynamic hosting)
	stopOnce sync.Once
	done     chan struct{}
	epoch    int64
	closed   atomic.Bool
	lost     atomic.Bool
	stopErr  result

	cache   map[string]*record // committed state
	flights map[string]*flight // by job outcome key
	// reqFlights are the flights by their requests' id keys, so that an
	// id cannot be used for another request while its job runs.
	reqFlights map[string]*flight
	// purgeMore: the last purge stopped at purgeBatch with expired
	// outcomes left, so the loop purges again before it waits.
	purgeMore bool
	health    storeHealth
	// fencedSeen: a commit has failed with ErrFenced (see fenced).
	fencedSeen bool
}

func newShard(id int, st shardStore, srv *Server) *shard {
	label := strconv.Itoa(id)
	sh := &shard{
		id:         id,
		ch:         make(chan *op, srv.cfg.QueueSize),
		in:         make(chan *op, internalQueue(srv.cfg)),
		depth:      srv.m.queueDepth.WithLabelValues(label),
		limit:      limits(srv.cfg),
		maxWait:    waitLimits(srv.cfg.admitMaxWait()),
		waitFloor:  waitFloor,
		staleAfter: srv.cfg.staleAfter(),
		store:      st,
		srv:        srv,
		cache:      map[string]*record{},
		flights:    map[string]*flight{},
		reqFlights: map[string]*flight{},
		stop:       srv.stop,
		done:       make(chan struct{}),
		stopErr:    result{err: apperr.ErrShuttingDown},
	}
	sh.refusal, sh.slow = refusals(id, sh.limit, srv.cfg.QueueSize, sh.maxWait)
	for i, c := range priority.Classes {
		sh.staleErr[i] = fmt.Errorf("%w: shard %d: %s request waited in the queue longer than %v", apperr.ErrBusy, id, c, sh.staleAfter)
		sh.rejected[i] = srv.m.rejections.WithLabelValues(label, reasonQueueFull, c.String())
		sh.rejectedWait[i] = srv.m.rejections.WithLabelValues(label, reasonWaitEstimate, c.String())
		sh.stale[i] = srv.m.rejections.WithLabelValues(label, reasonQueueWait, c.String())
		sh.expired[i] = srv.m.rejections.WithLabelValues(label, reasonExpired, c.String())
		sh.coolingRefuse[i] = srv.m.rejections.WithLabelValues(label, reasonBattleCooling, c.String())
	}
	sh.depth.Set(0)
	return sh
}

// backpressure is the hint attached to every reply from this shard: its
// queue depth and how full its channel is, with no retry delay.
func (sh *shard) backpressure() *leveev2.Backpressure {
	n := len(sh.ch)
	return apperr.NewBackpressure(n, float64(n)/float64(cap(sh.ch)), 0)
}

// internalQueue is the capacity of a shard's internal channel. Its senders
// (job goroutines, at most MaxBattles) block while it is full, until the
// shard takes from it or the server stops; the shard always takes from it
// first, so it does not stay full.
func internalQueue(cfg Config) int { return max(min(cfg.QueueSize, cfg.maxBattles()), 1) }

// How the shard purges expired outcomes: every purgeEvery on the server's
// clock, at most purgeBatch outcomes per transaction, and between batches
// of requests until none is left when a purge stops at the bound.
const (
	purgeEvery = 10 * time.Second
	purgeBatch = 2048
)

// run drains the channels one batch at a time until stop is closed, then
// finishes what is already in them and returns; a lost shard instead
// answers what is left unexecuted (abort). The internal channel comes
// first: a batch starts with an internal message whenever one is waiting.
// Between batches it purges the outcomes older than the idempotency window.
// On its way out it fails the job flights still in progress with stopErr
// (their results, should they come back, are dropped) and closes done.
func (sh *shard) run() {
	defer close(sh.done)
	defer sh.depth.Set(0)
	defer sh.failFlights()
	tick := sh.srv.clk.NewTicker(purgeEvery)
	defer tick.Stop()
	for {
		if sh.lost.Load() {
			sh.abort()
			return
		}
		select {
		case <-tick.C():
			sh.purgeMore = true
		default:
		}
		if sh.purgeMore {
			sh.purge()
		}
		o := sh.poll()
		if o == nil {
			select {
			case o = <-sh.in:
			case o = <-sh.ch:
			case <-tick.C():
				sh.purgeMore = true
				continue
			case <-sh.stop:
				if sh.lost.Load() {
					sh.abort()
					return
				}
				for o := sh.poll(); o != nil; o = sh.poll() {
					sh.runBatch(o, true)
				}
				return
			}
		}
		if h := sh.srv.hookBatch; h != nil {
			h(sh.id)
		}
		sh.runBatch(o, false)
	}
}

// halt ends a dynamically hosted shard: it admits nothing more and its
// goroutine stops, after finishing what it accepted (release) or at once,
// answering what is left unexecuted (lost). Safe to call more than once
// and from any goroutine, the shard's own included.
func (sh *shard) halt(lost bool) {
	if lost {
		sh.lost.Store(true)
	}
	sh.closed.Store(true)
	if sh.ownStop != nil {
		sh.stopOnce.Do(func() { close(sh.ownStop) })
	}
}

// abort answers every request left in the channels with stopErr,
// unexecuted, and drops the job results there (their flights are failed
// on the way out): the shard lost its lease, and another process may
// already serve its players.
func (sh *shard) abort() {
	for o := sh.poll(); o != nil; o = sh.poll() {
		if o.job == nil {
			sh.send(o, sh.stopErr)
		}
	}
}

// failFlights answers the requests waiting for a job still in flight with
// stopErr (nothing was applied; their ids stay open).
func (sh *shard) failFlights() {
	for _, f := range sh.flights {
		sh.failFlight(f, sh.stopErr)
	}
}

// poll takes the next message without waiting: an internal one if any is
// waiting, else a request, else nil.
func (sh *shard) poll() *op {
	select {
	case o := <-sh.in:
		return o
	default:
	}
	select {
	case o := <-sh.ch:
		return o
	default:
		return nil
	}
}

// purge deletes one bounded batch of the outcomes kept longer than the
// window (plus maxIssuedSkew), by the server's clock. A failure is logged
// and tried again at the next tick.
func (sh *shard) purge() {
	_, more, err := sh.store.purge(sh.srv.clk.Now().Add(-sh.srv.cfg.keepOutcomes()), purgeBatch)
	sh.purgeMore = more
	if err != nil {
		sh.srv.m.storeErrors.WithLabelValues(storeOpPurge, storeReason(err)).Inc()
		sh.srv.log.Error("purging expired outcomes failed", "shard", sh.id, "err", err)
	}
}

// batch is one pass over the channel: the mutations it made (on copies of
// the records), the outcomes to store with them, and the replies that wait
// for their commit.
type batch struct {
	stopping  bool
	dirty     map[string]*record
	outcomes  map[string]outcome // by key: written with the commit, looked up before it
	pending   []pendingReply
	launches  []*flight
	mutations int
	// touched are the players with an outcome in the batch (their records
	// may be in dirty too): what is answered about them depends on the
	// commit.
	touched map[string]bool
}

// pendingReply is an answer waiting for the commit. committed says that it
// depends only on what was committed before the batch (a read, a replay
// from the store): it goes out even if the batch's commit fails.
type pendingReply struct {
	o         *op
	r         result
	committed bool
}

// reply answers o once the batch has committed. An answer about a player
// the batch has changed so far (a record or an outcome) depends on the
// commit; any other does not.
func (b *batch) reply(o *op, r result) {
	id := o.route
	_, dirty := b.dirty[id]
	b.pending = append(b.pending, pendingReply{o: o, r: r, committed: !dirty && !b.touched[id]})
}

// addOutcome stores o with the batch's commit.
func (b *batch) addOutcome(o outcome) {
	if b.outcomes == nil {
		b.outcomes = map[string]outcome{}
	}
	b.outcomes[o.key] = o
}

// runBatch handles first and whatever else is already waiting (up to
// MaxBatch), commits every change in one transaction, and only then replies.
func (sh *shard) runBatch(first *op, stopping bool) {
	start := time.Now()
	b := &batch{stopping: stopping, dirty: map[string]*record{}}
	sh.handle(b, first)
	n := 1
	for ; n < sh.srv.cfg.MaxBatch; n++ {
		o := sh.poll()
		if o == nil {
			break
		}
		sh.handle(b, o)
	}
	sh.depth.Set(float64(len(sh.ch)))
	sh.commit(b)
	sh.observeBatch(n, time.Since(start))
}

// commit writes the batch's dirty records in one transaction, then sends its
// replies and starts its battles. If the write fails nothing of the batch is
// kept: the copies are dropped, its battles are not started, and every reply
// that depends on the commit becomes the failure (UNAVAILABLE for a full
// disk, an unreachable database, a lost lease or another process's write,
// else INTERNAL; see commitFailed), while the others (reads of
// committed state, replays of stored outcomes) go out as they are.
func (sh *shard) commit(b *batch) {
	if len(b.dirty) > 0 || len(b.outcomes) > 0 {
		start := time.Now()
		err := sh.store.put(b.dirty, b.outcomes, sh.srv.hookCommit)
		sh.srv.m.commitTime.Observe(time.Since(start).Seconds())
		if err != nil {
			fail := sh.commitFailed(b, err)
			switch storeReason(err) {
			case reasonFenced, reasonConflict:
				// Another process writes the shard: none of the
				// cached records can be trusted any more.
				clear(sh.cache)
			default:
				for id := range b.dirty {
					// Read again from the store next time: whatever
					// a failed commit left there is the truth.
					delete(sh.cache, id)
				}
				for id := range b.touched {
					delete(sh.cache, id)
				}
			}
			for _, p := range b.pending {
				if p.committed {
					sh.send(p.o, p.r)
				} else {
					sh.send(p.o, fail)
				}
			}
			for _, f := range b.launches {
				sh.failFlight(f, fail)
			}
			return
		}
		sh.commitSucceeded()
		sh.srv.m.batchSize.Observe(float64(b.mutations))
		for id, rec := range b.dirty {
			sh.cache[id] = rec
		}
	}
	for _, p := range b.pending {
		sh.send(p.o, p.r)
	}
	for _, f := range b.launches {
		sh.launch(f)
	}
}

// send answers o. Every op gets exactly one send; done is buffered, so this
// never blocks even when the caller has gone.
func (sh *shard) send(o *op, r result) {
	if r.reply != nil {
		r.reply.Backpressure = sh.backpressure()
	}
	o.done <- r
}

// handle runs one message against the batch.
func (sh *shard) handle(b *batch, o *op) {
	if o.job != nil {
		sh.applyJob(b, o.job)
		return
	}
	if err := o.ctx.Err(); err != nil && sh.srv.dropExpired {
		// The caller has gone (or its budget ran out) while the request
		// waited: drop it unexecuted. (With -drop-expired off it runs
		// anyway and its reply goes nowhere.)
		sh.expired[o.class.Index()].Inc()
		sh.send(o, result{err: fmt.Errorf("%w: expired in the queue of shard %d: %w", apperr.ErrDeadline, sh.id, err)})
		return
	}
	if sh.staleAfter > 0 && o.class != priority.Critical && sh.srv.clk.Now().Sub(o.arrived) > sh.staleAfter {
		// The CoDel-style guard: a request that has already waited this
		// long is answered busy unexecuted, so that the queue sheds its
		// standing delay instead of serving everyone late. Never internal
		// messages (handled above) nor critical requests.
		sh.stale[o.class.Index()].Inc()
		sh.send(o, result{err: sh.staleErr[o.class.Index()], pushback: sh.retryAfter(len(sh.ch))})
		return
	}
	switch a := o.action; {
	case a == nil:
		sh.login(b, o)
	case a.Job != "":
		sh.startJob(b, o)
	case a.Mutates:
		sh.mutate(b, o)
	default:
		sh.query(b, o)
	}
}
