package logic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/tlsconf"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// jobRunner is what the shards need from the battle tier: one run of the
// game's job (its name, the key the game chose, the encoded request) for a
// caller of class c, the encoded reply, its error as a domain error, and
// the retry delay the callee asked for.
type jobRunner interface {
	Run(ctx context.Context, job, key string, req []byte, c priority.Class) ([]byte, time.Duration, error)
}

var _ jobRunner = (*battleClient)(nil)

// battleInstance is one battle address with its own connection, so that a
// retry can be sent to a different instance than the first attempt, and
// its limiter.
type battleInstance struct {
	addr  string
	conn  *grpc.ClientConn
	rpc   leveev2.JobsClient
	limit battleLimiter
	gauge prometheus.Gauge // logic_battle_limit{instance}

	// refs is the calls holding the instance (hold, release), plus
	// retiredRefs once it has left the set (retire): the connection closes
	// when the last call holding it lets go, never under a call.
	refs      atomic.Int64
	closeOnce sync.Once
	closeErr  error
	onClose   func(*battleInstance) // the client forgets it
}

// retiredRefs marks a retired instance's refs; far above any count of calls.
const retiredRefs = 1 << 40

// hold takes the instance for one call; false when it has been retired
// (a newer set, without it, is in place).
func (in *battleInstance) hold() bool {
	if in.refs.Add(1) >= retiredRefs {
		in.release()
		return false
	}
	return true
}

// release lets go of a hold; the last one of a retired instance closes it.
func (in *battleInstance) release() {
	if in.refs.Add(-1) == retiredRefs {
		_ = in.closeConn()
	}
}

// retire takes the instance out of service: no new holds, and the
// connection closes once the calls holding it have ended (at once when
// none does).
func (in *battleInstance) retire() {
	if in.refs.Add(retiredRefs) == retiredRefs {
		_ = in.closeConn()
	}
}

// closeConn closes the connection, once.
func (in *battleInstance) closeConn() error {
	in.closeOnce.Do(func() {
		in.closeErr = in.conn.Close()
		if in.onClose != nil {
			in.onClose(in)
		}
	})
	return in.closeErr
}

// battleSet is one immutable view of the battle instances and the picker
// over their limiters (in the same order). The client swaps in a new one
// when the instances change (-battle-addrs dns:///, battledns.go); a call
// works on the set it loaded, so indices never shift under it.
type battleSet struct {
	insts  []*battleInstance
	picker *battlePicker
}

// index is in's position in s, -1 when it is not in s.
func (s *battleSet) index(in *battleInstance) int {
	for i, x := range s.insts {
		if x == in {
			return i
		}
	}
	return -1
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
//
// The instances are a fixed list (dialBattle) or found in DNS and followed
// as they change (discover, battledns.go); either way they are read from a
// copy-on-write battleSet, so a call never takes a lock for them.
type battleClient struct {
	sec      grpcdial.Security         // how the instances are dialled
	set      atomic.Pointer[battleSet] // never nil
	pushback bool
	// tolerance is -battle-rtt-tolerance, for every instance's aimd; set
	// with setRTTTolerance before use.
	tolerance float64
	timeout   time.Duration
	retry     *retryThrottle // nil: no retries (switched off, or one fixed instance)
	clk       clock.Clock    // for cooling and round trips; set before use
	calls     *prometheus.CounterVec
	cooling   prometheus.Counter // calls{cooling}
	retries   *prometheus.CounterVec
	waits     *prometheus.CounterVec
	limits    *prometheus.GaugeVec   // logic_battle_limit
	instances prometheus.Gauge       // logic_battle_instances
	resolves  *prometheus.CounterVec // logic_battle_resolve_total

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

	// Discovery (nil, nil and empty with a fixed list): the re-resolution
	// goroutine and the connection watchers run under ctx and are counted
	// in wg; close cancels and waits for them. kick asks for an early
	// lookup.
	disc   *battleDiscovery
	stop   context.CancelFunc
	wg     sync.WaitGroup
	kickCh chan struct{}

	mu   sync.Mutex
	open map[*battleInstance]struct{} // connections not closed yet
}

// newBattleClient is a client without instances; dialBattle or discover
// gives it some.
func newBattleClient(sec grpcdial.Security, timeout time.Duration, retry *retryThrottle, pushback bool, clk clock.Clock, m *tierMetrics) *battleClient {
	c := &battleClient{sec: sec, timeout: timeout, retry: retry, pushback: pushback, clk: clk,
		calls: m.battleCalls, cooling: m.battleCalls.WithLabelValues(outcomeCooling), retries: m.retries, waits: m.battleWaits,
		limits: m.battleLimit, instances: m.battleInstances, resolves: m.battleResolves, open: map[*battleInstance]struct{}{}}
	c.set.Store(c.newSet(nil, nil))
	return c
}

// dialBattle builds the client, one ClientConn per address; they connect
// lazily. retry nil switches retries off; with one address they are off
// too, since there is no other instance to retry on. pushback switches the
// cooling of refusing instances on, on clk's time.
func dialBattle(sec grpcdial.Security, addrs []string, timeout time.Duration, retry *retryThrottle, pushback bool, clk clock.Clock, m *tierMetrics) (*battleClient, error) {
	c := newBattleClient(sec, timeout, retry, pushback, clk, m)
	var insts []*battleInstance
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		in, err := c.newInstance(a)
		if err != nil {
			_ = c.close()
			return nil, fmt.Errorf("-battle-addrs: %s: %w", a, err)
		}
		insts = append(insts, in)
	}
	c.set.Store(c.newSet(insts, nil))
	c.instances.Set(float64(len(insts)))
	if len(insts) <= 1 {
		c.retry = nil
	}
	return c, nil
}

