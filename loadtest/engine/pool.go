package engine

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/reqtmpl"
	"github.com/leveehq/levee/loadtest/scenario"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The pool source (a scenario's pool: instead of arrivals): a fixed set of
// connections, dialled before the run starts with the SDK's retries and
// pacing off, then phases back to back, each an open loop (request i due at
// phase start + i/rate, sent then whatever the replies do, its latency
// also counted from that due time) or a closed loop (k requests
// outstanding). Request i of a phase is the mix's action spread evenly
// (spreadAct) on the next live connection, round robin.

// poolDialParallel bounds the dials in progress while the pool connects.
const poolDialParallel = 32

// poolDialTimeout bounds one connection's dial and handshake.
const poolDialTimeout = 10 * time.Second

// poolLateAfter is how far past its due time a request may be sent before
// it counts as a late dispatch (counter pool_late).
const poolLateAfter = 10 * time.Millisecond

// maxPoliteWait bounds how long a closed-loop worker honours a refusal's
// retry_after.
const maxPoliteWait = time.Second

// LostNoConn is the lost reason of a pool request that found no live
// connection.
const LostNoConn = "no_connection"

// Counters the pool source adds to the run file, besides the recorder's.
const (
	CounterPoolLate     = "pool_late"     // requests sent more than 10 ms past their due time
	CounterPoolUnsent   = "pool_unsent"   // requests never sent: the phase ended first (the tool fell behind)
	CounterPoolSemWaits = "pool_sem_wait" // times the dispatcher waited for a free slot (max_outstanding)
)

// poolPlan is a scenario's pool in wall time.
type poolPlan struct {
	conns  int
	grace  time.Duration
	maxOut int
	phases []poolPhase
}

// poolPhase is one phase: from..to after the start, open loop at rate or
// a closed loop of conc.
type poolPhase struct {
	name     string
	from, to time.Duration
	rate     float64
	cut      float64 // the rate asked for when pool.max_rate cut it; 0: not cut
	conc     int
}

// newPoolPlan resolves sc.Pool: offered x capacity into rates.
func newPoolPlan(sc *scenario.Scenario) (*poolPlan, error) {
	if sc.Pool == nil {
		return nil, nil
	}
	pp := &poolPlan{conns: sc.Pool.Conns, grace: time.Duration(sc.Pool.ReplyGrace), maxOut: sc.Pool.MaxOutstanding}
	at := time.Duration(0)
	for i, ph := range sc.Pool.Phases {
		if ph.Offered > 0 && !(sc.Capacity > 0) {
			return nil, fmt.Errorf("scenario %s: pool.phases[%d].offered: %w", sc.Name, i, scenario.ErrOfferedNoCapacity)
		}
		d := time.Duration(ph.Duration)
		rate, wanted := ph.PoolRate(sc.Capacity), 0.0
		if maxRate := sc.Pool.MaxRate; maxRate > 0 && rate > maxRate {
			rate, wanted = maxRate, rate
		}
		pp.phases = append(pp.phases, poolPhase{name: ph.Name, from: at, to: at + d, rate: rate, cut: wanted, conc: ph.Concurrency})
		at += d
	}
	return pp, nil
}

// metaPhases are the run file's phases: the pool's, then the drain.
func (pp *poolPlan) metaPhases(end, drain time.Duration) []report.Phase {
	var out []report.Phase
	for _, ph := range pp.phases {
		out = append(out, report.Phase{Name: ph.name, From: ph.from.Seconds(), To: ph.to.Seconds()})
	}
	return append(out, report.Phase{Name: "drain", From: end.Seconds(), To: (end + drain).Seconds()})
}

// pool is the pool source: its connections, dialled before the start.
type pool struct {
	dc     driverConfig
	pp     *poolPlan
	start  time.Time
	conns  []*client.Client
	failed int
	next   atomic.Uint64
	reqs   atomic.Int64

	mu   sync.Mutex
	warn []string
}

var _ source = (*pool)(nil)

// dialPool connects the pool's connections, poolDialParallel at a time;
// a failed dial is counted (dial_failures), not retried.
func dialPool(ctx context.Context, dc driverConfig, pp *poolPlan) *pool {
	p := &pool{dc: dc, pp: pp}
	conns := make([]*client.Client, pp.conns)
	sem := make(chan struct{}, poolDialParallel)
	var wg sync.WaitGroup
	exp := dc.clock.Now().Add(pp.phases[len(pp.phases)-1].to + dc.plan.drain + 10*time.Minute)
	for n := range pp.conns {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			conns[n] = p.dial(ctx, n, exp)
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c == nil {
			p.failed++
			continue
		}
		p.conns = append(p.conns, c)
	}
	return p
}

// dial connects connection n (player p-<run id>-<n>); nil when it failed.
func (p *pool) dial(ctx context.Context, n int, exp time.Time) *client.Client {
	id := fmt.Sprintf("p-%s-%d", p.dc.runID, n)
	tok, err := token.SignKey(p.dc.keyID, p.dc.secret, id, exp)
	if err != nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, poolDialTimeout)
	defer cancel()
	g := p.dc.gates[n%len(p.dc.gates)]
	opts := client.Options{Game: p.dc.plan.game.Game, NoRetry: true, NoPacing: true, JSON: evenly(n, p.dc.plan.json),
		Dialer: p.dc.dialerFor(g), Logger: p.dc.log, Clock: p.dc.clock}
	c, err := client.Dial(dctx, g, tok, opts)
	if err != nil {
		p.dc.log.Debug("pool dial failed", "conn", id, "err", err)
		return nil
	}
	return c
}

