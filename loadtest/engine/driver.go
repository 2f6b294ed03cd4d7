package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/loadtest/arrival"
	"github.com/leveehq/levee/loadtest/audit"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/reqtmpl"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// tick is how often the driver's controller compares the players present
// with the curve.
const tick = 50 * time.Millisecond

// naivePause is the naive client's only pause between attempts: "at once",
// but not a busy loop that would take the load tool's CPU instead of the
// server's.
const naivePause = 50 * time.Millisecond

// driverConfig is one process's share of a run.
type driverConfig struct {
	plan   *plan
	gates  []string // player n dials gates[n % len(gates)]
	secret []byte
	keyID  string // tokens are v2 under this key id; empty: v1
	runID  string
	seed   uint64
	index  int // this process's share: players n with n % count == index
	count  int
	cap    int // at most this many players present in this process at once
	dialer *websocket.Dialer
	// dialers are dialer with the TLS configuration, by gate URL (each
	// gate its own TLS session cache); a gate not in it uses dialer.
	dialers map[string]*websocket.Dialer
	clock   clock.Clock
	log     *slog.Logger
}

// countHandshakes is ds with every TLS handshake the bots complete
// counted in rec: tls_full_handshakes, tls_resumed_handshakes (the session
// caches stay shared).
func countHandshakes(ds map[string]*websocket.Dialer, rec *record.Recorder) map[string]*websocket.Dialer {
	out := make(map[string]*websocket.Dialer, len(ds))
	for g, d := range ds {
		if d.TLSClientConfig == nil {
			out[g] = d
			continue
		}
		nd := *d
		c := d.TLSClientConfig.Clone()
		prev := c.VerifyConnection
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if prev != nil {
				if err := prev(cs); err != nil {
					return err
				}
			}
			if cs.DidResume {
				rec.Add("tls_resumed_handshakes", 1)
			} else {
				rec.Add("tls_full_handshakes", 1)
			}
			return nil
		}
		nd.TLSClientConfig = c
		out[g] = &nd
	}
	return out
}

// dialerFor is the dialer for gate URL g.
func (dc *driverConfig) dialerFor(g string) *websocket.Dialer {
	if d, ok := dc.dialers[g]; ok {
		return d
	}
	return dc.dialer
}

// driver runs one process's players: it makes them arrive as the curve
// says (open model: whether or not the server keeps up), plays each one's
// session, and records everything in rec.
type driver struct {
	cfg   driverConfig
	p     *plan
	rec   *record.Recorder
	start time.Time

	mu      sync.Mutex
	present []*player // in arrival order
	next    int       // arrivals so far (this process)
	capped  int64     // arrivals not started: the process's cap was reached
	reqs    atomic.Int64
	wg      sync.WaitGroup
	budget  *backoff.Budget
	// playFn is a player's life (play; tests put a stand-in).
	playFn   func(reqCtx, live context.Context, pl *player)
	inflight atomic.Int64  // requests sent and not yet answered
	entries  []entry       // every player's arrival and admission (fairness)
	peak     int           // most players present at once
	audit    audit.Auditor // the game's record; nil unless the plan keeps one
	replays  *replayLog    // acknowledged mutations to resend after the run; nil: no replay check
}

// player is one simulated player's state shared with the controller.
type player struct {
	n    int
	id   string
	quit chan struct{} // closed by the controller when the curve falls
	once sync.Once
	// pending are its requests whose outcome is unknown (the SDK's
	// *client.UnresolvedError), resent with their own request id; only
	// the player's own goroutine uses it.
	pending []*unresolvedReq
	// seq counts its requests over its whole life (every session):
	// {{seq}} and {{job_id}} of its templates.
	seq int64
}

// life is the player's own context: it ends with live or when the
// controller closes quit; cancel ends it (and the goroutine that watches
// quit) when the player is done.
func (pl *player) life(live context.Context) (context.Context, context.CancelFunc) {
	life, end := context.WithCancel(live)
	go func() {
		select {
		case <-pl.quit:
			end()
		case <-life.Done():
		}
	}()
	return life, end
}

// unresolvedReq is a request to resend.
type unresolvedReq struct {
	frame *leveev2.ClientFrame
	a     *act
	due   time.Time
	sends int // on the wire so far, for the attempts figures
}

