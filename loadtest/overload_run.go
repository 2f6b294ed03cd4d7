package loadtest

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"levee/client"
	"levee/internal/clock"
	"levee/internal/priority"
	"levee/loadtest/record"
	leveev1 "levee/proto/leveev1"
)

// Phase names.
const (
	PhaseCapacity = "capacity"
	PhaseBaseline = "baseline"
	PhaseOverload = "overload"
	PhaseSearch   = "search" // the capacity search's steps: search1, search2, ...
)

// LostNoConn is the lost reason of a request that found no live connection.
const LostNoConn = "no_connection"

// dialParallel bounds the dials in progress while the pool connects.
const dialParallel = 32

// RunOverload plays the overload scenario (see OverloadConfig) and reports.
// It returns an error only when the run could not start (invalid config, a
// target that is not loopback); an interrupted run still reports.
//
// Bounds: the phases last CapacityTime, PhaseTime and OverloadTime, each
// followed by at most request timeout + ReplyGrace for the last replies;
// no phase sends more than MaxRate requests per second of its window, and at
// most MaxOutstanding (or the derived bound) are in flight.
func (r *Runner) RunOverload(ctx context.Context, cfg OverloadConfig) (*OverloadReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !r.cfg.AllowNonlocal {
		if err := CheckTarget(ctx, r.cfg.GateURL, r.resolver); err != nil {
			return nil, err
		}
		if err := checkMetricsTargets(ctx, cfg.MetricsTargets, r.resolver); err != nil {
			return nil, err
		}
	}
	runID := r.cfg.RunID
	if runID == "" {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(randomUint64()))
		runID = hex.EncodeToString(b[:])
	}
	rep := &OverloadReport{
		Scenario: "overload", RunID: runID, Target: r.cfg.GateURL, Started: time.Now(),
		Conns: cfg.Conns, Units: cfg.Units, Ticks: cfg.Ticks, CriticalFraction: cfg.CriticalFraction,
		RequestTimeout: r.cfg.RequestTimeout, ReplyGrace: cfg.ReplyGrace,
		BaselineFactor: cfg.BaselineFactor, OverloadFactor: cfg.OverloadFactor,
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		DialFailures: map[string]int{}, Disconnects: map[string]int{},
	}
	r.log.Info("overload test starting", "run_id", runID, "conns", cfg.Conns, "target", r.cfg.GateURL,
		"units", cfg.Units, "ticks", cfg.Ticks, "critical_fraction", cfg.CriticalFraction)

	clk := clock.Real{}
	rec, stopRecord := cfg.RunFile.begin(ctx, clk, runID)
	defer stopRecord()
	sampler := newProcSampler(cfg.MetricsTargets, r.cfg.AllowNonlocal, 900*time.Millisecond)
	if rec != nil {
		sampler.levels = func(lv map[string]float64) {
			for k, v := range lv {
				rec.Set(k, v)
			}
		}
	}
	sctx, cancelSampler := context.WithCancel(ctx)
	samplerDone := sampler.run(sctx, cfg.MetricsEvery)
	var stopOnce sync.Once
	stopSampler := func() {
		stopOnce.Do(func() {
			cancelSampler()
			<-samplerDone
			rep.Processes = sampler.report()
		})
	}
	defer stopSampler()

	secret := []byte(r.cfg.TokenSecret)
	exp := time.Now().Add(cfg.CapacityTime + cfg.PhaseTime + cfg.OverloadTime + 3*(r.cfg.RequestTimeout+cfg.ReplyGrace) + 10*time.Minute)
	pool := r.dialPool(ctx, cfg, runID, secret, exp, rep)
	defer pool.close()
	r.log.Info("connections up", "connected", rep.Connected, "failed", Sum(rep.DialFailures))

	o := &overloadRun{r: r, cfg: cfg, pool: pool, runID: runID, clk: clk, sampler: sampler, rec: rec}
	if rep.Connected > 0 && ctx.Err() == nil {
		o.phases(ctx, rep)
	}

	for _, c := range pool.conns {
		select {
		case <-c.Done():
			rep.Disconnects[disconnectReason(c.Err())]++
		default:
		}
		s := c.Stats()
		rep.Frames += s.Sent
		rep.Replies += s.Replies
		rep.LateReplies += s.Late
		rep.UnexpectedReplies += s.Unexpected
	}
	rep.Interrupted = ctx.Err() != nil
	rep.Elapsed = time.Since(rep.Started)
	stopSampler()
	stopRecord()
	cfg.RunFile.setCapacity(rep.Capacity)
	rep.Evaluate(cfg)
	r.log.Info("overload test done", "capacity", rep.Capacity, "passed", rep.Passed,
		"elapsed", rep.Elapsed.Round(time.Millisecond).String())
	return rep, nil
}

