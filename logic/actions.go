package logic

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/priority"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// busyPushback is the retry delay sent with RESOURCE_EXHAUSTED.
const busyPushback = 100 * time.Millisecond

var errNoPlayer = fmt.Errorf("%w: player not found; log in first", apperr.ErrNotFound)

// record returns a player's current state as this batch sees it: its own
// uncommitted copy first, then the cache, then the store. (nil, nil) when
// the player does not exist. The result is read-only: a mutation gives the
// game's handler a copy of the state and puts a new record in b.dirty once
// complete, so neither the committed record nor the batch's copy is ever
// left half changed.
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

// ctx is the handler context of o, whose player's state is at version.
func (sh *shard) ctx(o *op, version uint64) *gamedef.Ctx {
	name := gamedef.LoginAction
	if o.action != nil {
		name = o.action.Name
	}
	return gamedef.NewCtx(name, o.req.GetPlayerId(), o.req.GetRequestId(), version, sh.srv.clk.Now())
}

func (sh *shard) login(b *batch, o *op) {
	id := o.req.GetPlayerId()
	rec, err := sh.record(b, id)
	if err != nil {
		b.reply(o, internalError(err))
		return
	}
	if rec == nil {
		def := sh.srv.def
		var state proto.Message
		if err := sh.srv.guard(gamedef.LoginAction, id, func() error {
			state = def.Initial(id)
			return nil
		}); err != nil {
			b.reply(o, internalError(err))
			return
		}
		if err := checkType("the initial state", state, def.State); err != nil {
			b.reply(o, internalError(err))
			return
		}
		rec = &record{state: state, version: 1}
		b.dirty[id] = rec
		b.mutations++
	}
	enc, err := proto.Marshal(rec.state)
	if err != nil {
		b.reply(o, internalError(fmt.Errorf("encode the state of %s: %w", id, err)))
		return
	}
	b.reply(o, result{reply: &leveev2.LogicReply{Version: rec.version, Result: &leveev2.LogicReply_Welcome{
		Welcome: &leveev2.Welcome{State: enc, Shard: uint32(sh.id), Version: rec.version, PlayerId: id},
	}}})
}

// query serves a read-only action: the handler reads a copy of the state
// of o.route (the sender, or the player it is declared to read).
func (sh *shard) query(b *batch, o *op) {
	rec, err := sh.record(b, o.route)
	if err != nil {
		b.reply(o, internalError(err))
		return
	}
	if rec == nil {
		b.reply(o, businessError(errNoPlayer))
		return
	}
	a := o.action
	var reply proto.Message
	err = sh.srv.guard(a.Name, o.req.GetPlayerId(), func() (err error) {
		reply, _, err = a.Handle(sh.ctx(o, rec.version), rec.copyState(), o.msg)
		return err
	})
	if r, ok := gameOutcome(err); ok {
		b.reply(o, r)
		return
	}
	enc, err := encodeReply(a, reply)
	if err != nil {
		b.reply(o, internalError(err))
		return
	}
	b.reply(o, result{reply: &leveev2.LogicReply{Version: rec.version, Result: &leveev2.LogicReply_Reply{Reply: enc}}})
}

// gameOutcome sorts a handler's error: nil is no outcome yet (ok false);
// a game's error (game.Invalid, Reject, ...) is the request's outcome, a
// business error; any other error, or a panic (guard), is INTERNAL.
func gameOutcome(err error) (result, bool) {
	if err == nil {
		return result{}, false
	}
	if ge := (*apperr.GameError)(nil); errors.As(err, &ge) {
		return businessError(ge), true
	}
	return internalError(err), true
}

// isFinal says whether r is an outcome to store: a reply (a business
// error included), not an INTERNAL failure.
func isFinal(r result) bool { return r.err == nil }

// checkType refuses a message of the wrong type (or none) from game code.
func checkType(what string, m proto.Message, want protoreflect.MessageType) error {
	if m == nil || !m.ProtoReflect().IsValid() {
		return fmt.Errorf("%s is nil, want a %s", what, want.Descriptor().FullName())
	}
	if got := m.ProtoReflect().Descriptor().FullName(); got != want.Descriptor().FullName() {
		return fmt.Errorf("%s is a %s, want a %s", what, got, want.Descriptor().FullName())
	}
	return nil
}

