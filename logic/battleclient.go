package logic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"levee/internal/apperr"
	"levee/internal/clock"
	"levee/internal/priority"
	leveev1 "levee/proto/leveev1"
)

// simulator is what the shards need from the battle tier: one simulation
// for a caller of class c, its error as a domain error, and the retry delay
// the callee asked for.
type simulator interface {
	Simulate(ctx context.Context, req *leveev1.SimulateRequest, c priority.Class) (*leveev1.SimulateReply, time.Duration, error)
}

var _ simulator = (*battleClient)(nil)

// battleInstance is one battle address with its own connection, so that a
// retry can be sent to a different instance than the first attempt.
type battleInstance struct {
	addr string
	conn *grpc.ClientConn
	rpc  leveev1.BattleClient
	// coolUntil (Unix ns on the client's clock) is when the instance's last
	// refusal's pushback ends; it is cooling while now < coolUntil.
	coolUntil atomic.Int64
	// inflight is the calls outstanding to this instance; with pushback on
	// the picker passes over the instance while inflight >= its limit.
	inflight atomic.Int64
	limit    aimd
	gauge    prometheus.Gauge // logic_battle_limit{instance}
}

// aimd is an instance's adaptive concurrency limit, TCP style: each
// success adds 1/limit (about +1 per limit's worth of successes), each
// refusal multiplies it by aimdDecrease. It keeps the calls logic sends an
// instance near what the instance accepts, so that battle refuses rarely
// and nothing queues there.
//
// With a tolerance (> 0; -battle-rtt-tolerance) it also listens to delay,
// the way TCP Vegas or Envoy's adaptive concurrency do, but per unit of
// work, because a battle's round trip grows with its size (units × ticks
// fought): every rttInterval it takes the interval's round trips over
// their work (total time / total work of the calls that succeeded in it)
// and compares that with the smallest such figure of the last intervals
// (over about rttWindow). Above tolerance × that, the instance is running
// its work slower than it can (its CPUs are contended, by its own
// simulations or by neighbours it cannot see), so the limit shrinks by
// rttDecrease and does not grow until an interval is back within
// tolerance. Calls the limit holds back wait briefly at logic
// (-battle-wait) or are refused fast, instead of running slowly in a
// crowd: the battles that are served stay fast.
type aimd struct {
	mu sync.Mutex
	v  float64

	tolerance float64 // 0: no delay signal
	// The smallest interval figure (ns per unit of work) of the current
	// and the previous half-window; curStart is when the current began.
	minCur, minPrev float64
	curStart        time.Time
	// The current interval's successes.
	rtt       time.Duration
	work      float64
	n         int
	ivStart   time.Time
	congested bool // the last complete interval was above tolerance
}

const (
	aimdInitial  = 8
	aimdMin      = 1
	aimdMax      = 256
	aimdDecrease = 0.75
	rttDecrease  = 0.9
	rttInterval  = 100 * time.Millisecond
	rttWindow    = 60 * time.Second
	rttMinCalls  = 3 // an interval with fewer successes says nothing
)

func (a *aimd) get() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.v == 0 {
		a.v = aimdInitial
	}
	return int64(a.v)
}

// success records a call that succeeded at now after rtt, having done work
// (any measure proportional to its cost; 0 when unknown, which feeds no
// delay sample), and returns the limit.
func (a *aimd) success(now time.Time, rtt time.Duration, work float64) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.v == 0 {
		a.v = aimdInitial
	}
	if a.tolerance > 0 && work > 0 {
		a.observe(now, rtt, work)
	}
	if !a.congested {
		a.v = min(a.v+1/a.v, aimdMax)
	}
	return a.v
}

