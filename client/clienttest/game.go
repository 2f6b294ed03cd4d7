package clienttest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/gamedef"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Game is a Handler that plays game g's declaration in-process, as the
// cluster would for one player: it answers every request in order, with
// the connection's own copy of the player's state (the game's initial
// state, version 1, as in the Welcome), and attaches idle backpressure
// hints to each reply.
//
//   - An action g does not declare is UNKNOWN_MESSAGE; a request that does
//     not decode as the action's is BAD_REQUEST.
//   - A mutation's first outcome (its reply, or a game error) is final: a
//     resend of its request id gets it again, marked replayed, and nothing
//     is applied twice. A job action's result is applied once per key.
//   - A game's error (game.Invalid, Reject, ...) is the typed error with
//     its reason; any other error or a panic is INTERNAL, nothing stored.
//   - A Query reads only the sender's state: another player named by its
//     ReadsPlayer target is NOT_FOUND (the fake gate has no other player).
//
// Jobs run inline, on the handler's goroutine. The state lives as long as
// the connection: a reconnect starts again from the initial state.
func Game(g *game.Game) Handler {
	def := g.Def()
	return func(c *Conn) {
		p := NewPlayer(def, c.Player)
		for {
			f, err := c.Recv()
			if err != nil {
				if errors.Is(err, ErrFrame) && f.GetRequestId() != 0 {
					_ = c.Send(Reply(f, apperr.Reply(fmt.Errorf("%w: %w", apperr.ErrBadRequest, err), 0)))
					continue
				}
				if errors.Is(err, ErrFrame) {
					continue
				}
				return
			}
			out := p.Serve(c.Context(), f, time.Now())
			out.Backpressure = apperr.NewBackpressure(0, 0, 0)
			if err := c.Send(out); err != nil {
				return
			}
		}
	}
}

// Player is one player's state as Game serves it: the state, its version
// and the stored outcomes of its mutations. It is not safe for concurrent
// use.
type Player struct {
	def      *gamedef.Def
	id       string
	state    proto.Message
	version  uint64
	outcomes map[uint64]*leveev2.ServerFrame // by request id
	jobs     map[string]*leveev2.ServerFrame // job actions' outcomes, by action and key
}

// NewPlayer is player id of def with the game's initial state, version 1.
func NewPlayer(def *gamedef.Def, id string) *Player {
	return &Player{def: def, id: id, state: def.Initial(id), version: 1,
		outcomes: map[uint64]*leveev2.ServerFrame{}, jobs: map[string]*leveev2.ServerFrame{}}
}

// State is the player's current state and version. Treat it as read-only.
func (p *Player) State() (proto.Message, uint64) { return p.state, p.version }

// Serve answers request f at now.
func (p *Player) Serve(ctx context.Context, f *leveev2.ClientFrame, now time.Time) *leveev2.ServerFrame {
	id := f.GetRequestId()
	if out, ok := p.outcomes[id]; ok {
		return replayed(out, id)
	}
	a, ok := p.def.Action(f.GetAction())
	if !ok {
		return Reply(f, apperr.Reply(fmt.Errorf("%w: no action %q", apperr.ErrUnknownMessage, f.GetAction()), 0))
	}
	req := a.Request.New().Interface()
	if err := proto.Unmarshal(f.GetRequest(), req); err != nil {
		return Reply(f, apperr.Reply(fmt.Errorf("%w: %s request: %v", apperr.ErrBadRequest, a.Name, err), 0))
	}
	key := ""
	if a.Job != "" {
		key = a.Name + "\x00" + a.Key(req)
		if out, ok := p.jobs[key]; ok {
			p.outcomes[id] = out
			return replayed(out, id)
		}
	}
	if a.Target != nil {
		if t := a.Target(req); t != "" && t != p.id {
			return Reply(f, apperr.Reply(fmt.Errorf("%w: player %q is not on this fake gate", apperr.ErrNotFound, t), 0))
		}
	}
	gc := gamedef.NewCtx(a.Name, p.id, id, p.version, now)
	reply, next, err := p.run(ctx, a, gc, req)
	var ge *apperr.GameError
	switch {
	case err != nil && !errors.As(err, &ge):
		// Not the game's answer: nothing stored, nothing changed.
		return Reply(f, apperr.Reply(fmt.Errorf("%w: %s: %v", apperr.ErrInternal, a.Name, err), 0))
	case err != nil:
		out := Reply(f, apperr.Reply(err, 0))
		if a.Mutates {
			p.store(id, key, out)
		}
		return out
	}
	if a.Mutates {
		if next != nil && next.ProtoReflect().IsValid() {
			p.state = next
		}
		p.version++
	}
	out := Reply(f, reply)
	out.Version = p.version
	if a.Mutates {
		p.store(id, key, out)
	}
	return out
}

// run calls a's handler (or its job's start, run and continuation) on a
// copy of the state; a panic is an error.
func (p *Player) run(ctx context.Context, a *gamedef.Action, gc *gamedef.Ctx, req proto.Message) (reply, next proto.Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			reply, next, err = nil, nil, fmt.Errorf("handler panicked: %v", r)
		}
	}()
	state := proto.Clone(p.state)
	if a.Job == "" {
		return a.Handle(gc, state, req)
	}
	jr, err := a.Start(gc, state, req)
	if err != nil {
		return nil, nil, err
	}
	j, ok := p.def.Job(a.Job)
	if !ok {
		return nil, nil, fmt.Errorf("no job %q", a.Job)
	}
	res, err := j.Run(ctx, jr)
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: %w", a.Job, err)
	}
	return a.Apply(gc, state, req, res)
}

func (p *Player) store(id uint64, key string, out *leveev2.ServerFrame) {
	p.outcomes[id] = out
	if key != "" {
		p.jobs[key] = out
	}
}

// replayed is a stored outcome answered again for request id id.
func replayed(out *leveev2.ServerFrame, id uint64) *leveev2.ServerFrame {
	r := proto.CloneOf(out)
	r.RequestId = id
	r.Replayed = true
	return r
}
