package gate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leveehq/levee/gate/autopace"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/queue"
)

// lineTick is how often the walker releases players. The queue paces
// smoothly, so releasing often keeps each batch small.
const lineTick = 100 * time.Millisecond

// The line's mode names: the queue's four and "auto" (paced, with the rate
// set by the auto pacer).
const modeAuto = "auto"

var lineModes = []string{"open", "queueing", "paced", "closed", modeAuto}

// parseLineMode reads a -line-mode or admin mode value.
func parseLineMode(s string) (queue.Mode, bool, error) {
	if strings.EqualFold(s, modeAuto) {
		return queue.Paced, true, nil
	}
	m, err := queue.ParseMode(s)
	if err != nil {
		return 0, false, fmt.Errorf("unknown mode %q: want open, queueing, paced, closed or auto", s)
	}
	return m, false, nil
}

// Where a connection stands in the line (conn.lineState).
const (
	lineIn        uint32 = iota // admitted: requests go to logic
	lineWaiting                 // in the line
	lineAdmitting               // released; Admitted sent or being sent, logging in
)

// line is the gate's side of the admission line: the queue, the waiting
// connections by ticket, and the one walker goroutine that releases players
// and pushes their standing.
type line struct {
	s     *Server
	q     *queue.Queue
	id    uint64 // names this line in ticket tokens
	grace time.Duration
	push  time.Duration // the walk interval: the fastest a waiting player is pushed
	start time.Time     // tick 0 of the walker's ticks (pushMark.at)
	// returnUntil ends the return window: until then a ticket of another
	// line takes its place by its join time (queue.Rejoin); start + grace.
	returnUntil time.Time

	// gen is the line's generation: the walker moves it on when the mode
	// or the release rate changes (lineChanged against genInfo), and every
	// waiting player pushed under an older one is pushed again.
	gen atomic.Uint32 // pushMark keeps its low 16 bits

	// mu orders joins, leaves and releases against waiters, so a ticket the
	// queue counts as connected always has its connection here.
	mu       sync.Mutex
	waiters  map[queue.TicketID]*conn
	players  map[string]*conn // every entered connection, by player: one place per player (replace.go)
	recent   recentAdmits     // tickets admitted within grace: their reconnects go first
	passes   takenPasses      // other lines' passes honoured in the return window (pass.go)
	nWaiting atomic.Int64     // len(waiters)

	// ctl serializes operator and auto-pacer changes; it guards auto and
	// pace.
	ctl     sync.Mutex
	auto    bool
	pace    autopace.Pace
	signals autopace.Signals // the last ones read, for GET /admin/line
	modeNow atomic.Value

	kick chan struct{} // an operator change: release and push at once

	// The walker's own state.
	statuses []queue.Status
	released []queue.Ticket
	batch    []pushItem
	admits   []admitItem
	lastPush time.Time
	genInfo  pushInfo  // the shared status when gen last moved on
	enc      statusEnc // the walk's encodings

	// For tests: the time of the last finished step, whether the walker's
	// ticker exists, and pokes sent and handled.
	stepped atomic.Int64
	ticking atomic.Bool
	pokes   atomic.Int64
	kicked  atomic.Int64
}

type pushItem struct {
	c   *conn
	pos int
	eta time.Duration
}

type admitItem struct {
	c      *conn
	id     queue.TicketID
	waited time.Duration
}