// overloadRun is one run's shared state.
type overloadRun struct {
	r       *Runner
	cfg     OverloadConfig
	pool    *connPool
	runID   string
	clk     clock.Clock
	sampler *procSampler
	rec     *record.Recorder // nil: no run file
}

// phases runs capacity, baseline and overload in turn, filling rep.
func (o *overloadRun) phases(ctx context.Context, rep *OverloadReport) {
	rep.CapacityPhase = o.closedLoop(ctx, PhaseCapacity, o.cfg.CapacityConcurrency, o.cfg.CapacityTime)
	rep.CapacityClosed = rep.CapacityPhase.Goodput
	rep.Capacity = rep.CapacityClosed
	if float64(rep.CapacityPhase.Sent) >= o.cfg.MaxRate*o.cfg.CapacityTime.Seconds() {
		rep.RateCapped = true // the closed loop spent its budget: C is a lower bound
	}
	if rep.Capacity <= 0 || ctx.Err() != nil {
		return
	}
	rep.Capacity, rep.CapacitySteps, rep.CapacitySearchEnd = o.searchCapacity(ctx, rep.CapacityClosed)
	for _, st := range rep.CapacitySteps {
		rep.RateCapped = rep.RateCapped || st.Rate >= o.cfg.MaxRate
	}
	if rep.Capacity <= 0 || ctx.Err() != nil {
		return
	}
	rate, capped := o.rate(o.cfg.BaselineFactor * rep.Capacity)
	rep.RateCapped = rep.RateCapped || capped
	rep.BaselinePhase = o.openLoop(ctx, PhaseBaseline, rate, o.cfg.PhaseTime)
	if ctx.Err() != nil {
		return
	}
	rate, capped = o.rate(o.cfg.OverloadFactor * rep.Capacity)
	rep.RateCapped = rep.RateCapped || capped
	rep.OverloadPhase = o.openLoop(ctx, PhaseOverload, rate, o.cfg.OverloadTime)
}

func (o *overloadRun) rate(want float64) (float64, bool) {
	if want > o.cfg.MaxRate {
		return o.cfg.MaxRate, true
	}
	return want, false
}

// wait is the longest a request waits for its reply.
func (o *overloadRun) wait() time.Duration { return o.r.cfg.RequestTimeout + o.cfg.ReplyGrace }

func (o *overloadRun) setPhase(name string) {
	o.sampler.setPhase(name)
	o.cfg.RunFile.phase(name)
}

// maxPoliteWait bounds how long a closed-loop worker honours a refusal's
// retry_after.
const maxPoliteWait = time.Second

// closedLoop keeps k requests outstanding until d has passed (or the
// phase's request budget, MaxRate × d, is spent). A worker whose request
// was refused waits the retry_after it was given (at most maxPoliteWait)
// before its next one, as a client honouring backpressure does; otherwise
// the quick refusals of a protected cluster would spin the loop, and its
// served rate would count the cheap requests that are never refused more
// than the rest.
func (o *overloadRun) closedLoop(ctx context.Context, name string, k int, d time.Duration) *PhaseReport {
	o.setPhase(name)
	defer o.setPhase("")
	start := time.Now()
	end := start.Add(d)
	budget := int64(o.cfg.MaxRate * d.Seconds())
	t := newTally(end, 4096)
	stopProgress := o.progress(ctx, name, t)
	pctx, cancel := context.WithDeadline(ctx, end)
	var seq atomic.Int64
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			for pctx.Err() == nil {
				i := seq.Add(1) - 1
				if i >= budget {
					return
				}
				if ra := o.request(ctx, t, name, int(i), time.Time{}); ra > 0 {
					o.pause(pctx, min(ra, maxPoliteWait))
				}
			}
		})
	}
	wg.Wait()
	cancel()
	stopProgress()
	p := &PhaseReport{Name: name, Mode: "closed", Concurrency: k, Duration: d, Started: start}
	p.Drained = max(time.Since(end), 0)
	t.fill(p)
	o.r.log.Info("phase done", "phase", name, "sent", p.Sent, "served", p.Served, "goodput", p.Goodput,
		"p99_ms", p.Latency.P99.Seconds()*1000)
	return p
}

