package logic

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// busyPushback is the retry delay sent with RESOURCE_EXHAUSTED.
const busyPushback = 100 * time.Millisecond

// New players start with these.
const (
	startGold   = 1000
	startRating = 1000
)

func newPlayer(id string) *leveev2.Player {
	return &leveev2.Player{
		Id:        id,
		Level:     1,
		Gold:      startGold,
		Rating:    startRating,
		Inventory: map[string]uint32{},
		Version:   1,
	}
}

var errNoPlayer = fmt.Errorf("%w: player not found; log in first", apperr.ErrNotFound)

// record returns a player's current state as this batch sees it: its own
// uncommitted copy first, then the cache, then the store. (nil, nil) when
// the player does not exist. The result is read-only: a mutation works on
// rec.clone() and puts it in b.dirty once complete, so neither the committed
// record nor the batch's copy is ever left half changed.
func (sh *shard) record(b *batch, id string) (*record, error) {
	if r, ok := b.dirty[id]; ok {
		return r, nil
	}
	if r, ok := sh.cache[id]; ok {
		return r, nil
	}
	r, err := sh.store.get(id)
	if err != nil {
		return nil, err
	}
	if r != nil {
		sh.cache[id] = r
	}
	return r, nil
}

func (sh *shard) login(b *batch, o *op) {
	id := o.req.GetPlayerId()
	rec, err := sh.record(b, id)
	if err != nil {
		b.reply(o, internalError(err))
		return
	}
	if rec == nil {
		rec = &record{player: newPlayer(id)}
		b.dirty[id] = rec
		b.mutations++
	}
	b.reply(o, result{reply: &leveev2.LogicReply{Result: &leveev2.LogicReply_Welcome{
		Welcome: &leveev2.Welcome{Player: clonePlayer(rec.player), Shard: uint32(sh.id)},
	}}})
}

func (sh *shard) profile(b *batch, o *op) {
	rec, err := sh.record(b, o.req.GetPlayerId())
	if err != nil {
		b.reply(o, internalError(err))
		return
	}
	if rec == nil {
		b.reply(o, businessError(errNoPlayer))
		return
	}
	b.reply(o, result{reply: &leveev2.LogicReply{Result: &leveev2.LogicReply_Profile{
		Profile: &leveev2.ProfileReply{Player: clonePlayer(rec.player)},
	}}})
}

// Idempotency. A mutation (a purchase, a battle) is identified by its
// request id and a battle also by its battle id. Its first outcome, a
// result or a business error, is stored under each of its keys with the
// change it answers, in the same commit, and is kept for the idempotency
// window (plus maxIssuedSkew); a resend under a key with a stored outcome
// gets that outcome back, marked replayed, and nothing is applied. A key
// used again for a different request is BAD_REQUEST, and so is an
// issued_at_ms too far in the future. Answers that say the request was not
// executed (busy, expired in the queue, shutting down, battle unavailable,
// player not logged in, malformed request) store nothing: the id stays open.

var (
	errKeyReused     = fmt.Errorf("%w: request id already used for a different request", apperr.ErrBadRequest)
	errBattleReused  = fmt.Errorf("%w: battle id already used for a different battle", apperr.ErrBadRequest)
	errIssuedFuture  = fmt.Errorf("%w: issued_at_ms lies more than %v in the future", apperr.ErrBadRequest, maxIssuedSkew)
	errTooOldForKeys = fmt.Errorf("%w: the request was issued longer ago than the idempotency window and its outcome, if any, is no longer kept; it was not applied", apperr.ErrRequestExpired)
)

// outcome returns the outcome stored under key: this batch's, else the
// store's; nil if none.
func (sh *shard) outcome(b *batch, key string) (*leveev2.StoredOutcome, error) {
	if out, ok := b.outcomes[key]; ok {
		return decodeOutcome(key, out.enc)
	}
	return sh.store.outcome(key)
}

// prior answers o from an outcome stored under key, if there is one
// (done): the replay, or BAD_REQUEST when the key answered another request
// (reused is then the error to give).
func (sh *shard) prior(b *batch, o *op, key string, reused error) (result, bool) {
	so, err := sh.outcome(b, key)
	if err != nil {
		return internalError(err), true
	}
	if so == nil {
		return result{}, false
	}
	if !sameRequest(so, o.req) {
		return businessError(reused), true
	}
	return replayOf(so), true
}