func newLine(s *Server, now time.Time) (*line, error) {
	cfg := s.cfg
	mode, auto, err := parseLineMode(cfg.LineMode)
	if err != nil {
		return nil, fmt.Errorf("%w: -line-mode: %v", ErrInvalidConfig, err)
	}
	qc := queue.DefaultConfig()
	qc.Mode = mode
	qc.Rate = queue.Rate{N: cfg.LineRate, Interval: cfg.LineInterval}
	qc.MaxLength = cfg.LineMax
	qc.Grace = cfg.LineGrace
	qc.ClosedRetryAfter = cfg.LineRetryAfter
	l := &line{
		s:     s,
		id:    rand.Uint64(),
		grace: cfg.LineGrace,
		push:  cfg.LinePush,
		start: now,
		// The players of a line that was lost (this gate's before a
		// restart, or a gate that went away) get the grace any away
		// player gets to come back.
		returnUntil: now.Add(cfg.LineGrace),
		waiters:     map[queue.TicketID]*conn{},
		players:     map[string]*conn{},
		auto:        auto,
		// Starting from the configured rate, inside the bounds.
		pace: autopace.New(autoConfig(cfg), qc.Rate.PerSecond()),
		kick: make(chan struct{}, 1),
	}
	if auto {
		qc.Rate = autopace.RateFor(l.pace.Rate(), qc.Rate.Interval)
	}
	if l.q, err = queue.New(qc, now); err != nil {
		return nil, fmt.Errorf("%w: admission line: %w", ErrInvalidConfig, err)
	}
	l.setModeName(mode, auto)
	l.genInfo = l.pushInfo(l.q.Stats(now))
	return l, nil
}

// tick is now in walker ticks since the line started, rounded, modulo
// 2^16 as a pushMark keeps it.
func (l *line) tick(now time.Time) uint16 {
	return uint16((now.Sub(l.start) + lineTick/2) / lineTick)
}

// generation is the line's generation as a pushMark keeps it.
func (l *line) generation() uint16 { return uint16(l.gen.Load()) }

// modeName is the line's mode as operators name it ("auto" included).
func (l *line) modeName() string { return l.modeNow.Load().(string) }

func (l *line) setModeName(m queue.Mode, auto bool) {
	name := m.String()
	if auto {
		name = modeAuto
	}
	l.modeNow.Store(name)
	l.s.m.line.setMode(name)
}

// precheck refuses, before the upgrade and without changing anything, a
// player the line would refuse: a ticket another connection holds, a closed
// or a full line. enter decides for good after the upgrade.
func (l *line) precheck(player string, cl *ticketClaims, now time.Time) error {
	l.mu.Lock()
	old := l.players[player]
	l.mu.Unlock()
	if old != nil && cl == nil {
		return nil // the player's older connection holds their place: enter takes it over
	}
	if cl != nil && cl.Pass {
		// Let in at once or put at the back (enterPass): only a closed
		// line refuses it.
		if st := l.q.Stats(now); st.Mode == queue.Closed {
			return &queue.RefusedError{Err: queue.ErrClosed, RetryAfter: st.RetryAfter}
		}
		return nil
	}
	if cl != nil {
		if st, err := l.q.Position(cl.ID, now); err == nil {
			switch {
			case st.Ticket.PlayerID != player:
				return errTicketPlayer
			case st.State == queue.Waiting:
				return errTicketInUse
			}
			return nil // away or held: Resume works in every mode
		}
	}
	st := l.q.Stats(now)
	if st.Mode == queue.Closed {
		return &queue.RefusedError{Err: queue.ErrClosed, RetryAfter: st.RetryAfter}
	}
	if st.Length >= st.MaxLength && !(st.Mode == queue.Open && st.Length == 0) {
		return &queue.RefusedError{Err: queue.ErrLineFull, RetryAfter: max(st.Rate.Interval, time.Second)}
	}
	return nil
}

// Player-facing wrappings of the ticket refusals.
var (
	errTicketPlayer = fmt.Errorf("%w: %w: this ticket was given to another player", apperr.ErrForbidden, ErrTicketPlayer)
	errTicketInUse  = fmt.Errorf("%w: it holds this place in line; close it first", apperr.ErrTicketInUse)
)