// openLoop offers rate requests per second for d, whatever the replies do.
func (o *overloadRun) openLoop(ctx context.Context, name string, rate float64, d time.Duration) *PhaseReport {
	o.setPhase(name)
	defer o.setPhase("")
	start := o.clk.Now()
	end := start.Add(d)
	planned := Planned(rate, d)
	t := newTally(end, planned)
	stopProgress := o.progress(ctx, name, t)
	sem := make(chan struct{}, outstandingCap(rate, o.wait(), o.cfg.MaxOutstanding))
	semWaits := 0
	var wg sync.WaitGroup
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
		due := Due(start, i, rate)
		wg.Go(func() {
			defer func() { <-sem }()
			o.request(ctx, t, name, i, due)
		})
		return true
	}
	disp := dispatcher{clk: o.clk, start: start, end: end, rate: rate, planned: planned, lateAfter: o.cfg.LateAfter, issue: issue}
	st := disp.run(ctx)
	wg.Wait()
	stopProgress()
	p := &PhaseReport{Name: name, Mode: "open", TargetRate: rate, Duration: d, Started: start,
		Dispatch: st, SemaphoreWaits: semWaits}
	p.Drained = max(o.clk.Now().Sub(end), 0)
	t.fill(p)
	o.r.log.Info("phase done", "phase", name, "rate", rate, "sent", p.Sent, "unsent", st.Unsent, "late", st.Late,
		"served", p.Served, "goodput", p.Goodput, "p99_ms", p.Latency.P99.Seconds()*1000,
		"p99_from_due_ms", p.LatencyFromDue.P99.Seconds()*1000)
	return p
}

// pause waits d on the run's clock, or until ctx ends.
func (o *overloadRun) pause(ctx context.Context, d time.Duration) {
	t := o.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
}

// request sends request i of a phase on the next live connection and
// records its one outcome and its times on the run's clock: due is when
// the open-loop schedule said to send it (zero in a closed loop). It
// returns the retry delay the cluster asked for when it refused the request
// for load, else 0.
func (o *overloadRun) request(ctx context.Context, t *tally, phase string, i int, due time.Time) time.Duration {
	crit := critical(i, o.cfg.CriticalFraction)
	t.begin(crit)
	if o.rec != nil {
		o.rec.Begin()
	}
	c := o.pool.pick()
	if c == nil {
		now := o.clk.Now()
		o.end(t, crit, Outcome{Class: ClassLost, Reason: LostNoConn}, stamp{due, now, now})
		return 0
	}
	f := o.frame(phase, i, crit)
	rctx, cancel := context.WithTimeout(ctx, o.wait())
	s := stamp{due: due, sent: o.clk.Now()}
	reply, err := c.Do(rctx, f)
	s.done = o.clk.Now()
	cancel()
	if err == nil {
		err = checkReply(reply, crit)
	}
	out := Classify(err)
	o.end(t, crit, out, s)
	if out.Class == ClassOverload {
		return client.RetryAfter(err)
	}
	return 0
}

// end records a request's outcome in the phase's tally and the run's
// recorder.
func (o *overloadRun) end(t *tally, crit bool, out Outcome, s stamp) {
	t.end(crit, out, s)
	if o.rec == nil {
		return
	}
	op, c := "battle", priority.Default.String()
	if crit {
		op, c = "purchase", priority.Critical.String()
	}
	o.rec.End(recSample(op, c, out, s.due, s.sent, s.done))
}

