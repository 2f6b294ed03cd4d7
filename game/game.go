// Package game is how a studio puts its own game in Levee. A game declares
//
//   - its player state: its own protobuf message, which Levee stores,
//     versions, caches, group-commits and shards by player id;
//   - its actions: a name, request and reply messages, a class (Critical,
//     Default or Sheddable) and whether it mutates the state; the handler
//     runs on the player's shard with the player's state;
//   - its compute jobs for the stateless CPU tier, and the actions that run
//     one and apply its result to the state exactly once.
//
// Levee gives every mutation idempotency by request id without the game
// writing a line: the first outcome (a reply or a game error) is final, a
// resend gets it back marked replayed, and a resend older than the
// idempotency window is REQUEST_EXPIRED. The gate learns each action's class
// and limits from the declaration; overloaded tiers shed Sheddable work
// first and Critical work last.
//
// A handler must be quick (the shard's other players wait for it: budget
// 1 ms, see logic_handler_duration_seconds and the alert LeveeHandlerSlow),
// deterministic given its inputs and Ctx.Now, and must not keep the state
// or request it is given after it returns. A handler that panics fails
// only its own request, with INTERNAL.
//
// The tiers run a declaration: a game's own binaries call gatecmd.Main,
// logiccmd.Main, battlecmd.Main (and loadtestcmd.Main) with its *Game, as
// Levee's cmd/* do with the demo game, examples/arena; logic.Config.Game
// takes it when a tier is built in code. Package gametest runs a game's
// handlers in a test without a cluster. See docs/writing-a-game.md.
package game

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/gamedef"
)

// Game is a game's declaration. Build it with New and the declaring
// functions (Mutation, Query, Job, JobAction) before the tiers start; it
// is read-only once a tier runs it.
type Game struct{ def *gamedef.Def }

// Class is how important an action is; overloaded tiers shed Sheddable work
// first and Critical work last.
type Class = gamedef.Class

const (
	// Critical work (purchases, trades) is shed last.
	Critical = gamedef.Critical
	// Default work is shed when a tier is full.
	Default = gamedef.Default
	// Sheddable work (chat, emotes) is shed first.
	Sheddable = gamedef.Sheddable
)

// Ctx is what a handler knows of the request it serves: the player, the
// request id, the state's version and the shard's clock (Now).
type Ctx = gamedef.Ctx

// New declares a game called name (1-63 characters of [a-z0-9_]) whose
// player state is S; initial is a new player's state.
func New[S proto.Message](name string, initial func(playerID string) S) *Game {
	var zero S
	return &Game{def: gamedef.New(name, zero.ProtoReflect().Type(), func(id string) proto.Message { return initial(id) })}
}

// Name is the game's name.
func (g *Game) Name() string { return g.def.Name }

// Validate reports every reason the declaration cannot work, each naming
// its action or job: a duplicate name, a missing class, a job action
// without a key, a continuation for an unknown job, a job's request or
// reply type that does not match. The tiers call it at start-up and refuse
// to start on an error.
func (g *Game) Validate() error { return g.def.Validate() }

// Def is the declaration as Levee's tiers run it. Games do not need it.
func (g *Game) Def() *gamedef.Def { return g.def }

// An Option changes one action's declaration.
type Option func(a *gamedef.Action)

// MaxRequestBytes caps the action's encoded request at n bytes (the gate's
// -max-frame otherwise); a larger one is BAD_REQUEST at the gate.
func MaxRequestBytes(n int) Option { return func(a *gamedef.Action) { a.MaxRequestBytes = n } }

// ReadsPlayer lets a Query read another player's state: target names the
// player from the request ("" is the sender). Without it a Query reads only
// the sender's state.
func ReadsPlayer[Req proto.Message](target func(req Req) string) Option {
	return func(a *gamedef.Action) {
		a.Target = func(req proto.Message) string { return target(req.(Req)) }
	}
}

func apply(a *gamedef.Action, opts []Option) *gamedef.Action {
	for _, o := range opts {
		o(a)
	}
	return a
}

// Mutation declares an action that changes the player's state. h gets a
// copy of the state, which it may change in place, and returns the reply
// and the new state; an error from Invalid, Reject, NotFound or Forbidden
// is the outcome (final, like a reply), any other error is INTERNAL and
// changes nothing.
func Mutation[S, Req, Rep proto.Message](g *Game, name string, class Class, h func(c *Ctx, state S, req Req) (Rep, S, error), opts ...Option) {
	var req Req
	var rep Rep
	a := &gamedef.Action{Name: name, Class: class, Mutates: true,
		Request: req.ProtoReflect().Type(), Reply: rep.ProtoReflect().Type()}
	if h != nil {
		a.Handle = func(c *Ctx, state, req proto.Message) (proto.Message, proto.Message, error) {
			r, next, err := h(c, state.(S), req.(Req))
			return r, next, err
		}
	}
	g.def.AddAction(apply(a, opts))
}