// enter puts c in the line: back at its place (a ticket the player left
// within grace), admitted at once (open with an empty line, a ticket
// released while its player was away, or another line's admission pass in
// the return window, pass.go), at the front (a ticket or pass admitted
// within grace: the player is reconnecting to a game in progress), or at
// the back (no ticket, or one the line no longer knows). A waiting c is
// registered so the walker can push to it and release it. how says
// whether the presented ticket was taken back (entryResumed) or a pass let
// the player in (entryPass).
//
// One player, one place: when the player already has a connection here
// (old, returned for the caller to replace), c takes over its place: the
// ticket it waits with (entryTakeOver), or, when old was let in and c
// comes without a ticket, in at once (entryReplace). A connection with a
// ticket or a pass is judged as it always was (a reconnect is unaffected;
// the ticket old waits with is TICKET_IN_USE, and old stays) and, if it
// enters, old is replaced all the same.
func (l *line) enter(c *conn, cl *ticketClaims, now time.Time) (st queue.Status, how entry, old *conn, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old = l.players[c.playerID]; old == c {
		old = nil
	}
	if old != nil {
		if st, how, ok := l.takeOver(c, old, cl, now); ok {
			l.players[c.playerID] = c
			return st, how, old, nil
		}
	}
	if st, how, err = l.enterLocked(c, cl, now); err != nil {
		return st, how, nil, err
	}
	l.players[c.playerID] = c
	return st, how, old, nil
}

// takeOver gives c the place of old, the player's older connection (l.mu
// held); false when the normal entry decides.
func (l *line) takeOver(c, old *conn, cl *ticketClaims, now time.Time) (queue.Status, entry, bool) {
	switch old.lineState.Load() {
	case lineWaiting:
		if l.waiters[old.ticket] != old || (cl != nil && !cl.Pass && cl.ID == old.ticket) {
			return queue.Status{}, entryNew, false
		}
		st, err := l.q.Position(old.ticket, now)
		if err != nil || st.State != queue.Waiting {
			return queue.Status{}, entryNew, false
		}
		l.waiters[old.ticket] = c
		c.ticket = old.ticket
		c.lineState.Store(lineWaiting)
		return st, entryTakeOver, true
	default: // let in, or being let in
		if cl != nil {
			return queue.Status{}, entryNew, false
		}
		c.ticket = old.ticket
		c.lineState.Store(lineAdmitting)
		return queue.Status{Ticket: queue.Ticket{ID: old.ticket, PlayerID: c.playerID}, State: queue.Admitted}, entryReplace, true
	}
}

// enterLocked is enter's entry for a player with no other connection here
// (l.mu held).
func (l *line) enterLocked(c *conn, cl *ticketClaims, now time.Time) (st queue.Status, how entry, err error) {
	switch {
	case cl == nil:
		st, err = l.q.Join(c.playerID, now, true)
	case cl.Pass:
		st, how, err = l.enterPass(c, cl, now)
	default:
		switch {
		case !cl.foreign:
			st, err = l.q.Resume(cl.ID, c.playerID, now)
		case now.Before(l.returnUntil) || l.q.Knows(cl.ID, now):
			// Back by the original join time, or, for a ticket this line
			// took back before, as Resume.
			st, err = l.q.Rejoin(cl.ID, c.playerID, cl.Joined, now, true)
		default: // the return window is over: as an unknown ticket
			err = queue.ErrUnknownTicket
		}
		switch {
		case err == nil:
			how = entryResumed
		case errors.Is(err, queue.ErrTicketInUse):
			return st, entryNew, errTicketInUse
		case errors.Is(err, queue.ErrWrongPlayer):
			return st, entryNew, errTicketPlayer
		case l.recent.has(cl.ID, c.playerID, now):
			st, err = l.q.JoinPriority(c.playerID, now, true)
			if err == nil {
				l.recent.remove(cl.ID)
			}
		default: // expired or unknown: the back of the line
			st, err = l.q.Join(c.playerID, now, true)
		}
	}
	if err != nil {
		return st, entryNew, err
	}
	switch st.State {
	case queue.Waiting:
		l.waiters[st.Ticket.ID] = c
		l.nWaiting.Add(1)
		c.ticket = st.Ticket.ID
		c.lineState.Store(lineWaiting)
	case queue.Admitted:
		l.s.m.line.admitted.Inc()
		if how != entryNew { // released while away, or a pass: its next reconnect goes first too
			c.lineState.Store(lineAdmitting)
			l.recent.add(st.Ticket.ID, c.playerID, now.Add(l.grace))
		}
	}
	return st, how, nil
}