// newInstance dials addr (lazily) and starts its limit gauge.
func (c *battleClient) newInstance(addr string) (*battleInstance, error) {
	conn, err := c.sec.Dial(addr, tlsconf.RoleBattle)
	if err != nil {
		return nil, err
	}
	in := &battleInstance{addr: addr, conn: conn, rpc: leveev2.NewJobsClient(conn), gauge: c.limits.WithLabelValues(addr), onClose: c.forget}
	in.limit.adaptive.tolerance = c.tolerance
	in.gauge.Set(aimdInitial)
	c.mu.Lock()
	c.open[in] = struct{}{}
	c.mu.Unlock()
	return in, nil
}

// forget drops a closed instance from the ones close must close.
func (c *battleClient) forget(in *battleInstance) {
	c.mu.Lock()
	delete(c.open, in)
	c.mu.Unlock()
}

// newSet is the set of insts, its picker taking over old's round robin.
func (c *battleClient) newSet(insts []*battleInstance, old *battleSet) *battleSet {
	p := &battlePicker{pushback: c.pushback, limits: make([]*battleLimiter, len(insts))}
	for i, in := range insts {
		p.limits[i] = &in.limit
	}
	p.failing = func(i int) bool { return insts[i].conn.GetState() == connectivity.TransientFailure }
	if old != nil {
		p.next.Store(old.picker.next.Load())
		p.rnext.Store(old.picker.rnext.Load())
	}
	return &battleSet{insts: insts, picker: p}
}

// setRTTTolerance sets -battle-rtt-tolerance for every instance, present
// and future; before use (and before discover).
func (c *battleClient) setRTTTolerance(t float64) {
	c.tolerance = t
	for _, in := range c.set.Load().insts {
		in.limit.adaptive.tolerance = t
	}
}

// errNoBattleInstance: DNS has not given any battle instance yet.
var errNoBattleInstance = fmt.Errorf("battle: %w: no battle instance known yet (-battle-addrs resolved to none)", apperr.ErrUnavailable)

