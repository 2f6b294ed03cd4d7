package logic

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"levee/internal/apperr"
	leveev1 "levee/proto/leveev1"
)

// op is one message to a shard: a player's request, or (battle != nil) the
// result of a battle call coming back to be applied.
type op struct {
	ctx    context.Context
	req    *leveev1.LogicRequest
	class  class       // the criticality it arrived with
	done   chan result // buffered 1; gets exactly one result
	battle *battleResult
}

// result is what the handler waiting on an op gets back.
type result struct {
	reply    *leveev1.LogicReply
	err      error
	pushback time.Duration
}

// battleResult is a finished battle call, sent back into its shard.
type battleResult struct {
	key      string // the flight's key
	rep      *leveev1.SimulateReply
	err      error
	pushback time.Duration
}

// flight is one battle call in progress; every request for the same player
// and battle id that arrives meanwhile waits for it too.
type flight struct {
	key      string
	playerID string
	battleID string
	req      *leveev1.SimulateRequest
	first    *op // the call runs on its context
	waiters  []*op
}

// shard owns its players. Everything but the fields up to srv is touched
// only by the shard's goroutine.
type shard struct {
	id    int
	ch    chan *op
	depth prometheus.Gauge
	limit [numClasses]int // admit a class while len(ch) < limit
	// perOp is the measured time per request in ns (EWMA), for retryAfter;
	// written by the shard's goroutine only.
	perOp    atomic.Int64
	refusal  [numClasses]error
	rejected [numClasses]prometheus.Counter // reason queue_full
	expired  [numClasses]prometheus.Counter // reason expired
	store    *store
	srv      *Server

	cache   map[string]*record // committed state
	flights map[string]*flight
}

func newShard(id int, st *store, srv *Server) *shard {
	label := strconv.Itoa(id)
	sh := &shard{
		id:      id,
		ch:      make(chan *op, srv.cfg.QueueSize),
		depth:   srv.m.queueDepth.WithLabelValues(label),
		limit:   limits(srv.cfg),
		store:   st,
		srv:     srv,
		cache:   map[string]*record{},
		flights: map[string]*flight{},
	}
	sh.refusal = refusals(id, sh.limit, srv.cfg.QueueSize)
	for c := range numClasses {
		sh.rejected[c] = srv.m.rejections.WithLabelValues(label, reasonQueueFull, c.String())
		sh.expired[c] = srv.m.rejections.WithLabelValues(label, reasonExpired, c.String())
	}
	sh.depth.Set(0)
	return sh
}

// backpressure is the hint attached to every reply from this shard.
func (sh *shard) backpressure() *leveev1.Backpressure {
	n := len(sh.ch)
	return &leveev1.Backpressure{QueueDepth: uint32(n), Ratio: float64(n) / float64(cap(sh.ch))}
}

// run drains the channel one batch at a time until stop is closed, then
// finishes what is already in the channel and returns.
func (sh *shard) run(stop <-chan struct{}) {
	for {
		select {
		case o := <-sh.ch:
			if h := sh.srv.hookBatch; h != nil {
				h(sh.id)
			}
			sh.runBatch(o, false)
		case <-stop:
			for {
				select {
				case o := <-sh.ch:
					sh.runBatch(o, true)
				default:
					sh.depth.Set(0)
					return
				}
			}
		}
	}
}

// batch is one pass over the channel: the mutations it made (on copies of
// the records) and the replies that wait for their commit.
type batch struct {
	stopping  bool
	dirty     map[string]*record
	pending   []pendingReply
	launches  []*flight
	mutations int
}

type pendingReply struct {
	o *op
	r result
}

func (b *batch) reply(o *op, r result) { b.pending = append(b.pending, pendingReply{o, r}) }

// runBatch handles first and whatever else is already waiting (up to
// MaxBatch), commits every change in one transaction, and only then replies.
func (sh *shard) runBatch(first *op, stopping bool) {
	start := time.Now()
	b := &batch{stopping: stopping, dirty: map[string]*record{}}
	sh.handle(b, first)
	n := 1
	for ; n < sh.srv.cfg.MaxBatch; n++ {
		var o *op
		select {
		case o = <-sh.ch:
		default:
		}
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
// kept: the copies are dropped and every reply becomes INTERNAL.
func (sh *shard) commit(b *batch) {
	if len(b.dirty) > 0 {
		start := time.Now()
		err := sh.store.put(b.dirty, sh.srv.hookCommit)
		sh.srv.m.commitTime.Observe(time.Since(start).Seconds())
		if err != nil {
			sh.srv.log.Error("group commit failed; batch rolled back", "shard", sh.id, "records", len(b.dirty), "err", err)
			fail := result{err: fmt.Errorf("%w: %w", apperr.ErrInternal, err)}
			for _, p := range b.pending {
				sh.send(p.o, fail)
			}
			for _, f := range b.launches {
				sh.failFlight(f, fail)
			}
			return
		}
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
	if o.battle != nil {
		sh.applyBattle(b, o.battle)
		return
	}
	if err := o.ctx.Err(); err != nil && sh.srv.dropExpired {
		// The caller has gone (or its budget ran out) while the request
		// waited: drop it unexecuted. (With -drop-expired off it runs
		// anyway and its reply goes nowhere.)
		sh.expired[o.class].Inc()
		sh.send(o, result{err: fmt.Errorf("%w: expired in the queue of shard %d: %w", apperr.ErrDeadline, sh.id, err)})
		return
	}
	switch a := o.req.GetAction().(type) {
	case *leveev1.LogicRequest_Login:
		sh.login(b, o)
	case *leveev1.LogicRequest_GetProfile:
		sh.profile(b, o)
	case *leveev1.LogicRequest_BuyItem:
		sh.buy(b, o, a.BuyItem)
	case *leveev1.LogicRequest_StartBattle:
		sh.startBattle(b, o, a.StartBattle)
	default:
		// Validated before admission; kept so that every op is answered.
		b.reply(o, businessError(fmt.Errorf("%w: no action", apperr.ErrBadRequest)))
	}
}

// businessError is a typed error inside a LogicReply.
func businessError(err error) result {
	return result{reply: &leveev1.LogicReply{Result: &leveev1.LogicReply_Error{Error: apperr.Reply(err, 0)}}}
}

func internalError(err error) result {
	return result{err: fmt.Errorf("%w: %w", apperr.ErrInternal, err)}
}
