package logic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/token"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// ErrWrongShard is a request for a player whose shard this instance does
// not host: the caller's shard map disagrees with ours.
var ErrWrongShard = errors.New("wrong shard")

// errPlayerID refuses a request whose player id is not a valid one.
var errPlayerID = fmt.Errorf("%w: player_id must be 1..64 characters of [A-Za-z0-9_-]", apperr.ErrBadRequest)

// Do is the Logic service: route the request to its player's shard, wait
// for the reply. Business errors come back inside the reply; overload,
// deadline, wrong-shard and infrastructure failures as gRPC status errors,
// built by apperr (the domain code, and for a refusal under load the
// shard's backpressure, in the status details).
func (s *Server) Do(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
	start := time.Now()
	reply, label, outcome, err := s.do(ctx, req)
	s.m.requests.WithLabelValues(label, outcome).Inc()
	s.m.duration.Observe(time.Since(start).Seconds())
	return reply, err
}

// do returns the reply or status error, the action label and the outcome
// label.
func (s *Server) do(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, string, string, error) {
	id := req.GetPlayerId()
	a, msg, route, label, verr := s.decode(req)
	if !token.ValidPlayerID(id) {
		return nil, label, "invalid", apperr.ToStatus(ctx, errPlayerID, 0)
	}
	shardID := shardmap.Shard(route, s.cfg.Shards)
	sh := s.hostedShard(shardID)
	if sh == nil && s.dynamic() {
		outcome, err := s.gone(ctx, shardID)
		return nil, label, outcome, err
	}
	if sh == nil {
		return nil, label, "wrong_shard", status.Error(codes.FailedPrecondition, fmt.Sprintf("%v: player %s is on shard %d of %d, hosted by instance %d; this is instance %d of %d",
			ErrWrongShard, route, shardID, s.cfg.Shards, shardmap.Instance(shardID, s.cfg.Instances), s.cfg.Instance, s.cfg.Instances))
	}
	if verr != nil {
		return &leveev2.LogicReply{Backpressure: sh.backpressure(), Result: &leveev2.LogicReply_Error{Error: apperr.Reply(verr, 0)}}, label, "rejected", nil
	}
	cl := priority.FromIncoming(ctx) // the gate's decision; logic is internal
	now := s.clk.Now()
	if a != nil && a.Job != "" && cl != priority.Critical && s.battleCli != nil {
		// Cheap: a few atomic loads. A job that could only be refused
		// locally after its turn in the queue is refused now instead.
		if wait, all := s.battleCli.allCooling(now); all {
			sh.coolingRefuse[cl.Index()].Inc()
			depth := len(sh.ch)
			err := fmt.Errorf("%w: every battle instance is cooling after refusing; the first is ready in %v", apperr.ErrBusy, wait)
			return nil, label, errOutcome(err), apperr.Overloaded(ctx, err, ceilMillis(wait), depth, float64(depth)/float64(cap(sh.ch)))
		}
	}
	o := &op{ctx: ctx, req: req, class: cl, arrived: now, done: make(chan result, 1), action: a, msg: msg, route: route}
	if depth, retryAfter, err := s.admit(sh, o); err != nil {
		if errors.Is(err, errNotHosted) {
			outcome, err := s.gone(ctx, shardID)
			return nil, label, outcome, err
		}
		if errors.Is(err, apperr.ErrBusy) {
			return nil, label, errOutcome(err), apperr.Overloaded(ctx, err, retryAfter, depth, float64(depth)/float64(cap(sh.ch)))
		}
		return nil, label, errOutcome(err), apperr.ToStatus(ctx, err, 0)
	}
	var r result
	select {
	case r = <-o.done:
	case <-ctx.Done():
		r = result{err: ctx.Err()}
	case <-s.shardsDone:
		// Only after a forced stop: the shard exited before answering.
		r = result{err: apperr.ErrShuttingDown}
	case <-sh.done:
		select {
		case r = <-o.done:
		default:
			// The shard stopped (released, lost, or the server's
			// stop) without taking the request: it was not executed.
			outcome, err := s.gone(ctx, shardID)
			return nil, label, outcome, err
		}
	}
	if r.err != nil {
		if errors.Is(r.err, apperr.ErrBusy) {
			depth := len(sh.ch)
			return nil, label, errOutcome(r.err), apperr.Overloaded(ctx, r.err, r.pushback, depth, float64(depth)/float64(cap(sh.ch)))
		}
		return nil, label, errOutcome(r.err), apperr.ToStatus(ctx, r.err, r.pushback)
	}
	switch {
	case r.reply.GetError() != nil:
		return r.reply, label, "rejected", nil
	case r.reply.GetReplayed():
		return r.reply, label, "replayed", nil
	}
	return r.reply, label, "ok", nil
}