// Run runs a job on one battle instance, and on a retryable failure maybe a
// second one, within the caller's remaining deadline capped at the battle
// timeout (both attempts together). The caller's outgoing metadata (the
// criticality) goes with both attempts; cl decides what happens when
// instances are cooling (see battlePicker.pick).
func (c *battleClient) Run(ctx context.Context, job, key string, request []byte, cl priority.Class) ([]byte, time.Duration, error) {
	req := &leveev2.JobRequest{Job: job, Key: key, Request: request}
	critical := cl == priority.Critical
	first, wait, full := c.choose(nil, critical)
	if first == nil && full {
		first, wait = c.awaitSlot(ctx)
	}
	if first == nil {
		if len(c.set.Load().insts) == 0 {
			c.kick()
			return nil, 0, errNoBattleInstance
		}
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
	if !retryable(err) || !c.hasOther(first) {
		return nil, pushback, err
	}
	if !c.retry.failure() {
		c.retries.WithLabelValues(retryThrottled).Inc()
		return nil, pushback, err
	}
	if ctx.Err() != nil {
		return nil, pushback, err
	}
	second, wait, _ := c.choose(first, critical)
	if second == nil {
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

// hasOther says whether the current set has an instance besides in (with
// a fixed list of two or more, always).
func (c *battleClient) hasOther(in *battleInstance) bool {
	s := c.set.Load()
	return len(s.insts) > 1 || (len(s.insts) == 1 && s.insts[0] != in)
}

// choose picks an instance of the current set (see battlePicker.pick; for
// a retry, avoid is the first attempt's instance) and holds it for one
// call, which attempt releases. nil: none; wait and full as pick says.
func (c *battleClient) choose(avoid *battleInstance, critical bool) (*battleInstance, time.Duration, bool) {
	for {
		s := c.set.Load()
		n := len(s.insts)
		a := -1
		if avoid != nil {
			a = s.index(avoid)
		}
		if n == 0 || (n == 1 && a == 0) {
			return nil, 0, false
		}
		i, wait, full := s.picker.pick(c.clk.Now(), a, critical)
		if i < 0 {
			return nil, wait, full
		}
		if in := s.insts[i]; in.hold() {
			return in, 0, false
		}
		// in was retired after s was loaded, so a newer set is in
		// place: pick again from it.
	}
}

// attempt is one call to in, which choose holds; attempt lets go of it. A
// refusal (RESOURCE_EXHAUSTED or UNAVAILABLE) starts the instance's
// cooling when pushback is on; an unreachable instance asks discovery for
// an early lookup.
func (c *battleClient) attempt(ctx context.Context, in *battleInstance, req *leveev2.JobRequest) ([]byte, time.Duration, error) {
	defer in.release()
	in.limit.begin()
	start := c.clk.Now()
	rep, err := in.rpc.Run(ctx, req)
	in.limit.end()
	c.signalFreed()
	if err != nil {
		derr, pushback := battleError(err)
		c.calls.WithLabelValues(battleOutcome(derr)).Inc()
		if errors.Is(derr, apperr.ErrUnavailable) {
			c.kick()
		}
		if c.pushback && retryable(derr) {
			in.gauge.Set(in.limit.refused(c.clk.Now(), pushback))
		}
		return nil, pushback, derr
	}
	if c.pushback {
		now := c.clk.Now()
		in.gauge.Set(in.limit.succeeded(now, now.Sub(start), jobWork(req, rep)))
	}
	c.calls.WithLabelValues("ok").Inc()
	return rep.GetReply(), 0, nil
}

// Outcomes of logic_battle_waits_total.
const (
	waitSlot    = "slot"    // a slot freed in time
	waitTimeout = "timeout" // none did within -battle-wait (or the caller went)
	waitFull    = "full"    // -battle-waiters were waiting already
)

// awaitSlot waits, up to slotWait and while ctx lives, for an instance
// whose calls are below its limit, when fewer than maxWaiters wait
// already. It returns the instance, held (see choose), or nil and the
// retry delay to pass on.
func (c *battleClient) awaitSlot(ctx context.Context) (*battleInstance, time.Duration) {
	if c.slotWait <= 0 {
		return nil, fullWait
	}
	if c.waiters.Add(1) > c.maxWaiters {
		c.waiters.Add(-1)
		c.waits.WithLabelValues(waitFull).Inc()
		return nil, fullWait
	}
	defer c.waiters.Add(-1)
	t := c.clk.NewTimer(c.slotWait)
	defer t.Stop()
	for {
		// Take the channel before looking, so that a call ending after
		// the look closes the channel this waits on.
		freed := c.freedChan()
		in, wait, full := c.choose(nil, false)
		if in != nil {
			c.waits.WithLabelValues(waitSlot).Inc()
			return in, 0
		}
		if !full {
			// Every instance is cooling now (or none is left): waiting
			// for a slot is moot.
			c.waits.WithLabelValues(waitTimeout).Inc()
			return nil, wait
		}
		select {
		case <-freed:
		case <-t.C():
			c.waits.WithLabelValues(waitTimeout).Inc()
			return nil, fullWait
		case <-ctx.Done():
			c.waits.WithLabelValues(waitTimeout).Inc()
			return nil, fullWait
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

// allCooling says whether every instance is cooling at now, and if so how
// long until the first is ready. Always false with pushback off, and with
// no instance (the call then fails as unavailable, not as cooling).
func (c *battleClient) allCooling(now time.Time) (time.Duration, bool) {
	s := c.set.Load()
	if len(s.insts) == 0 {
		return 0, false
	}
	return s.picker.allCooling(now)
}

// close stops discovery (and waits for its goroutines) and closes every
// connection, those still draining after a removal included.
func (c *battleClient) close() error {
	if c.stop != nil {
		c.stop()
	}
	c.wg.Wait()
	c.mu.Lock()
	open := make([]*battleInstance, 0, len(c.open))
	for in := range c.open {
		open = append(open, in)
	}
	c.mu.Unlock()
	slices.SortFunc(open, func(a, b *battleInstance) int { return strings.Compare(a.addr, b.addr) })
	var errs []error
	for _, in := range open {
		if err := in.closeConn(); err != nil {
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

// jobWork is a job call's size for the delay signal (aimd): Levee knows
// nothing of what a game's job computes, so it takes the encoded request
// and reply (a job's work grows with what it is given and returns, e.g.
// the size of a simulation and what its result reports), in bytes, at least
// 1; the signal compares intervals' time per unit with each other, so the
// unit does not matter.
func jobWork(req *leveev2.JobRequest, rep *leveev2.JobReply) float64 {
	return max(float64(len(req.GetRequest())+len(rep.GetReply())), 1)
}