// leave is called when a connection ends: a waiting player keeps their
// place for the grace period.
func (l *line) leave(c *conn, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.players[c.playerID] == c {
		delete(l.players, c.playerID)
	}
	if c.lineState.Load() != lineWaiting {
		return
	}
	if l.waiters[c.ticket] == c {
		delete(l.waiters, c.ticket)
		l.nWaiting.Add(-1)
		_ = l.q.Leave(c.ticket, now)
	}
}

// cancel takes a waiting c out of the line for good: its ticket never
// reached the player.
func (l *line) cancel(c *conn, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.players[c.playerID] == c {
		delete(l.players, c.playerID)
	}
	if l.waiters[c.ticket] == c {
		delete(l.waiters, c.ticket)
		l.nWaiting.Add(-1)
		_ = l.q.Cancel(c.ticket, now)
	}
}

// run is the walker: every lineTick it releases the players due (up to the
// gate's free room) and, every push interval, walks the waiting players
// and pushes those the push rule picks their standing. It is the only
// goroutine that releases or pushes (after a connection's first status).
func (l *line) run(ctx context.Context) {
	t := l.s.clock.NewTicker(lineTick)
	defer t.Stop()
	l.lastPush = l.s.clock.Now()
	l.ticking.Store(true)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			l.step(l.s.clock.Now(), false)
		case <-l.kick:
			l.step(l.s.clock.Now(), true)
			l.kicked.Add(1)
		}
	}
}

// poke asks the walker to release and push at once (after an operator's
// change), without waiting for it.
func (l *line) poke() {
	select {
	case l.kick <- struct{}{}:
		l.pokes.Add(1)
	default: // one is pending; it will see this change too
	}
}

// step is one turn of the walker.
func (l *line) step(now time.Time, pushNow bool) {
	l.release(now)
	st := l.q.Stats(now)
	l.s.m.line.observe(st)
	// Half a tick of slack, so a real ticker's jitter never stretches the
	// push interval.
	if pushNow || now.Sub(l.lastPush) >= l.push-lineTick/2 {
		l.lastPush = now
		l.walk(now, st)
	}
	l.stepped.Store(now.UnixNano())
}

// release hands the players due to their connections, which send Admitted
// and log in off this goroutine.
func (l *line) release(now time.Time) {
	limit := l.s.room()
	l.mu.Lock()
	l.released = l.q.AppendRelease(l.released[:0], now, limit)
	for _, t := range l.released {
		c := l.waiters[t.ID]
		if c == nil {
			continue // cannot happen: mu keeps waiters and the queue in step
		}
		delete(l.waiters, t.ID)
		l.nWaiting.Add(-1)
		c.lineState.Store(lineAdmitting)
		l.recent.add(t.ID, t.PlayerID, now.Add(l.grace))
		l.admits = append(l.admits, admitItem{c: c, id: t.ID, waited: now.Sub(t.Joined)})
	}
	l.recent.prune(now)
	l.passes.prune(now, l.returnUntil)
	l.mu.Unlock()
	clear(l.released)
	for _, a := range l.admits {
		l.s.admitFromLine(a.c, a.id, a.waited, now)
	}
	clear(l.admits)
	l.admits = l.admits[:0]
}