// Action labels of requests that name no declared action.
const (
	labelNone    = "none"    // neither a login nor a call
	labelUnknown = "unknown" // a call of an action the game does not declare
)

// decode checks what can be checked without the player's state, so that a
// bad request never takes a place in a shard's queue: the action it calls
// (nil for a login), its request decoded as the action's, and the player
// whose shard serves it (route: the sender, or the target of a query
// declared to read another player). label is the logic_requests_total
// action label. A bad request still gets a route (the sender) and err, a
// domain error for its reply.
func (s *Server) decode(req *leveev2.LogicRequest) (a *gamedef.Action, msg proto.Message, route, label string, err error) {
	route = req.GetPlayerId()
	switch k := req.GetKind().(type) {
	case *leveev2.LogicRequest_Login:
		return nil, nil, route, gamedef.LoginAction, nil
	case *leveev2.LogicRequest_Call:
		name := k.Call.GetAction()
		a, ok := s.def.Action(name)
		if !ok {
			return nil, nil, route, labelUnknown, fmt.Errorf("%w: the game declares no action %q", apperr.ErrUnknownMessage, clip(name))
		}
		body := k.Call.GetRequest()
		if a.MaxRequestBytes > 0 && len(body) > a.MaxRequestBytes {
			return nil, nil, route, a.Name, fmt.Errorf("%w: action %q's request is %d bytes, at most %d", apperr.ErrBadRequest, a.Name, len(body), a.MaxRequestBytes)
		}
		msg = a.Request.New().Interface()
		if err := proto.Unmarshal(body, msg); err != nil {
			return nil, nil, route, a.Name, fmt.Errorf("%w: action %q's request is no %s: %v", apperr.ErrBadRequest, a.Name, a.Request.Descriptor().FullName(), err)
		}
		if a.Mutates && a.Job == "" && req.GetRequestId() == 0 {
			return nil, nil, route, a.Name, fmt.Errorf("%w: action %q mutates and needs a non-zero request_id", apperr.ErrBadRequest, a.Name)
		}
		if a.Target != nil {
			sender, target := route, route
			if err := s.guard(a.Name, sender, func() error { target = a.Route(sender, msg); return nil }); err != nil {
				return nil, nil, route, a.Name, fmt.Errorf("%w: %w", apperr.ErrInternal, err)
			}
			if !token.ValidPlayerID(target) {
				return nil, nil, route, a.Name, fmt.Errorf("%w: action %q reads player %q, which is no valid player id", apperr.ErrBadRequest, a.Name, clip(target))
			}
			route = target
		}
		return a, msg, route, a.Name, nil
	default:
		return nil, nil, route, labelNone, fmt.Errorf("%w: request has no action", apperr.ErrBadRequest)
	}
}

// clip cuts a name from a request to 64 bytes for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// ceilMillis rounds d up to a whole millisecond (the unit of retry_after_ms
// in the status details), at least 1 ms, so that a short wait is not sent as "0".
func ceilMillis(d time.Duration) time.Duration {
	return max(((d+time.Millisecond-1)/time.Millisecond)*time.Millisecond, time.Millisecond)
}

// errOutcome is the logic_requests_total outcome label for a status error.
func errOutcome(err error) string {
	switch {
	case errors.Is(err, apperr.ErrBusy):
		return "busy"
	case errors.Is(err, apperr.ErrDeadline), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "expired"
	case errors.Is(err, apperr.ErrShuttingDown):
		return "shutting_down"
	default:
		return "failed"
	}
}