// encodeReply encodes a handler's reply, which must be the action's reply
// type; a nil reply is an empty one.
func encodeReply(a *gamedef.Action, reply proto.Message) ([]byte, error) {
	if reply == nil || !reply.ProtoReflect().IsValid() {
		return nil, nil
	}
	if err := checkType(fmt.Sprintf("action %q's reply", a.Name), reply, a.Reply); err != nil {
		return nil, err
	}
	enc, err := proto.Marshal(reply)
	if err != nil {
		return nil, fmt.Errorf("encode action %q's reply: %w", a.Name, err)
	}
	return enc, nil
}

// nextRecord is the record after a successful mutation of rec: the
// handler's next state (nil or a nil pointer: unchanged), the version
// bumped.
func (sh *shard) nextRecord(a *gamedef.Action, rec *record, next proto.Message) (*record, error) {
	if next == nil || !next.ProtoReflect().IsValid() {
		return &record{state: rec.state, version: rec.version + 1}, nil
	}
	if err := checkType(fmt.Sprintf("action %q's next state", a.Name), next, sh.srv.def.State); err != nil {
		return nil, err
	}
	return &record{state: next, version: rec.version + 1}, nil
}

// Idempotency. A mutation is identified by its request id and an action
// that runs a job also by its job key (the game's key for it, e.g. a battle
// id). Its first outcome, a reply or a game's error, is stored under each
// of its keys with the change it answers, in the same commit, and is kept
// for the idempotency window (plus maxIssuedSkew); a resend under a key
// with a stored outcome gets that outcome back, marked replayed, and
// nothing is applied. A key used again for a different request is
// BAD_REQUEST, and so is an issued_at_ms too far in the future. Answers
// that say the request was not executed (busy, expired in the queue,
// shutting down, job tier unavailable, player not logged in, malformed
// request, a failure of the game's code) store nothing: the id stays open.