// checkIssued refuses a request, unexecuted, whose issued_at_ms is too far
// in the future (BAD_REQUEST), or that is too old to be told apart from a
// resend whose outcome has been purged (REQUEST_EXPIRED): issued longer
// ago than the window, or no later than maxIssuedSkew after the newest
// outcome purged (an outcome is applied at most maxIssuedSkew before the
// issued_at_ms of its request, so any request that may have been applied
// and purged is caught, whatever the window was then).
func (sh *shard) checkIssued(o *op, now time.Time) error {
	ms := o.req.GetIssuedAtMs()
	if ms == 0 {
		return nil // not said: issued now
	}
	if ms > math.MaxInt64 {
		return errIssuedFuture
	}
	at := time.UnixMilli(int64(ms))
	switch {
	case at.After(now.Add(maxIssuedSkew)):
		return errIssuedFuture
	case at.Before(now.Add(-sh.srv.cfg.IdempotencyWindow)):
		return errTooOldForKeys
	}
	if up := sh.store.purgedUpTo; up > 0 && !at.After(time.UnixMilli(up).Add(maxIssuedSkew)) {
		return errTooOldForKeys
	}
	return nil
}

// store adds reply as the outcome of req under every key to the batch
// (written with its commit, before any answer goes out): all of them, or
// none when it cannot be encoded.
func (b *batch) store(req *leveev2.LogicRequest, reply *leveev2.LogicReply, now time.Time, keys ...string) error {
	enc, err := encodeOutcome(now, req, reply)
	if err != nil {
		return fmt.Errorf("encode outcome %q: %w", keys, err)
	}
	for _, key := range keys {
		b.addOutcome(outcome{key: key, at: now, enc: enc})
	}
	if b.touched == nil {
		b.touched = map[string]bool{}
	}
	b.touched[req.GetPlayerId()] = true
	return nil
}

// final answers o with r and stores r as its outcome under key; false (and
// INTERNAL for o) when it could not be stored.
func (sh *shard) final(b *batch, o *op, r result, now time.Time, key string) bool {
	if err := b.store(o.req, r.reply, now, key); err != nil {
		b.reply(o, internalError(err))
		return false
	}
	b.reply(o, r)
	return true
}

func (sh *shard) buy(b *batch, o *op, req *leveev2.BuyItemRequest) {
	id := o.req.GetPlayerId()
	rec, err := sh.record(b, id)
	if err != nil {
		b.reply(o, internalError(err))
		return
	}
	if rec == nil {
		b.reply(o, businessError(errNoPlayer))
		return
	}
	key := requestKey(id, o.req.GetRequestId())
	if r, done := sh.prior(b, o, key, errKeyReused); done {
		b.reply(o, r)
		return
	}
	if sh.reqFlights[key] != nil {
		// The id belongs to a battle still in flight.
		b.reply(o, businessError(errKeyReused))
		return
	}
	now := sh.srv.clk.Now()
	if err := sh.checkIssued(o, now); err != nil {
		b.reply(o, businessError(err))
		return
	}
	cost, err := priceOf(req.GetItemId(), req.GetQuantity())
	if err != nil {
		sh.final(b, o, businessError(err), now, key)
		return
	}
	if rec.player.GetGold() < cost {
		sh.final(b, o, businessError(fmt.Errorf("%w: %d %s cost %d gold, you have %d",
			apperr.ErrInsufficientGold, req.GetQuantity(), req.GetItemId(), cost, rec.player.GetGold())), now, key)
		return
	}
	next := rec.clone()
	p := next.player
	p.Gold -= cost
	if p.Inventory == nil {
		p.Inventory = map[string]uint32{}
	}
	p.Inventory[req.GetItemId()] += uint32(req.GetQuantity())
	p.Version++
	br := &leveev2.BuyItemReply{Player: clonePlayer(p), GoldSpent: cost}
	if sh.final(b, o, result{reply: &leveev2.LogicReply{Result: &leveev2.LogicReply_BuyItem{BuyItem: br}}}, now, key) {
		b.dirty[id] = next
		b.mutations++
	}
}

// battleKeys are the outcome keys of a battle request: its battle id's and,
// when it has one, its request id's.
func battleKeys(o *op) []string {
	id := o.req.GetPlayerId()
	keys := []string{battleKey(id, o.req.GetStartBattle().GetBattleId())}
	if rid := o.req.GetRequestId(); rid != 0 {
		keys = append(keys, requestKey(id, rid))
	}
	return keys
}