// Query declares a read-only action: h reads the state (its own copy) and
// returns the reply. With ReadsPlayer it reads another player's state.
func Query[S, Req, Rep proto.Message](g *Game, name string, class Class, h func(c *Ctx, state S, req Req) (Rep, error), opts ...Option) {
	var req Req
	var rep Rep
	a := &gamedef.Action{Name: name, Class: class,
		Request: req.ProtoReflect().Type(), Reply: rep.ProtoReflect().Type()}
	if h != nil {
		a.Handle = func(c *Ctx, state, req proto.Message) (proto.Message, proto.Message, error) {
			r, err := h(c, state.(S), req.(Req))
			return r, nil, err
		}
	}
	g.def.AddAction(apply(a, opts))
}

// Job declares a compute job for the stateless CPU tier (the battle
// binary). run should be deterministic: logic may run a job again after a
// failure and applies the first result it gets. ctx carries the request's
// deadline; the tier throttles, sheds and times every job by name.
func Job[Req, Rep proto.Message](g *Game, name string, run func(ctx context.Context, req Req) (Rep, error)) {
	var req Req
	var rep Rep
	j := &gamedef.Job{Name: name, Request: req.ProtoReflect().Type(), Reply: rep.ProtoReflect().Type()}
	if run != nil {
		j.Run = func(ctx context.Context, r proto.Message) (proto.Message, error) { return run(ctx, r.(Req)) }
	}
	g.def.AddJob(j)
}

// JobAction declares a mutation that runs job: key names the job's result
// from the request (e.g. a battle id the client chose; a resend with the
// same key, under any request id, gets the first outcome); start, on the
// player's shard, validates and builds the job's request; the job runs on
// the battle tier, off the shard; apply, back on the shard, applies its
// result to the state exactly once per key and returns the reply. JReq and
// JRep must be the job's request and reply types.
func JobAction[S, Req, JReq, JRep, Rep proto.Message](g *Game, name string, class Class, job string,
	key func(req Req) string,
	start func(c *Ctx, state S, req Req) (JReq, error),
	apply_ func(c *Ctx, state S, req Req, result JRep) (Rep, S, error), opts ...Option) {
	var req Req
	var rep Rep
	var jreq JReq
	var jrep JRep
	a := &gamedef.Action{Name: name, Class: class, Mutates: true,
		Request: req.ProtoReflect().Type(), Reply: rep.ProtoReflect().Type(),
		Job: job, JobReq: jreq.ProtoReflect().Type(), JobReply: jrep.ProtoReflect().Type()}
	if key != nil {
		a.Key = func(r proto.Message) string { return key(r.(Req)) }
	}
	if start != nil {
		a.Start = func(c *Ctx, state, r proto.Message) (proto.Message, error) { return start(c, state.(S), r.(Req)) }
	}
	if apply_ != nil {
		a.Apply = func(c *Ctx, state, r, res proto.Message) (proto.Message, proto.Message, error) {
			rp, next, err := apply_(c, state.(S), r.(Req), res.(JRep))
			return rp, next, err
		}
	}
	g.def.AddAction(apply(a, opts))
}

// Invalid is a validation error: BAD_REQUEST with the game's reason (a code
// of its own, e.g. "bad_quantity") and a message safe to show to a player.
func Invalid(reason, message string) error { return gameErr(apperr.ErrBadRequest, reason, message) }

// Reject is a business error: REJECTED, e.g. Reject("insufficient_gold",
// "you need 40 more gold"). Like every game error returned by a mutation,
// it is the request's final outcome: a resend gets it again.
func Reject(reason, message string) error { return gameErr(apperr.ErrRejected, reason, message) }

// NotFound is NOT_FOUND with the game's reason, e.g. an unknown item.
func NotFound(reason, message string) error { return gameErr(apperr.ErrNotFound, reason, message) }

// Forbidden is FORBIDDEN with the game's reason.
func Forbidden(reason, message string) error { return gameErr(apperr.ErrForbidden, reason, message) }

// Rejectf is Reject with a formatted message.
func Rejectf(reason, format string, args ...any) error {
	return Reject(reason, fmt.Sprintf(format, args...))
}

func gameErr(kind error, reason, message string) error {
	return &apperr.GameError{Kind: kind, Reason: reason, Message: message}
}
