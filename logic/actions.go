package logic

import (
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"levee/internal/apperr"
	"levee/internal/priority"
	leveev1 "levee/proto/leveev1"
)

// busyPushback is the retry delay sent with RESOURCE_EXHAUSTED.
const busyPushback = 100 * time.Millisecond

// New players start with these.
const (
	startGold   = 1000
	startRating = 1000
)

func newPlayer(id string) *leveev1.Player {
	return &leveev1.Player{
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
	b.reply(o, result{reply: &leveev1.LogicReply{Result: &leveev1.LogicReply_Welcome{
		Welcome: &leveev1.Welcome{Player: clonePlayer(rec.player), Shard: uint32(sh.id)},
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
	b.reply(o, result{reply: &leveev1.LogicReply{Result: &leveev1.LogicReply_Profile{
		Profile: &leveev1.ProfileReply{Player: clonePlayer(rec.player)},
	}}})
}

func buyKey(requestID uint64) string { return "buy/" + strconv.FormatUint(requestID, 10) }

func (sh *shard) buy(b *batch, o *op, req *leveev1.BuyItemRequest) {
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
	key := buyKey(o.req.GetRequestId())
	if done, err := rec.find(key); err != nil || done != nil {
		if err != nil {
			b.reply(o, internalError(err))
			return
		}
		if bi := done.GetBuyItem(); bi != nil {
			bi.Replayed = true
		}
		b.reply(o, result{reply: done})
		return
	}
	cost, err := priceOf(req.GetItemId(), req.GetQuantity())
	if err != nil {
		b.reply(o, businessError(err))
		return
	}
	if rec.player.GetGold() < cost {
		b.reply(o, businessError(fmt.Errorf("%w: %d %s cost %d gold, you have %d",
			apperr.ErrInsufficientGold, req.GetQuantity(), req.GetItemId(), cost, rec.player.GetGold())))
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
	br := &leveev1.BuyItemReply{Player: clonePlayer(p), GoldSpent: cost}
	if err := next.add(key, &leveev1.LogicReply{Result: &leveev1.LogicReply_BuyItem{BuyItem: br}}); err != nil {
		b.reply(o, internalError(err))
		return
	}
	b.dirty[id] = next
	b.mutations++
	b.reply(o, result{reply: &leveev1.LogicReply{Result: &leveev1.LogicReply_BuyItem{BuyItem: br}}})
}

func battleKey(battleID string) string { return "battle/" + battleID }

// replayBattle answers from a stored battle outcome (a fresh copy each).
func replayBattle(rec *record, battleID string) (result, bool) {
	done, err := rec.find(battleKey(battleID))
	if err != nil {
		return internalError(err), true
	}
	if done == nil {
		return result{}, false
	}
	if br := done.GetBattle(); br != nil {
		br.Replayed = true
	}
	return result{reply: done}, true
}

func (sh *shard) startBattle(b *batch, o *op, req *leveev1.StartBattleRequest) {
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
	if r, ok := replayBattle(rec, req.GetBattleId()); ok {
		b.reply(o, r)
		return
	}
	fkey := id + "/" + req.GetBattleId()
	if f := sh.flights[fkey]; f != nil {
		f.waiters = append(f.waiters, o)
		return
	}
	if b.stopping {
		b.reply(o, result{err: apperr.ErrShuttingDown})
		return
	}
	f := &flight{
		key:      fkey,
		playerID: id,
		battleID: req.GetBattleId(),
		req:      simulateRequest(rec.player, req),
		first:    o,
		waiters:  []*op{o},
	}
	sh.flights[fkey] = f
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

// failFlight answers every waiter of f with r and forgets f.
func (sh *shard) failFlight(f *flight, r result) {
	delete(sh.flights, f.key)
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
	delete(sh.flights, f.key)
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
	if _, ok := replayBattle(rec, f.battleID); ok {
		for _, w := range f.waiters {
			r, _ := replayBattle(rec, f.battleID)
			b.reply(w, r)
		}
		return
	}
	next := rec.clone()
	br := applyReward(next.player, f.battleID, res.rep)
	br.Player = clonePlayer(next.player)
	if err := next.add(battleKey(f.battleID), &leveev1.LogicReply{Result: &leveev1.LogicReply_Battle{Battle: br}}); err != nil {
		for _, w := range f.waiters {
			b.reply(w, internalError(err))
		}
		return
	}
	b.dirty[f.playerID] = next
	b.mutations++
	for _, w := range f.waiters {
		if w == f.first {
			b.reply(w, result{reply: &leveev1.LogicReply{Result: &leveev1.LogicReply_Battle{Battle: br}}})
			continue
		}
		// The others waited for the first's battle: theirs is a replay.
		r := proto.Clone(br).(*leveev1.BattleReply)
		r.Replayed = true
		b.reply(w, result{reply: &leveev1.LogicReply{Result: &leveev1.LogicReply_Battle{Battle: r}}})
	}
}
