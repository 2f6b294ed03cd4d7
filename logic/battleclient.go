package logic

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// retry can be sent to a different instance than the first attempt, and
// its limiter.
type battleInstance struct {
	addr  string
	conn  *grpc.ClientConn
	rpc   leveev1.BattleClient
	limit battleLimiter
	gauge prometheus.Gauge // logic_battle_limit{instance}
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
// sent it: the instance is cooling until it has passed, the picker skips
// it, and when every instance is cooling a non-critical call is refused
// here, without an RPC (see battlePicker.pick). Pushback on also keeps an
// adaptive concurrency limit per instance (aimd): the picker passes over an
// instance with that many calls outstanding, so logic does not pile calls
// on a battle instance that can only refuse them. The limiters
// (battleLimiter, battlelimit.go) and the picker (battlePicker,
// battlepick.go) are pure; the client feeds them the outcomes of its calls
// and the time of its clock.
type battleClient struct {
	insts   []*battleInstance
	picker  battlePicker
	timeout time.Duration
	retry   *retryThrottle // nil: no retries (switched off, or one instance)
	clk     clock.Clock    // for cooling and round trips; set before use
	calls   *prometheus.CounterVec
	cooling prometheus.Counter // calls{cooling}
	retries *prometheus.CounterVec
	waits   *prometheus.CounterVec

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

// dialBattle builds the client, one ClientConn per address; they connect
// lazily. retry nil switches retries off; with one address they are off
// too, since there is no other instance to retry on. pushback switches the
// cooling of refusing instances on, on clk's time.
func dialBattle(addrs []string, timeout time.Duration, retry *retryThrottle, pushback bool, clk clock.Clock, m *tierMetrics) (*battleClient, error) {
	c := &battleClient{timeout: timeout, clk: clk,
		calls: m.battleCalls, cooling: m.battleCalls.WithLabelValues(outcomeCooling), retries: m.retries, waits: m.battleWaits}
	c.picker.pushback = pushback
	c.picker.failing = func(i int) bool { return c.insts[i].conn.GetState() == connectivity.TransientFailure }
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
		c.picker.limits = append(c.picker.limits, &in.limit)
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
// instances are cooling (see battlePicker.pick).
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
	in.limit.begin()
	start := c.clk.Now()
	rep, err := in.rpc.Simulate(ctx, req)
	in.limit.end()
	c.signalFreed()
	if err != nil {
		derr, pushback := battleError(err)
		c.calls.WithLabelValues(battleOutcome(derr)).Inc()
		if c.picker.pushback && retryable(derr) {
			in.gauge.Set(in.limit.refused(c.clk.Now(), pushback))
		}
		return nil, pushback, derr
	}
	if c.picker.pushback {
		now := c.clk.Now()
		// A battle's cost grows with its units and the ticks it lasted.
		work := float64(len(req.GetTeamA())+len(req.GetTeamB())) * float64(rep.GetTicks())
		in.gauge.Set(in.limit.succeeded(now, now.Sub(start), work))
	}
	c.calls.WithLabelValues("ok").Inc()
	return rep, 0, nil
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

// pick is the picker's choice at the client's now (see battlePicker.pick).
func (c *battleClient) pick(avoid int, critical bool) (int, time.Duration, bool) {
	return c.picker.pick(c.clk.Now(), avoid, critical)
}

// allCooling says whether every instance is cooling at now, and if so how
// long until the first is ready. Always false with pushback off.
func (c *battleClient) allCooling(now time.Time) (time.Duration, bool) {
	return c.picker.allCooling(now)
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