// evenly reports whether item i is one of exactly round(share x n) of any
// n consecutive items from 0, spread evenly.
func evenly(i int, share float64) bool {
	return int(float64(i+1)*share) > int(float64(i)*share)
}

// spreadAct is request i's action: the first in the mix's order whose
// cumulative share steps at i, so that a mix of two gets exactly
// round(share x n) of the first in any n requests from 0.
func (p *plan) spreadAct(i int) *act {
	for k := range p.acts {
		if evenly(i, p.acts[k].cum) {
			return &p.acts[k]
		}
	}
	return &p.acts[len(p.acts)-1]
}

func (p *pool) warnings() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.warn
}

func (p *pool) note(format string, args ...any) {
	p.mu.Lock()
	p.warn = append(p.warn, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

func (p *pool) result() sourceResult { return sourceResult{Peak: len(p.conns)} }

func (p *pool) run(ctx context.Context, src int, out chan<- sourcePoint) {
	defer func() { out <- sourcePoint{src: src, done: true} }()
	rec := record.New(p.start)
	pump(p.dc.clock, rec, func() { p.play(ctx, rec) }, func(pt record.Point) { out <- sourcePoint{src: src, p: pt} })
}

// play runs the phases, waits for every reply (or its timeout + grace) and
// closes the connections.
func (p *pool) play(ctx context.Context, rec *record.Recorder) {
	clk := p.dc.clock
	rec.Add("connected", int64(len(p.conns)))
	rec.Add("dial_failures", int64(p.failed))
	if p.failed > 0 {
		p.note("pool: %d of %d connections failed to dial", p.failed, p.pp.conns)
	}
	var wg sync.WaitGroup
	for _, ph := range p.pp.phases {
		if ph.cut > 0 {
			p.note("pool phase %s: %.0f requests/s asked for, cut to pool.max_rate %.0f/s", ph.name, ph.cut, ph.rate)
		}
		if len(p.conns) == 0 || ctx.Err() != nil {
			break
		}
		if err := clock.Sleep(ctx, clk, p.start.Add(ph.from).Sub(clk.Now())); err != nil {
			break
		}
		if ph.conc > 0 {
			p.closedLoop(ctx, rec, &wg, ph)
		} else {
			p.openLoop(ctx, rec, &wg, ph)
		}
	}
	wg.Wait()
	disconnects := 0
	for _, c := range p.conns {
		select {
		case <-c.Done():
			disconnects++
		default:
		}
		c.Close()
		rec.Add("connected", -1)
		// A reply whose request id matched no call waiting for one.
		rec.Add("duplicate_replies", int64(c.Stats().Unexpected))
	}
	if disconnects > 0 {
		p.note("pool: %d of %d connections ended before the run did", disconnects, len(p.conns))
	}
}

// wait is the longest a request waits for its reply.
func (p *pool) wait() time.Duration { return p.dc.plan.timeout + p.pp.grace }

// openLoop offers ph.rate requests/s from the phase's start to its end;
// their goroutines are added to wg.
func (p *pool) openLoop(ctx context.Context, rec *record.Recorder, wg *sync.WaitGroup, ph poolPhase) {
	start, end := p.start.Add(ph.from), p.start.Add(ph.to)
	planned := plannedCount(ph.rate, ph.to-ph.from)
	limit := int(ph.rate*p.wait().Seconds()*1.1) + 64
	if p.pp.maxOut > 0 {
		limit = min(limit, p.pp.maxOut)
	}
	sem := make(chan struct{}, limit)
	semWaits := int64(0)
	issue := func(i int) bool {
		select {
		case sem <- struct{}{}:
		default:
			semWaits++
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return false
			}
		}
		if p.reqs.Add(1) > p.dc.plan.maxReqs {
			<-sem
			return false
		}
		due := dueTime(start, i, ph.rate)
		wg.Go(func() {
			defer func() { <-sem }()
			p.request(ctx, rec, ph.name, i, due)
		})
		return true
	}
	disp := dispatcher{clk: p.dc.clock, start: start, end: end, rate: ph.rate, planned: planned, lateAfter: poolLateAfter, issue: issue}
	st := disp.run(ctx)
	rec.Add(CounterPoolLate, int64(st.Late))
	rec.Add(CounterPoolUnsent, int64(st.Unsent))
	rec.Add(CounterPoolSemWaits, semWaits)
	if st.Unsent > 0 || st.Late > st.Planned/100 {
		p.note("pool phase %s: the load tool fell behind its schedule: %d of %d requests sent late (max lag %v), %d never sent",
			ph.name, st.Late, st.Planned, st.MaxLag.Round(time.Millisecond), st.Unsent)
	}
}

// closedLoop keeps ph.conc requests outstanding until the phase's end. A
// worker whose request was refused for load waits the retry_after it was
// given (at most maxPoliteWait) before its next one, as a client honouring
// backpressure does; otherwise the quick refusals of a protected cluster
// would spin the loop and its served rate would count the cheap requests
// that are never refused more than the rest.
func (p *pool) closedLoop(ctx context.Context, rec *record.Recorder, wg *sync.WaitGroup, ph poolPhase) {
	pctx, cancel := context.WithDeadline(ctx, p.start.Add(ph.to))
	var seq atomic.Int64
	var loop sync.WaitGroup
	for range ph.conc {
		loop.Go(func() {
			for pctx.Err() == nil {
				if p.reqs.Add(1) > p.dc.plan.maxReqs {
					return
				}
				if ra := p.request(ctx, rec, ph.name, int(seq.Add(1)-1), time.Time{}); ra > 0 {
					_ = clock.Sleep(pctx, p.dc.clock, min(ra, maxPoliteWait))
				}
			}
		})
	}
	// The phase is over at its end; the requests still in flight finish
	// under wg, as an open loop's do.
	wg.Go(func() { loop.Wait(); cancel() })
	_ = clock.Sleep(ctx, p.dc.clock, p.start.Add(ph.to).Sub(p.dc.clock.Now()))
}

// request sends request i of phase on the next live connection and records
// its one outcome: due is when the open loop's schedule said to send it
// (zero in a closed loop). It returns the retry delay the cluster asked for
// when it refused the request for load, else 0.
func (p *pool) request(ctx context.Context, rec *record.Recorder, phase string, i int, due time.Time) time.Duration {
	clk := p.dc.clock
	a := p.dc.plan.spreadAct(i)
	rec.Begin()
	c := p.pick()
	if c == nil {
		now := clk.Now()
		rec.End(record.Sample{Op: a.do, Crit: a.critNm, Class: record.Lost, Reason: LostNoConn, Due: due, Sent: now, Done: now})
		return 0
	}
	f, ferr := p.frame(a, phase, i)
	if ferr != nil {
		now := clk.Now()
		rec.End(record.Sample{Op: a.do, Crit: a.critNm, Class: record.Failed, Reason: "bad_template", Due: due, Sent: now, Done: now})
		return 0
	}
	rctx, cancel := context.WithTimeout(ctx, p.wait())
	sent := clk.Now()
	reply, err := c.Do(rctx, f)
	done := clk.Now()
	cancel()
	if err == nil {
		err = checkReply(reply, a)
	}
	if unhinted(err) {
		rec.Add("unhinted_refusals", 1)
	}
	o := record.Classify(err)
	rec.End(record.Sample{Op: a.do, Crit: a.critNm, Class: o.Class, Reason: o.Reason, Due: due, Sent: sent, Done: done})
	if o.Class == record.Refused {
		return client.RetryAfter(err)
	}
	return 0
}

// pick returns the next connection that is still up, or nil if none is.
func (p *pool) pick() *client.Client {
	n := len(p.conns)
	for range n {
		c := p.conns[int(p.next.Add(1)-1)%n]
		select {
		case <-c.Done():
		default:
			return c
		}
	}
	return nil
}

// frame builds request i of phase: its action and request (the
// template's {{seq}} is i, its {{job_id}} "pool-RUN-PHASE-i", unique in
// the run), asking for the class the mix gives it, with the request
// timeout as the server's budget.
func (p *pool) frame(a *act, phase string, i int) (*leveev2.ClientFrame, error) {
	var rnd *mrand.Rand
	if a.fixed == nil && a.tmpl.Draws() {
		rnd = mrand.New(mrand.NewPCG(p.dc.seed, uint64(i)))
	}
	id := "pool-" + p.dc.runID + "-" + phase + "-" + strconv.Itoa(i)
	_, req, err := a.build(reqtmpl.Vars{Player: id, Seq: int64(i), Job: id, Run: p.dc.runID}, rnd)
	if err != nil {
		return nil, err
	}
	return &leveev2.ClientFrame{Criticality: a.crit, TimeoutMs: uint32(p.dc.plan.timeout / time.Millisecond),
		Action: a.do, Request: req}, nil
}

// checkReply says whether f is a reply to action a.
func checkReply(f *leveev2.ServerFrame, a *act) error {
	if _, ok := f.GetPayload().(*leveev2.ServerFrame_Reply); !ok {
		return fmt.Errorf("%w: want a %s reply, got %T", client.ErrUnexpectedReply, a.do, f.GetPayload())
	}
	return nil
}

// dialPool dials the pool of the run's plan (in this process: a pool is
// one load process's).
func (r *run) dialPool(ctx context.Context) error {
	if r.cfg.Workers > 1 {
		return fmt.Errorf("engine: scenario %s: a pool runs in one load process, not %d workers", r.p.name, r.cfg.Workers)
	}
	dc, err := r.driverConfig(0, 1, r.sourceAddr(0))
	if err != nil {
		return err
	}
	r.pool = dialPool(ctx, dc, r.p.pool)
	return nil
}