var (
	errKeyReused     = fmt.Errorf("%w: request id already used for a different request", apperr.ErrBadRequest)
	errJobKeyReused  = fmt.Errorf("%w: job key already used for a different request", apperr.ErrBadRequest)
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
	if !sameRequest(so, o) {
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
	if up := sh.store.purgedUpTo(); up > 0 && !at.After(time.UnixMilli(up).Add(maxIssuedSkew)) {
		return errTooOldForKeys
	}
	return nil
}

// store adds reply as the outcome of req under every key to the batch
// (written with its commit, before any answer goes out): all of them, or
// none when it cannot be encoded.
func (b *batch) store(req *leveev2.LogicRequest, reply *leveev2.LogicReply, now time.Time, keys ...string) error {
	enc, err := encodeOutcome(now, req.GetCall(), reply)
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

// final answers o with r and stores r as its outcome under keys; false (and
// INTERNAL for o) when it could not be stored.
func (sh *shard) final(b *batch, o *op, r result, now time.Time, keys ...string) bool {
	if err := b.store(o.req, r.reply, now, keys...); err != nil {
		b.reply(o, internalError(err))
		return false
	}
	b.reply(o, r)
	return true
}

// mutate serves a mutation: idempotent by request id, then the game's
// handler on a copy of the state.
func (sh *shard) mutate(b *batch, o *op) {
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
		// The id belongs to a job still in flight.
		b.reply(o, businessError(errKeyReused))
		return
	}
	now := sh.srv.clk.Now()
	if err := sh.checkIssued(o, now); err != nil {
		b.reply(o, businessError(err))
		return
	}
	a := o.action
	var reply, next proto.Message
	err = sh.srv.guard(a.Name, id, func() (err error) {
		reply, next, err = a.Handle(sh.ctx(o, rec.version), rec.copyState(), o.msg)
		return err
	})
	if r, ok := gameOutcome(err); ok {
		if isFinal(r) {
			sh.final(b, o, r, now, key)
		} else {
			b.reply(o, r)
		}
		return
	}
	sh.commitMutation(b, o, rec, reply, next, now, key)
}

// commitMutation puts a successful mutation of rec in the batch: the new
// record (version bumped) and the reply, stored under keys, for o.
func (sh *shard) commitMutation(b *batch, o *op, rec *record, reply, next proto.Message, now time.Time, keys ...string) (*leveev2.LogicReply, bool) {
	a := o.action
	enc, err := encodeReply(a, reply)
	if err == nil {
		rec, err = sh.nextRecord(a, rec, next)
	}
	if err != nil {
		b.reply(o, internalError(err))
		return nil, false
	}
	lr := &leveev2.LogicReply{Version: rec.version, Result: &leveev2.LogicReply_Reply{Reply: enc}}
	if !sh.final(b, o, result{reply: lr}, now, keys...) {
		return nil, false
	}
	b.dirty[o.req.GetPlayerId()] = rec
	b.mutations++
	return lr, true
}

// jobKeys are the outcome keys of a job action's request: its job key's
// and, when it has one, its request id's.
func jobKeys(o *op, key string) []string {
	id := o.req.GetPlayerId()
	keys := []string{jobKey(id, o.action.Job, key)}
	if rid := o.req.GetRequestId(); rid != 0 {
		keys = append(keys, requestKey(id, rid))
	}
	return keys
}

// maxJobKey bounds the key a game chooses for a job (e.g. a battle id).
const maxJobKey = 128

// startJob serves an action that runs a job: idempotent by request id and
// by job key; the game's start builds the job's request, which runs on the
// job tier after the batch commits (launch).
func (sh *shard) startJob(b *batch, o *op) {
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
	a := o.action
	var key string
	if err := sh.srv.guard(a.Name, id, func() error { key = a.Key(o.msg); return nil }); err != nil {
		b.reply(o, internalError(err))
		return
	}
	if key == "" || len(key) > maxJobKey {
		b.reply(o, businessError(fmt.Errorf("%w: action %q needs a job key of 1..%d bytes from its request, got %d", apperr.ErrBadRequest, a.Name, maxJobKey, len(key))))
		return
	}
	keys := jobKeys(o, key)
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
	if r, done := sh.prior(b, o, keys[0], errJobKeyReused); done {
		b.reply(o, r)
		return
	}
	if f := sh.flights[keys[0]]; f != nil {
		if f.first.action != a || !proto.Equal(f.first.msg, o.msg) {
			b.reply(o, businessError(errJobKeyReused))
			return
		}
		// A request with an id of its own joins the job under it too:
		// the outcome is stored under that id, and until then the id
		// is taken.
		if len(keys) > 1 && sh.reqFlights[keys[1]] == nil {
			f.keys = append(f.keys, keys[1])
			sh.reqFlights[keys[1]] = f
		}
		f.waiters = append(f.waiters, o)
		return
	}
	now := sh.srv.clk.Now()
	if err := sh.checkIssued(o, now); err != nil {
		b.reply(o, businessError(err))
		return
	}
	if b.stopping {
		b.reply(o, sh.stopErr)
		return
	}
	var jreq proto.Message
	err = sh.srv.guard(a.Name, id, func() (err error) {
		jreq, err = a.Start(sh.ctx(o, rec.version), rec.copyState(), o.msg)
		return err
	})
	if r, ok := gameOutcome(err); ok {
		if isFinal(r) {
			sh.final(b, o, r, now, keys...)
		} else {
			b.reply(o, r)
		}
		return
	}
	enc, err := sh.encodeJobRequest(a, jreq)
	if err != nil {
		b.reply(o, internalError(err))
		return
	}
	f := &flight{
		key:      keys[0],
		keys:     keys,
		playerID: id,
		jobKey:   key,
		req:      enc,
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

// encodeJobRequest encodes what a's start returned, which must be its
// job's request type.
func (sh *shard) encodeJobRequest(a *gamedef.Action, jreq proto.Message) ([]byte, error) {
	j, _ := sh.srv.def.Job(a.Job) // Validate has checked it
	if err := checkType(fmt.Sprintf("action %q's job request", a.Name), jreq, j.Request); err != nil {
		return nil, err
	}
	enc, err := proto.Marshal(jreq)
	if err != nil {
		return nil, fmt.Errorf("encode action %q's job request: %w", a.Name, err)
	}
	return enc, nil
}

// launch runs f's job call on its own goroutine, bounded by MaxBattles.
// The result comes back through the shard's internal channel, which the
// shard drains before its requests; that send is not subject to admission
// (it must never be refused) and gives up only when the shard stops (its
// own stop, the server's, or its exit: a released or lost shard has failed
// the flight already, and the result is dropped).
func (sh *shard) launch(f *flight) {
	s := sh.srv
	select {
	case s.battleSem <- struct{}{}:
	default:
		sh.failFlight(f, result{
			err:      fmt.Errorf("%w: %d jobs in flight", apperr.ErrBusy, cap(s.battleSem)),
			pushback: busyPushback,
		})
		return
	}
	s.battleWG.Add(1)
	go func() {
		defer s.battleWG.Done()
		defer func() { <-s.battleSem }()
		// The first request's deadline and criticality travel to the job
		// tier.
		ctx := priority.Outgoing(f.first.ctx, f.first.class)
		rep, pushback, err := s.jobs.Run(ctx, f.first.action.Job, f.jobKey, f.req, f.first.class)
		msg := &op{job: &jobResult{key: f.key, rep: rep, err: err, pushback: pushback}}
		select {
		case sh.in <- msg:
		case <-sh.stop:
		case <-sh.done:
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

// applyJob applies a finished job's result exactly once, with the game's
// continuation, and answers every request that waited for it.
func (sh *shard) applyJob(b *batch, res *jobResult) {
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
	failAll := func(err error) {
		for _, w := range f.waiters {
			b.reply(w, internalError(err))
		}
	}
	a := f.first.action
	j, _ := sh.srv.def.Job(a.Job)
	jrep := j.Reply.New().Interface()
	if err := proto.Unmarshal(res.rep, jrep); err != nil {
		failAll(fmt.Errorf("decode job %q's reply: %w", a.Job, err))
		return
	}
	rec, err := sh.record(b, f.playerID)
	if err == nil && rec == nil {
		err = errNoPlayer
	}
	if err != nil {
		failAll(err)
		return
	}
	if so, err := sh.outcome(b, f.key); err != nil || so != nil {
		// Stored meanwhile: cannot happen while the flight is known, but
		// the result must never be applied twice.
		for _, w := range f.waiters {
			r, _ := sh.prior(b, w, f.key, errJobKeyReused)
			b.reply(w, r)
		}
		return
	}
	now := sh.srv.clk.Now()
	var reply, next proto.Message
	err = sh.srv.guard(a.Name, f.playerID, func() (err error) {
		reply, next, err = a.Apply(sh.ctx(f.first, rec.version), rec.copyState(), f.first.msg, jrep)
		return err
	})
	var lr *leveev2.LogicReply
	if r, ok := gameOutcome(err); ok {
		if !isFinal(r) {
			for _, w := range f.waiters {
				b.reply(w, r)
			}
			return
		}
		if !sh.final(b, f.first, r, now, f.keys...) {
			for _, w := range f.waiters[1:] {
				b.reply(w, internalError(errors.New("the job's outcome could not be stored")))
			}
			return
		}
		lr = r.reply
	} else {
		var ok bool
		if lr, ok = sh.commitMutation(b, f.first, rec, reply, next, now, f.keys...); !ok {
			for _, w := range f.waiters[1:] {
				b.reply(w, internalError(errors.New("the job's result could not be applied")))
			}
			return
		}
	}
	for _, w := range f.waiters {
		if w == f.first {
			continue // answered by final
		}
		// The others waited for the first's job: theirs is a replay.
		r := proto.Clone(lr).(*leveev2.LogicReply)
		r.Replayed = true
		b.reply(w, result{reply: r})
	}
}

// businessError is a typed error inside a LogicReply.
func businessError(err error) result {
	return result{reply: &leveev2.LogicReply{Result: &leveev2.LogicReply_Error{Error: apperr.Reply(err, 0)}}}
}

// internalError is the answer to a request that failed for err: INTERNAL,
// except for a store that could not be reached (a read from PostgreSQL
// while it is down), which is UNAVAILABLE with a retry delay: nothing was
// executed.
func internalError(err error) result {
	if errors.Is(err, ErrStore) {
		if r := storeReason(err); r == reasonUnavailable || r == reasonFenced {
			return unavailable(r, err)
		}
	}
	return result{err: fmt.Errorf("%w: %w", apperr.ErrInternal, err)}
}