// frame builds request i: a purchase or a battle with a battle id unique in
// the run, each asking for the class the gate's policy gives it (critical,
// default), which also orders them in the SDK's pacer. The server's budget
// is the request timeout.
func (o *overloadRun) frame(phase string, i int, crit bool) *leveev1.ClientFrame {
	ms := uint32(o.r.cfg.RequestTimeout / time.Millisecond)
	if crit {
		return &leveev1.ClientFrame{
			Criticality: priority.Critical.Proto(),
			TimeoutMs:   ms,
			Payload:     &leveev1.ClientFrame_BuyItem{BuyItem: &leveev1.BuyItemRequest{ItemId: o.cfg.Item, Quantity: 1}},
		}
	}
	return &leveev1.ClientFrame{
		Criticality: priority.Default.Proto(),
		TimeoutMs:   ms,
		Payload: &leveev1.ClientFrame_StartBattle{StartBattle: &leveev1.StartBattleRequest{
			BattleId: "ov-" + o.runID + "-" + idTag(phase) + strconv.Itoa(i),
			Units:    o.cfg.Units,
			Ticks:    o.cfg.Ticks,
		}},
	}
}

// idTag is the phase's part of a battle id: its initial, or for a search
// step "s<step>-".
func idTag(phase string) string {
	if n, ok := strings.CutPrefix(phase, PhaseSearch); ok {
		return "s" + n + "-"
	}
	return phase[:1]
}

func checkReply(f *leveev1.ServerFrame, crit bool) error {
	if crit && f.GetBuyItem() == nil {
		return fmt.Errorf("%w: want buy_item, got %T", client.ErrUnexpectedReply, f.GetPayload())
	}
	if !crit && f.GetBattle() == nil {
		return fmt.Errorf("%w: want battle, got %T", client.ErrUnexpectedReply, f.GetPayload())
	}
	return nil
}

// progress logs the phase's counts every ProgressEvery until the returned
// stop is called (which waits for the logger goroutine to end).
func (o *overloadRun) progress(ctx context.Context, name string, t *tally) (stop func()) {
	every := o.r.cfg.ProgressEvery
	if every <= 0 {
		return func() {}
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tk.C:
				sent, answered, out := t.counts()
				o.r.log.Info("progress", "phase", name, "sent", sent, "answered", answered, "outstanding", out,
					"goroutines", runtime.NumGoroutine())
			}
		}
	}()
	return func() { cancel(); <-done }
}

// connPool is the run's connections, used round robin.
type connPool struct {
	conns []*client.Client
	next  atomic.Uint64
}

// pick returns the next connection that is still up, or nil if none is.
func (p *connPool) pick() *client.Client {
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

func (p *connPool) close() {
	var wg sync.WaitGroup
	sem := make(chan struct{}, dialParallel)
	for _, c := range p.conns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c.Close()
		})
	}
	wg.Wait()
}

// dialPool connects cfg.Conns bots, dialParallel at a time, with the SDK's
// own retries and pacing off (overloadOptions) so that the offered load is
// what the scenario says. Failures are counted in rep.
func (r *Runner) dialPool(ctx context.Context, cfg OverloadConfig, runID string, secret []byte, exp time.Time, rep *OverloadReport) *connPool {
	conns := make([]*client.Client, cfg.Conns)
	errs := make([]error, cfg.Conns)
	sem := make(chan struct{}, dialParallel)
	var wg sync.WaitGroup
	for n := range cfg.Conns {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[n] = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			conns[n], errs[n] = r.dialBot(ctx, botID(runID, n), n, secret, exp, overloadOptions())
		})
	}
	wg.Wait()
	p := &connPool{}
	for n, c := range conns {
		if errs[n] != nil {
			rep.DialFailures[dialReason(errs[n])]++
			if !errors.Is(errs[n], context.Canceled) {
				r.log.Debug("dial failed", "bot", botID(runID, n), "err", errs[n])
			}
			continue
		}
		p.conns = append(p.conns, c)
	}
	rep.Connected = len(p.conns)
	return p
}

// overloadOptions are the SDK options of the overload bots: no retries and
// no pacing, so that every request is sent once, when the schedule says.
func overloadOptions() client.Options {
	return client.Options{NoRetry: true, NoPacing: true}
}