func (sh *shard) startBattle(b *batch, o *op, req *leveev2.StartBattleRequest) {
	id := o.req.GetPlayerId()
	rec, err := sh.record(b, id)
	if err != nil {
		b.reply(o, internalError(err))
		return
	}
	if rec == nil {
		b.reply(o, businessError(errNoPlayer))
		return
	}
	keys := battleKeys(o)
	if len(keys) > 1 {
		if r, done := sh.prior(b, o, keys[1], errKeyReused); done {
			b.reply(o, r)
			return
		}
		if f := sh.reqFlights[keys[1]]; f != nil && f.key != keys[0] {
			b.reply(o, businessError(errKeyReused))
			return
		}
	}
	if r, done := sh.prior(b, o, keys[0], errBattleReused); done {
		b.reply(o, r)
		return
	}
	if f := sh.flights[keys[0]]; f != nil {
		if !proto.Equal(f.first.req.GetStartBattle(), req) {
			b.reply(o, businessError(errBattleReused))
			return
		}
		// A request with an id of its own joins the battle under it too:
		// the outcome is stored under that id, and until then the id
		// is taken.
		if len(keys) > 1 && sh.reqFlights[keys[1]] == nil {
			f.keys = append(f.keys, keys[1])
			sh.reqFlights[keys[1]] = f
		}
		f.waiters = append(f.waiters, o)
		return
	}
	if err := sh.checkIssued(o, sh.srv.clk.Now()); err != nil {
		b.reply(o, businessError(err))
		return
	}
	if b.stopping {
		b.reply(o, result{err: apperr.ErrShuttingDown})
		return
	}
	f := &flight{
		key:      keys[0],
		keys:     keys,
		playerID: id,
		battleID: req.GetBattleId(),
		req:      simulateRequest(rec.player, req),
		first:    o,
		waiters:  []*op{o},
	}
	sh.flights[f.key] = f
	if len(keys) > 1 {
		sh.reqFlights[keys[1]] = f
	}
	// Started after the batch commits, so it never runs on a state that a
	// failed commit takes back.
	b.launches = append(b.launches, f)
}

// launch runs f's battle call on its own goroutine, bounded by MaxBattles.
// The result comes back through the shard's internal channel, which the
// shard drains before its requests; that send is not subject to admission
// (it must never be refused) and gives up only when the server stops.
func (sh *shard) launch(f *flight) {
	s := sh.srv
	select {
	case s.battleSem <- struct{}{}:
	default:
		sh.failFlight(f, result{
			err:      fmt.Errorf("%w: %d battles in flight", apperr.ErrBusy, cap(s.battleSem)),
			pushback: busyPushback,
		})
		return
	}
	s.battleWG.Add(1)
	go func() {
		defer s.battleWG.Done()
		defer func() { <-s.battleSem }()
		// The first request's deadline and criticality travel to battle.
		ctx := priority.Outgoing(f.first.ctx, f.first.class)
		rep, pushback, err := s.battle.Simulate(ctx, f.req, f.first.class)
		msg := &op{battle: &battleResult{key: f.key, rep: rep, err: err, pushback: pushback}}
		select {
		case sh.in <- msg:
		case <-s.stop:
		}
	}()
}

// forget removes f from the flights in progress.
func (sh *shard) forget(f *flight) {
	delete(sh.flights, f.key)
	for _, k := range f.keys[1:] {
		delete(sh.reqFlights, k)
	}
}

// failFlight answers every waiter of f with r and forgets f. Nothing was
// applied, so nothing is stored: the ids stay open.
func (sh *shard) failFlight(f *flight, r result) {
	sh.forget(f)
	for _, w := range f.waiters {
		sh.send(w, r)
	}
}

// applyBattle applies a finished battle's reward exactly once and answers
// every request that waited for it.
func (sh *shard) applyBattle(b *batch, res *battleResult) {
	f := sh.flights[res.key]
	if f == nil {
		return
	}
	if res.err != nil {
		// Nothing applied; the state is untouched, so answer at once.
		sh.failFlight(f, result{err: res.err, pushback: res.pushback})
		return
	}
	sh.forget(f)
	rec, err := sh.record(b, f.playerID)
	if err == nil && rec == nil {
		err = errNoPlayer
	}
	if err != nil {
		for _, w := range f.waiters {
			b.reply(w, internalError(err))
		}
		return
	}
	if so, err := sh.outcome(b, f.key); err != nil || so != nil {
		// Stored meanwhile: cannot happen while the flight is known, but
		// the reward must never be applied twice.
		for _, w := range f.waiters {
			r, _ := sh.prior(b, w, f.key, errBattleReused)
			b.reply(w, r)
		}
		return
	}
	next := rec.clone()
	br := applyReward(next.player, f.battleID, res.rep)
	br.Player = clonePlayer(next.player)
	reply := &leveev2.LogicReply{Result: &leveev2.LogicReply_Battle{Battle: br}}
	if err := b.store(f.first.req, reply, sh.srv.clk.Now(), f.keys...); err != nil {
		for _, w := range f.waiters {
			b.reply(w, internalError(err))
		}
		return
	}
	b.dirty[f.playerID] = next
	b.mutations++
	for _, w := range f.waiters {
		if w == f.first {
			b.reply(w, result{reply: reply})
			continue
		}
		// The others waited for the first's battle: theirs is a replay.
		r := proto.Clone(br).(*leveev2.BattleReply)
		r.Replayed = true
		b.reply(w, result{reply: &leveev2.LogicReply{Result: &leveev2.LogicReply_Battle{Battle: r}}})
	}
}