// observe feeds the delay signal; a.mu is held.
func (a *aimd) observe(now time.Time, rtt time.Duration, work float64) {
	if a.ivStart.IsZero() {
		a.ivStart = now
	}
	a.rtt += rtt
	a.work += work
	a.n++
	if now.Sub(a.ivStart) < rttInterval {
		return
	}
	if a.n >= rttMinCalls {
		per := float64(a.rtt) / a.work
		if a.curStart.IsZero() || now.Sub(a.curStart) >= rttWindow/2 {
			a.minPrev, a.minCur, a.curStart = a.minCur, per, now
		} else {
			a.minCur = min(a.minCur, per)
		}
		base := a.minCur
		if a.minPrev > 0 {
			base = min(base, a.minPrev)
		}
		a.congested = base > 0 && per > a.tolerance*base
		if a.congested {
			a.v = max(a.v*rttDecrease, aimdMin)
		}
	}
	a.rtt, a.work, a.n, a.ivStart = 0, 0, 0, now
}

// refused records a refusal, and returns the limit.
func (a *aimd) refused() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.v == 0 {
		a.v = aimdInitial
	}
	a.v = max(a.v*aimdDecrease, aimdMin)
	return a.v
}

// battleClient calls the battle tier round robin over its instances
// (skipping those whose connection is in TRANSIENT_FAILURE while another is
// not), and retries a call that failed with RESOURCE_EXHAUSTED or
// UNAVAILABLE once, on another instance, when the retry throttle allows.
//
// Logic is the one layer that retries: gate does not retry logic, and the
// client SDK retries only what the gate refused with busy/server_full.
// Retries are done here rather than by gRPC's retryPolicy because gRPC's
// round_robin cannot promise that the retry goes to another instance, and
// because gRPC would wait out battle's grpc-retry-pushback-ms (100 ms) before
// retrying: that pushback speaks for the instance that sent it, and the
// retry goes elsewhere at once. The throttle is gRPC's retryThrottling
// token bucket (see retryThrottle).
//
// With pushback on, the client honours that pushback for the instance that
// sent it: the instance is cooling until it has passed, the picker skips it,
// and when every instance is cooling a non-critical call is refused here,
// without an RPC (see pick). Pushback on also keeps an adaptive concurrency
// limit per instance (aimd): the picker passes over an instance with that
// many calls outstanding, so logic does not pile calls on a battle instance
// that can only refuse them.
type battleClient struct {
	insts    []*battleInstance
	next     atomic.Uint64 // round robin of first attempts
	rnext    atomic.Uint64 // round robin of retries over the other instances
	timeout  time.Duration
	retry    *retryThrottle // nil: no retries (switched off, or one instance)
	pushback bool           // cool instances that refuse (-battle-pushback)
	clk      clock.Clock    // for cooling; set before use
	calls    *prometheus.CounterVec
	cooling  prometheus.Counter // calls{cooling}
	retries  *prometheus.CounterVec
	waits    *prometheus.CounterVec

	// slotWait and maxWaiters (set before use; -battle-wait and
	// -battle-waiters) let a first attempt that finds every instance at its
	// adaptive limit wait up to slotWait for a call to end, with at most
	// maxWaiters waiting at once, instead of being refused at once. Without
	// that short line an instance's slot that frees stays idle until the
	// next request happens to arrive, and under a surge the refusals'
	// cooling (here and at the gate) makes that wait long: the battle tier
	// then serves less than it can. slotWait 0 refuses at once.
	slotWait   time.Duration
	maxWaiters int64
	waiters    atomic.Int64
	// freed is closed (and cleared) when a call ends while calls wait.
	freed atomic.Pointer[chan struct{}]
}

// Bounds of the cooling that a refusal starts: the pushback the instance
// sent, or defaultCooling when it sent none (an unreachable instance), at
// most maxCooling whatever it asks for.
const (
	// fullWait is the retry delay passed on when every instance is at its
	// adaptive concurrency limit. The gate cools the shard's battles for
	// it, so it is kept short: a limit frees a slot within a battle or two,
	// and at 50 ms (100 ms worse) the overload run's battle instances sat
	// idle for want of calls while the CPU had room (battles only at 10 x
	// C: 0.84 x C served at 50 ms, 0.70 at 100, 0.97 at 25).
	fullWait       = 25 * time.Millisecond
	defaultCooling = 100 * time.Millisecond
	maxCooling     = maxRetryAfter
)