// walk looks at every waiting player and pushes their standing to those
// the push rule picks (pushrule.go): one QueueStatus each, its shared part
// encoded once per codec.
func (l *line) walk(now time.Time, st queue.Stats) {
	l.mu.Lock()
	l.statuses = l.q.AppendPositions(l.statuses[:0], now)
	for _, x := range l.statuses {
		if x.State != queue.Waiting {
			continue
		}
		if c := l.waiters[x.Ticket.ID]; c != nil {
			l.batch = append(l.batch, pushItem{c: c, pos: x.Position, eta: x.ETA})
		}
	}
	l.mu.Unlock()
	clear(l.statuses) // do not keep player ids reachable
	info := l.pushInfo(st)
	if lineChanged(l.genInfo, info) {
		l.genInfo = info
		l.gen.Add(1)
	}
	l.enc.reset(info)
	cur := pushMark{at: l.tick(now), gen: l.generation()}
	for _, p := range l.batch {
		if res, why := p.c.pushStatus(p.pos, p.eta, cur, &l.enc); res != pushNotDue {
			l.s.m.line.pushed(res, why)
		}
	}
	clear(l.batch)
	l.batch = l.batch[:0]
}

// pushInfo is the part of a QueueStatus that is the same for everyone (but
// the ticket, which only a connection's first status carries).
type pushInfo struct {
	rate    float64
	length  uint64
	graceMs uint32
	mode    string
}

func (l *line) pushInfo(st queue.Stats) pushInfo {
	return pushInfo{rate: releaseRate(st), length: uint64(st.Length), graceMs: uint32(l.grace.Milliseconds()), mode: st.Mode.String()}
}

// releaseRate is the rate players see: measured when the queue has measured
// it, else the configured one; 0 while the line releases nothing.
func releaseRate(st queue.Stats) float64 {
	switch {
	case st.Mode == queue.Queueing || st.Mode == queue.Closed:
		return 0
	case st.Measured:
		return st.MeasuredPerSecond
	}
	return st.ConfiguredPerSecond
}

// The retry_after of NOT_ADMITTED: the ticket's ETA, within these bounds.
const (
	minNotAdmittedRetry = 100 * time.Millisecond
	maxNotAdmittedRetry = time.Minute
	admittingRetry      = 200 * time.Millisecond // released, logging in
)

// notAdmittedRetry is when a waiting player's request makes sense again.
func (l *line) notAdmittedRetry(c *conn, now time.Time) time.Duration {
	if c.lineState.Load() == lineAdmitting {
		return admittingRetry
	}
	st, err := l.q.Position(c.ticket, now)
	if err != nil || st.ETA == queue.NoETA {
		return maxNotAdmittedRetry
	}
	return min(max(ceilMillis(st.ETA), minNotAdmittedRetry), maxNotAdmittedRetry)
}

// recentAdmits remembers, for the grace period, the tickets released from
// the line, so that a player who drops right after being let in (say, in
// the middle of a match) comes back through the priority lane. Entries are
// added in time order and pruned from the front.
type recentAdmits struct {
	by    map[queue.TicketID]recentAdmit
	order []recentEntry
	head  int
}

type recentAdmit struct {
	player string
	until  time.Time
}

type recentEntry struct {
	id    queue.TicketID
	until time.Time
}

func (r *recentAdmits) add(id queue.TicketID, player string, until time.Time) {
	if r.by == nil {
		r.by = map[queue.TicketID]recentAdmit{}
	}
	r.by[id] = recentAdmit{player: player, until: until}
	r.order = append(r.order, recentEntry{id: id, until: until})
}

func (r *recentAdmits) has(id queue.TicketID, player string, now time.Time) bool {
	a, ok := r.by[id]
	return ok && a.player == player && now.Before(a.until)
}

func (r *recentAdmits) remove(id queue.TicketID) { delete(r.by, id) }

// prune forgets the entries whose grace ended by now.
func (r *recentAdmits) prune(now time.Time) {
	for r.head < len(r.order) && !now.Before(r.order[r.head].until) {
		e := r.order[r.head]
		if a, ok := r.by[e.id]; ok && a.until.Equal(e.until) {
			delete(r.by, e.id)
		}
		r.order[r.head] = recentEntry{}
		r.head++
	}
	if r.head == len(r.order) {
		r.order, r.head = r.order[:0], 0
	} else if r.head > 1024 && 2*r.head > len(r.order) {
		n := copy(r.order, r.order[r.head:])
		r.order, r.head = r.order[:n], 0
	}
}