func (pl *player) leave() { pl.once.Do(func() { close(pl.quit) }) }

func newDriver(cfg driverConfig, rec *record.Recorder, start time.Time) *driver {
	if cfg.clock == nil {
		cfg.clock = clock.Real{}
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if cfg.count < 1 {
		cfg.count = 1
	}
	cfg.dialers = countHandshakes(cfg.dialers, rec)
	d := &driver{cfg: cfg, p: cfg.plan, rec: rec, start: start}
	d.playFn = d.play
	if cfg.plan.replayCheck > 0 {
		d.replays = newReplayLog(cfg.plan.replayCheck)
	}
	if cfg.plan.ledger && cfg.plan.game.Audit != nil {
		d.audit = cfg.plan.game.Audit(cfg.plan.game.Game)
	}
	if !cfg.plan.naive {
		// One retry budget for the whole process, as one game client
		// process would share it among its connections.
		d.budget = backoff.NewBudget(backoff.DefaultBudgetConfig())
	}
	return d
}

// share is how many of the first total players are this process's.
func (d *driver) share(total int) int {
	if total <= d.cfg.index {
		return 0
	}
	return (total-d.cfg.index-1)/d.cfg.count + 1
}

// Run plays the run until the plan's end, then waits for the players to
// finish (requests in flight get their reply or time out). Cancelling ctx
// interrupts: requests in flight are given up and counted as lost.
func (d *driver) Run(ctx context.Context) {
	end := d.start.Add(d.p.end)
	live, stopLive := context.WithDeadline(ctx, end)
	defer stopLive()
	t := d.cfg.clock.NewTicker(tick)
	defer t.Stop()
	for live.Err() == nil {
		d.control(ctx, live, d.cfg.clock.Now().Sub(d.start))
		select {
		case <-live.Done():
		case <-t.C():
		}
	}
	d.mu.Lock()
	for _, pl := range d.present {
		pl.leave()
	}
	d.mu.Unlock()
	d.wg.Wait()
	if d.audit != nil {
		d.checkAudit(ctx)
	}
	if d.replays != nil {
		d.checkReplays(ctx)
	}
}

// control makes players arrive or leave so that this process follows its
// share of the curve at elapsed.
func (d *driver) control(reqCtx, live context.Context, elapsed time.Duration) {
	c := d.p.curve
	d.mu.Lock()
	defer d.mu.Unlock()
	var due int
	if c.Kind() == arrival.Rate {
		due = d.share(int(math.Floor(c.Arrivals(elapsed)))) - d.next
	} else {
		want := d.share(int(math.Floor(c.At(elapsed))))
		due = want - len(d.present)
		for due < 0 && len(d.present) > 0 {
			// The curve falls: the longest-present players leave.
			d.present[0].leave()
			d.present = d.present[1:]
			due++
		}
	}
	for range max(due, 0) {
		if len(d.present) >= d.cfg.cap {
			d.capped++
			d.next++
			continue
		}
		n := d.cfg.index + d.next*d.cfg.count
		d.next++
		pl := &player{n: n, id: fmt.Sprintf("p-%s-%d", d.cfg.runID, n), quit: make(chan struct{})}
		d.present = append(d.present, pl)
		d.peak = max(d.peak, len(d.present))
		d.wg.Go(func() {
			d.playFn(reqCtx, live, pl)
			d.mu.Lock()
			for i, q := range d.present {
				if q == pl {
					d.present = append(d.present[:i], d.present[i+1:]...)
					break
				}
			}
			d.mu.Unlock()
		})
	}
}

// play is one player's life: arrive, get in (waiting in line if the gate
// says so), play a session of actions, maybe drop once and come back with
// the ticket, leave.
func (d *driver) play(reqCtx, live context.Context, pl *player) {
	if d.p.bare {
		d.playBare(live, pl)
		return
	}
	rec := d.rec
	rec.Add("arrived", 1)
	e := entry{Gate: pl.n % len(d.cfg.gates), Arrived: d.cfg.clock.Now().Sub(d.start).Milliseconds(), Admitted: -1, Joined: -1, Waited: -1}
	defer func() {
		d.mu.Lock()
		d.entries = append(d.entries, e)
		d.mu.Unlock()
	}()
	defer d.giveUp(pl)
	rnd := mrand.New(mrand.NewPCG(d.cfg.seed, uint64(pl.n)))
	// The player's own life: until the run's end, its session's end or the
	// controller's leave.
	life, endLife := pl.life(live)
	defer endLife()
	var sessionEnd time.Time // set once admitted
	dropAt := time.Duration(-1)
	if rnd.Float64() < d.p.reconnect {
		// It drops once, at a random moment of its first minute or so
		// (scenario time), waiting or playing.
		dropAt = time.Duration(rnd.Float64() * float64(max(d.p.think*2, time.Second)))
	}
	url := d.cfg.gates[pl.n%len(d.cfg.gates)]
	exp := d.start.Add(d.p.end + d.p.drain + 10*time.Minute)
	tok, err := token.SignKey(d.cfg.keyID, d.cfg.secret, pl.id, exp)
	if err != nil {
		rec.Add("dial_failures", 1)
		return
	}
	var ticket string
	admitted := false
	var cause error
	// What the server's closes did to the player (the gate-restart figures).
	watch := newRedialWatch(d.cfg.clock, rec)
	defer watch.finish()
	dialer := watch.watchDialer(d.cfg.dialerFor(url))
	for attempt := 0; life.Err() == nil; attempt++ {
		waiting := false
		var gaps statusGaps
		opts := d.options(pl, rnd)
		opts.Dialer = dialer
		opts.Ticket = ticket
		opts.OnQueue = func(q *leveev2.QueueStatus) {
			watch.status(q)
			now := d.cfg.clock.Now()
			gaps.status(now)
			if e.Joined < 0 {
				e.Joined = now.Sub(d.start).Milliseconds()
			}
			if t := q.GetTicket(); t != "" {
				ticket = t
			}
			if !waiting {
				waiting = true
				rec.Add("waiting", 1)
			}
		}
		dctx, cancelDial := context.WithCancel(life)
		var dropTimer clock.Timer
		if dropAt >= 0 && !admitted {
			dropTimer = d.cfg.clock.NewTimer(dropAt)
			go func() {
				select {
				case <-dropTimer.C():
					cancelDial()
				case <-dctx.Done():
				}
			}()
		}
		c, err := d.connect(dctx, url, tok, opts, attempt, cause)
		if dropTimer != nil {
			dropTimer.Stop()
		}
		dropped := dctx.Err() != nil && life.Err() == nil
		cancelDial()
		gaps.end(d.cfg.clock.Now(), rec)
		if waiting {
			rec.Add("waiting", -1)
		}
		if err != nil {
			watch.settled(dropped || life.Err() != nil)
			if dropped {
				// It dropped while in line: it comes back with its ticket.
				dropAt = -1
				rec.Add("reconnects", 1)
				if le := client.AsLineError(err); le != nil && le.Status.GetTicket() != "" {
					ticket = le.Status.GetTicket()
				}
				cause = err
				continue
			}
			if life.Err() == nil {
				rec.Add("dial_failures", 1)
			}
			return
		}
		watch.admitted()
		if !admitted {
			admitted = true
			e.Admitted = d.cfg.clock.Now().Sub(d.start).Milliseconds()
			if attempt == 0 && watch.dialCount() == 1 {
				// One wait in one line: the gate's waited_ms dates its release (fairness).
				e.Waited = c.Waited().Milliseconds()
			}
			rec.Add("admitted", 1)
			rec.Observe("wait", c.Waited())
			if d.p.session > 0 {
				sessionEnd = d.cfg.clock.Now().Add(time.Duration(rnd.ExpFloat64() * float64(d.p.session)))
			}
		}
		rec.Add("connected", 1)
		why := d.session(reqCtx, life, pl, c, rnd, sessionEnd, &dropAt)
		if why == endLost && life.Err() == nil {
			watch.lost() // the server ended it: 1012 on a gate's restart, or another end
		}
		if live.Err() != nil {
			// The run is over: the players stay connected until every
			// request in flight has its reply (or the drain ends), so
			// that 80,000 closes at once do not starve the last replies.
			d.quiesce(reqCtx)
		}
		rec.Add("connected", -1)
		if t := c.Ticket(); t != "" { // the admission pass once in
			ticket = t
		}
		cause = c.Err()
		c.Close()
		st := c.Stats()
		rec.Add("retries", int64(st.Retries))
		// A reply whose request id matched no call waiting for one: a
		// second reply to a request, or one to a request never sent.
		rec.Add("duplicate_replies", int64(st.Unexpected))
		if why == endDone || life.Err() != nil {
			break
		}
		rec.Add("reconnects", 1)
	}
	rec.Add("left", 1)
}

// Why a session ended.
const (
	endDone    = iota // its time was up (or the run ended)
	endDropped        // the scenario made it drop once
	endLost           // the connection ended under it
)

// session plays actions on c until the session ends; it reports why.
func (d *driver) session(reqCtx, life context.Context, pl *player, c *client.Client, rnd *mrand.Rand, sessionEnd time.Time, dropAt *time.Duration) int {
	clk := d.cfg.clock
	var dropT time.Time
	if *dropAt >= 0 {
		dropT = clk.Now().Add(*dropAt)
	}
	if d.audit != nil {
		d.audit.Welcome(pl.id, c.Welcome())
	}
	// The login (if the scenario has one) at once, as a game client
	// fetches what it shows when it gets in; then the mix, one action per
	// think time. Requests left unresolved are resent first (on this
	// connection when they are new).
	next := clk.Now()
	seq := 0
	for {
		if !sessionEnd.IsZero() && !next.Before(sessionEnd) {
			return endDone
		}
		if !dropT.IsZero() && !next.Before(dropT) {
			*dropAt = -1
			return endDropped
		}
		if wait := next.Sub(clk.Now()); wait > 0 {
			t := clk.NewTimer(wait)
			select {
			case <-t.C():
			case <-life.Done():
				t.Stop()
				return endDone
			case <-c.Done():
				t.Stop()
				return endLost
			}
		}
		if life.Err() != nil {
			return endDone
		}
		select {
		case <-c.Done():
			return endLost
		default:
		}
		if d.reqs.Add(1) > d.p.maxReqs {
			return endDone
		}
		d.resend(reqCtx, c, pl)
		due := next
		a := d.p.pick(rnd.Float64())
		if seq == 0 && d.p.hasLogin {
			a = &d.p.login
		}
		seq++
		d.request(reqCtx, c, pl, a, rnd, due)
		next = due.Add(d.thinkTime(rnd))
		if now := clk.Now(); next.Before(now) {
			// A reply slower than the think time: the next action is
			// due now, not in the past (the player waited for it).
			next = now
		}
	}
}

// quiesce waits until no request of this process is in flight, at most
// the plan's drain (or until ctx is cancelled).
func (d *driver) quiesce(ctx context.Context) {
	if d.inflight.Load() == 0 {
		return
	}
	limit := d.cfg.clock.NewTimer(d.p.drain)
	defer limit.Stop()
	t := d.cfg.clock.NewTicker(tick)
	defer t.Stop()
	for d.inflight.Load() > 0 {
		select {
		case <-limit.C():
			return
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func (d *driver) thinkTime(rnd *mrand.Rand) time.Duration {
	t := float64(d.p.think)
	if d.p.jitter > 0 {
		t *= 1 + d.p.jitter*(2*rnd.Float64()-1)
	}
	return time.Duration(max(t, float64(time.Millisecond)))
}

// request makes one action's request and records it; the naive client
// tries again at once on a refusal (up to 3 more attempts), each time as a
// new request (with the same request message: the same job id). With the
// SDK, a request whose outcome is unknown is kept to be resent with its
// own id (resend), never sent again as a new one.
func (d *driver) request(reqCtx context.Context, c *client.Client, pl *player, a *act, rnd *mrand.Rand, due time.Time) {
	attempts := 1
	if d.p.naive {
		attempts = 4
	}
	pl.seq++
	v := reqtmpl.Vars{Player: pl.id, Seq: pl.seq, Job: pl.id + "-b" + strconv.FormatInt(pl.seq, 10), Run: d.cfg.runID}
	msg, req, berr := a.build(v, rnd)
	if berr != nil {
		// Checked when the scenario was bound; a value that still does not
		// decode (protojson's own rules) is the tool's failure, counted.
		d.rec.Begin()
		now := d.cfg.clock.Now()
		d.rec.End(record.Sample{Op: a.do, Crit: a.critNm, Class: record.Failed, Reason: "bad_template", Sent: now, Due: due, Done: now})
		d.cfg.log.Warn("request template", "action", a.do, "err", berr)
		return
	}
	sends := 0
	var err error
	for i := range attempts {
		d.rec.Begin()
		d.inflight.Add(1)
		sent := d.cfg.clock.Now()
		var info client.CallInfo
		ctx, cancel := context.WithTimeout(client.WithCallInfo(client.WithCriticality(reqCtx, a.crit), &info), d.p.timeout)
		var f *leveev2.ServerFrame
		f, err = d.send(ctx, c, pl, a, req)
		if d.audit != nil {
			d.audit.Call(audit.Call{Player: pl.id, Action: a.action, RequestID: info.RequestID, Request: msg,
				Sends: info.Attempts, Frame: f, Err: err})
		}
		cancel()
		sends += info.Attempts
		d.faultSends(sent, info.Attempts, i == 0)
		var due0 time.Time
		if i == 0 {
			due0 = due
		}
		o := d.end(a, sent, due0, err)
		d.inflight.Add(-1)
		if i > 0 {
			d.rec.Add("naive_retries", 1)
		}
		if o.Class != record.Refused || !d.p.naive {
			break
		}
	}
	if f := client.Unresolved(err); f != nil && !d.p.naive && a.action.Mutates {
		// A mutation whose outcome is unknown is sent again with its own
		// request id (a read is just made again later, as a new one).
		pl.pending = append(pl.pending, &unresolvedReq{frame: f, a: a, due: due, sends: sends})
		return
	}
	d.attempts(due, sends)
}

// send sends one request of action a: the SDK's Send, or, when the run
// keeps mutations for the replay check, Do with a frame of its own, kept
// once acknowledged (the same frame Send would build: the action, its
// request, its class).
func (d *driver) send(ctx context.Context, c *client.Client, pl *player, a *act, req []byte) (*leveev2.ServerFrame, error) {
	if d.replays == nil || !a.action.Mutates {
		return c.Send(ctx, a.do, req)
	}
	fr := &leveev2.ClientFrame{Action: a.do, Request: req, Criticality: a.crit}
	f, err := c.Do(ctx, fr)
	if err == nil {
		if err = checkReply(f, a); err == nil {
			d.replays.add(pl.id, fr)
		}
	}
	return f, err
}

// resend sends the player's unresolved requests again with their own
// request ids, as a game client must after it got no final answer (client
// docs: never as a new request). One still unknown after it (unresolved
// again, or refused for load: this send was not executed, an earlier one
// may have been) is kept for the next try.
func (d *driver) resend(reqCtx context.Context, c *client.Client, pl *player) {
	if len(pl.pending) == 0 {
		return
	}
	kept := pl.pending[:0]
	for i, u := range pl.pending {
		left := d.maxAttempts() - u.sends
		if left <= 0 {
			// Its policy's sends are spent: it waits for the end of the
			// run, when the check (or, in a game, the next login's
			// profile) finds out what became of it.
			kept = append(kept, u)
			continue
		}
		d.inflight.Add(1)
		sent := d.cfg.clock.Now()
		var info client.CallInfo
		ctx, cancel := context.WithTimeout(client.WithMaxAttempts(client.WithCallInfo(reqCtx, &info), left), d.p.timeout)
		out, err := c.Resend(ctx, u.frame)
		cancel()
		d.inflight.Add(-1)
		if info.Attempts == 0 && client.Unresolved(err) != nil {
			// Not sent (the retry budget said no, or the connection is
			// gone): nothing on the wire to count; the rest wait too.
			kept = append(kept, pl.pending[i:]...)
			break
		}
		u.sends += info.Attempts
		d.faultSends(sent, info.Attempts, false)
		d.rec.Begin()
		d.rec.Add("resends", 1)
		d.end(u.a, sent, time.Time{}, err)
		if d.audit != nil {
			d.audit.Resolve(pl.id, u.frame.GetRequestId(), out, err)
		}
		if err == nil && d.replays != nil {
			d.replays.add(pl.id, u.frame)
		}
		if f := client.Unresolved(err); f != nil {
			u.frame = f
		}
		if e := client.AsError(err); err != nil && (e == nil || e.Retryable() || client.Unresolved(err) != nil) {
			kept = append(kept, u)
			continue
		}
		d.attempts(u.due, u.sends)
	}
	clear(pl.pending[len(kept):])
	pl.pending = kept
}

// giveUp counts the attempts of the requests a player leaves unresolved
// (the ledger check resends them after the run, uncounted).
func (d *driver) giveUp(pl *player) {
	for _, u := range pl.pending {
		d.attempts(u.due, u.sends)
	}
	pl.pending = nil
}

// faultSends counts, for a call started at sent inside a lasting fault's
// planned time, its sends on the wire (and the original request, for a
// first call): the load the players put on the cluster during the fault,
// per request they needed (fault_attempts_per_request).
func (d *driver) faultSends(sent time.Time, sends int, original bool) {
	if sends == 0 || !d.p.inFault(sent.Sub(d.start)) {
		return
	}
	d.rec.Add(record.CounterFaultSends, int64(sends))
	if original {
		d.rec.Add(record.CounterFaultRequests, 1)
	}
}

// maxAttempts is the most sends of one request the SDK's policy allows,
// resends included.
func (d *driver) maxAttempts() int {
	if d.p.attempts > 0 {
		return d.p.attempts
	}
	return backoff.DefaultMaxAttempts
}

// end records the outcome of one call of action a (begun with rec.Begin),
// sent at sent and due at due (zero for a retry or a resend), and counts
// a refusal that said nothing about when to come back.
func (d *driver) end(a *act, sent, due time.Time, err error) record.Outcome {
	if unhinted(err) {
		d.rec.Add("unhinted_refusals", 1)
	}
	o := record.Classify(err)
	d.rec.End(record.Sample{Op: a.do, Crit: a.critNm, Class: o.Class, Reason: o.Reason,
		Sent: sent, Due: due, Done: d.cfg.clock.Now()})
	return o
}

// attempts counts an original request that went on the wire sends times in
// all, in the second it was due (record.Attempts); one never sent is not
// an original request on the wire.
func (d *driver) attempts(due time.Time, sends int) {
	if sends > 0 {
		d.rec.AddAt(record.Attempts(sends), 1, due)
		if d.p.inFault(due.Sub(d.start)) {
			d.rec.Add(record.FaultAttempts(sends), 1)
		}
	}
}

// connect gets the player in: with the SDK, DialRetry (its backoff, its
// spread) or Reconnect after a drop; naive, Dial again at once until ctx
// ends.
func (d *driver) connect(ctx context.Context, url, tok string, opts client.Options, attempt int, cause error) (*client.Client, error) {
	if !d.p.naive {
		if attempt == 0 {
			return client.DialRetry(ctx, url, client.StaticToken(tok), opts)
		}
		return client.Reconnect(ctx, url, client.StaticToken(tok), opts, cause)
	}
	for {
		c, err := client.Dial(ctx, url, tok, opts)
		if err == nil || ctx.Err() != nil {
			return c, err
		}
		if le := client.AsLineError(err); le != nil && le.Status.GetTicket() != "" {
			opts.Ticket = le.Status.GetTicket()
		}
		if apperr.Permanent(client.Code(err)) { // dialing again with the same token is refused again
			return nil, err
		}
		d.rec.Add("naive_redials", 1)
		if serr := clock.Sleep(ctx, d.cfg.clock, naivePause); serr != nil {
			return nil, errors.Join(err, serr)
		}
	}
}

// options are the SDK options of the plan's client policy.
func (d *driver) options(pl *player, rnd *mrand.Rand) client.Options {
	o := client.Options{
		Game:   d.p.game.Game,
		JSON:   rnd.Float64() < d.p.json,
		Dialer: d.cfg.dialerFor(d.cfg.gates[pl.n%len(d.cfg.gates)]),
		Logger: d.cfg.log,
		Clock:  d.cfg.clock,
	}
	if d.p.naive {
		o.NoRetry, o.NoPacing = true, true
		return o
	}
	o.Budget = d.budget
	o.Retry = backoff.Policy{Base: d.p.retryBase, Cap: d.p.retryCap, MaxAttempts: d.p.attempts}
	if d.p.pace > 0 {
		o.Pacer.Rate = d.p.pace
	}
	return o
}

// unhinted reports whether err is a refusal for load or an UNAVAILABLE
// answer without a retry_after: the server must say when to come back.
func unhinted(err error) bool {
	e := client.AsError(err)
	if e == nil || !(e.IsBusy() || e.Code == leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE) {
		return false
	}
	return e.RetryAfter <= 0
}