// dialBattle builds the client, one ClientConn per address; they connect
// lazily. retry nil switches retries off; with one address they are off
// too, since there is no other instance to retry on. pushback switches the
// cooling of refusing instances on, on clk's time.
func dialBattle(addrs []string, timeout time.Duration, retry *retryThrottle, pushback bool, clk clock.Clock, m *tierMetrics) (*battleClient, error) {
	c := &battleClient{timeout: timeout, pushback: pushback, clk: clk,
		calls: m.battleCalls, cooling: m.battleCalls.WithLabelValues(outcomeCooling), retries: m.retries, waits: m.battleWaits}
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		conn, err := grpc.NewClient("passthrough:///"+a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			_ = c.close()
			return nil, fmt.Errorf("-battle-addrs: %s: %w", a, err)
		}
		in := &battleInstance{addr: a, conn: conn, rpc: leveev1.NewBattleClient(conn), gauge: m.battleLimit.WithLabelValues(a)}
		in.gauge.Set(aimdInitial)
		c.insts = append(c.insts, in)
	}
	if len(c.insts) > 1 {
		c.retry = retry
	}
	return c, nil
}

// Simulate calls one battle instance, and on a retryable failure maybe a
// second one, within the caller's remaining deadline capped at the battle
// timeout (both attempts together). The caller's outgoing metadata (the
// criticality) goes with both attempts; cl decides what happens when
// instances are cooling (see pick).
func (c *battleClient) Simulate(ctx context.Context, req *leveev1.SimulateRequest, cl priority.Class) (*leveev1.SimulateReply, time.Duration, error) {
	critical := cl == priority.Critical
	first, wait, full := c.pick(-1, critical)
	if first < 0 && full {
		first, wait = c.awaitSlot(ctx)
	}
	if first < 0 {
		c.cooling.Inc()
		wait = ceilMillis(wait)
		return nil, wait, fmt.Errorf("battle: %w: every battle instance is cooling or at its concurrency limit; the first is ready in %v", apperr.ErrBusy, wait)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rep, pushback, err := c.attempt(ctx, first, req)
	if c.retry == nil {
		return rep, pushback, err
	}
	if err == nil {
		c.retry.success()
		return rep, 0, nil
	}
	if !retryable(err) {
		return nil, pushback, err
	}
	if !c.retry.failure() {
		c.retries.WithLabelValues(retryThrottled).Inc()
		return nil, pushback, err
	}
	if ctx.Err() != nil {
		return nil, pushback, err
	}
	second, wait, _ := c.pick(first, critical)
	if second < 0 {
		// Every other instance asked to be left alone for now: the
		// earliest any instance is ready is the retry delay to pass on.
		c.retries.WithLabelValues(retryCooling).Inc()
		if wait = ceilMillis(wait); pushback <= 0 || wait < pushback {
			pushback = wait
		}
		return nil, pushback, err
	}
	rep, pushback, err = c.attempt(ctx, second, req)
	switch {
	case err == nil:
		c.retry.success()
		c.retries.WithLabelValues(retryOK).Inc()
		return rep, 0, nil
	case retryable(err):
		c.retry.failure()
	}
	c.retries.WithLabelValues(retryFailed).Inc()
	return nil, pushback, err
}

// attempt is one call to instance i. A refusal (RESOURCE_EXHAUSTED or
// UNAVAILABLE) starts the instance's cooling when pushback is on.
func (c *battleClient) attempt(ctx context.Context, i int, req *leveev1.SimulateRequest) (*leveev1.SimulateReply, time.Duration, error) {
	in := c.insts[i]
	in.inflight.Add(1)
	start := c.clk.Now()
	rep, err := in.rpc.Simulate(ctx, req)
	in.inflight.Add(-1)
	c.signalFreed()
	if err != nil {
		derr, pushback := battleError(err)
		c.calls.WithLabelValues(battleOutcome(derr)).Inc()
		if c.pushback && retryable(derr) {
			c.cool(i, pushback)
			in.gauge.Set(in.limit.refused())
		}
		return nil, pushback, derr
	}
	if c.pushback {
		now := c.clk.Now()
		// A battle's cost grows with its units and the ticks it lasted.
		work := float64(len(req.GetTeamA())+len(req.GetTeamB())) * float64(rep.GetTicks())
		in.gauge.Set(in.limit.success(now, now.Sub(start), work))
	}
	c.calls.WithLabelValues("ok").Inc()
	return rep, 0, nil
}

// cool marks instance i as cooling for pushback from now (defaultCooling
// when it sent none, at most maxCooling). It never shortens a cooling
// already in force.
func (c *battleClient) cool(i int, pushback time.Duration) {
	if pushback <= 0 {
		pushback = defaultCooling
	}
	until := c.clk.Now().Add(min(pushback, maxCooling)).UnixNano()
	in := c.insts[i]
	for {
		old := in.coolUntil.Load()
		if old >= until || in.coolUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// Outcomes of logic_battle_waits_total.
const (
	waitSlot    = "slot"    // a slot freed in time
	waitTimeout = "timeout" // none did within -battle-wait (or the caller went)
	waitFull    = "full"    // -battle-waiters were waiting already
)

// awaitSlot waits, up to slotWait and while ctx lives, for an instance
// whose calls are below its limit, when fewer than maxWaiters wait
// already. It returns the instance, or -1 and the retry delay to pass on.
func (c *battleClient) awaitSlot(ctx context.Context) (int, time.Duration) {
	if c.slotWait <= 0 {
		return -1, fullWait
	}
	if c.waiters.Add(1) > c.maxWaiters {
		c.waiters.Add(-1)
		c.waits.WithLabelValues(waitFull).Inc()
		return -1, fullWait
	}
	defer c.waiters.Add(-1)
	t := c.clk.NewTimer(c.slotWait)
	defer t.Stop()
	for {
		// Take the channel before looking, so that a call ending after
		// the look closes the channel this waits on.
		freed := c.freedChan()
		i, wait, full := c.pick(-1, false)
		if i >= 0 {
			c.waits.WithLabelValues(waitSlot).Inc()
			return i, 0
		}
		if !full {
			// Every instance is cooling now: waiting for a slot is moot.
			c.waits.WithLabelValues(waitTimeout).Inc()
			return -1, wait
		}
		select {
		case <-freed:
		case <-t.C():
			c.waits.WithLabelValues(waitTimeout).Inc()
			return -1, fullWait
		case <-ctx.Done():
			c.waits.WithLabelValues(waitTimeout).Inc()
			return -1, fullWait
		}
	}
}

// freedChan returns the channel the next ending call closes.
func (c *battleClient) freedChan() chan struct{} {
	for {
		if p := c.freed.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		if c.freed.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// signalFreed wakes the calls waiting for a slot, if any.
func (c *battleClient) signalFreed() {
	if c.waiters.Load() == 0 {
		return
	}
	if p := c.freed.Swap(nil); p != nil {
		close(*p)
	}
}

// pick chooses an instance round robin: for a first attempt (avoid -1)
// any, for a retry one of the others (avoid is the first attempt's), with
// their own turns so that retries do not shift the first attempts' turns.
// It passes over a cooling instance, and over one in TRANSIENT_FAILURE when
// a later one is not. When every candidate is cooling or at its limit it
// returns the one whose cooling ends first for a critical call, and for any
// other -1 and how long until that end; full says that at least one of
// them was passed over only for being at its limit, so that a slot may
// free before that.
func (c *battleClient) pick(avoid int, critical bool) (int, time.Duration, bool) {
	n := len(c.insts)
	var start int
	if avoid < 0 || n == 1 {
		start = int((c.next.Add(1) - 1) % uint64(n))
	} else {
		start = (avoid + 1 + int((c.rnext.Add(1)-1)%uint64(n-1))) % n
	}
	var now int64
	if c.pushback {
		now = c.clk.Now().UnixNano()
	}
	fallback, coolest := -1, -1
	full := false
	var coolEnd int64
	for k := range n {
		i := (start + k) % n
		if i == avoid && n > 1 {
			continue
		}
		if c.pushback {
			in := c.insts[i]
			if u := in.coolUntil.Load(); u > now {
				if coolest < 0 || u < coolEnd {
					coolest, coolEnd = i, u
				}
				continue
			}
			if in.inflight.Load() >= in.limit.get() {
				// At its adaptive limit: as good as cooling for a
				// moment; a slot frees when one of its calls ends.
				full = true
				if u := now + int64(fullWait); coolest < 0 || u < coolEnd {
					coolest, coolEnd = i, u
				}
				continue
			}
		}
		if fallback < 0 {
			fallback = i
		}
		if c.insts[i].conn.GetState() != connectivity.TransientFailure {
			return i, 0, false
		}
	}
	if fallback >= 0 {
		return fallback, 0, false
	}
	if critical {
		return coolest, 0, full
	}
	return -1, time.Duration(coolEnd - now), full
}

// allCooling says whether every instance is cooling at now, and if so how
// long until the first is ready. Always false with pushback off.
func (c *battleClient) allCooling(now time.Time) (time.Duration, bool) {
	if !c.pushback {
		return 0, false
	}
	t := now.UnixNano()
	var first int64
	for i, in := range c.insts {
		u := in.coolUntil.Load()
		if u <= t {
			return 0, false
		}
		if i == 0 || u < first {
			first = u
		}
	}
	return time.Duration(first - t), true
}

func (c *battleClient) close() error {
	var errs []error
	for _, in := range c.insts {
		if err := in.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", in.addr, err))
		}
	}
	return errors.Join(errs...)
}

// retryable says whether a failed attempt may be retried on another
// instance: it was refused (RESOURCE_EXHAUSTED) or the instance could not
// be reached (UNAVAILABLE). Battles are deterministic and stateless, so a
// second try is safe.
func retryable(err error) bool {
	return errors.Is(err, apperr.ErrBusy) || errors.Is(err, apperr.ErrUnavailable)
}

// battleError turns a battle call's gRPC error into one of logic's domain
// errors, so that apperr.ToStatus maps it at the logic edge, and returns
// battle's retry delay. Both are read by apperr.FromStatus from the status
// details (or from the gRPC code of a status without them). Battle's
// overload is logic's BUSY, an instance that cannot be reached or is
// stopping is UNAVAILABLE (another may serve), a deadline stays one, and
// anything else is logic's fault (it sent a request battle could not
// serve): INTERNAL.
func battleError(err error) (error, time.Duration) {
	e := apperr.FromStatus(err)
	var base error
	switch {
	case apperr.Overload(e.Code):
		base = apperr.ErrBusy
	case errors.Is(e, apperr.ErrUnavailable), errors.Is(e, apperr.ErrShuttingDown):
		base = apperr.ErrUnavailable
	case errors.Is(e, apperr.ErrDeadline):
		base = apperr.ErrDeadline
	default:
		base = apperr.ErrInternal
	}
	if errors.Is(e, base) {
		return fmt.Errorf("battle: %w", e), e.RetryAfter
	}
	return fmt.Errorf("battle: %w: %s", base, e.Message), e.RetryAfter
}

// battleOutcome is the logic_battle_calls_total label for a battle error.
func battleOutcome(err error) string {
	switch {
	case errors.Is(err, apperr.ErrBusy):
		return "busy"
	case errors.Is(err, apperr.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, apperr.ErrDeadline), errors.Is(err, context.Canceled):
		return "deadline"
	default:
		return "error"
	}
}
