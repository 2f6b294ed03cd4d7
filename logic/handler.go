package logic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leveehq/levee/internal/apperr"
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
	reply, outcome, err := s.do(ctx, req)
	s.m.requests.WithLabelValues(actionName(req), outcome).Inc()
	s.m.duration.Observe(time.Since(start).Seconds())
	return reply, err
}

// do returns the reply or status error, and the outcome label.
func (s *Server) do(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, string, error) {
	id := req.GetPlayerId()
	if !token.ValidPlayerID(id) {
		return nil, "invalid", apperr.ToStatus(ctx, errPlayerID, 0)
	}
	shardID := shardmap.Shard(id, s.cfg.Shards)
	sh := s.shards[shardID]
	if sh == nil {
		return nil, "wrong_shard", status.Error(codes.FailedPrecondition, fmt.Sprintf("%v: player %s is on shard %d of %d, hosted by instance %d; this is instance %d of %d",
			ErrWrongShard, id, shardID, s.cfg.Shards, shardmap.Instance(shardID, s.cfg.Instances), s.cfg.Instance, s.cfg.Instances))
	}
	if err := validateAction(req); err != nil {
		return &leveev2.LogicReply{Backpressure: sh.backpressure(), Result: &leveev2.LogicReply_Error{Error: apperr.Reply(err, 0)}}, "rejected", nil
	}
	cl := priority.FromIncoming(ctx) // the gate's decision; logic is internal
	now := s.clk.Now()
	if req.GetStartBattle() != nil && cl != priority.Critical {
		// Cheap: a few atomic loads. A battle that could only be refused
		// locally after its turn in the queue is refused now instead.
		if wait, all := s.battleCli.allCooling(now); all {
			sh.coolingRefuse[cl.Index()].Inc()
			depth := len(sh.ch)
			err := fmt.Errorf("%w: every battle instance is cooling after refusing; the first is ready in %v", apperr.ErrBusy, wait)
			return nil, errOutcome(err), apperr.Overloaded(ctx, err, ceilMillis(wait), depth, float64(depth)/float64(cap(sh.ch)))
		}
	}
	o := &op{ctx: ctx, req: req, class: cl, arrived: now, done: make(chan result, 1)}
	if depth, retryAfter, err := s.admit(sh, o); err != nil {
		if errors.Is(err, apperr.ErrBusy) {
			return nil, errOutcome(err), apperr.Overloaded(ctx, err, retryAfter, depth, float64(depth)/float64(cap(sh.ch)))
		}
		return nil, errOutcome(err), apperr.ToStatus(ctx, err, 0)
	}
	var r result
	select {
	case r = <-o.done:
	case <-ctx.Done():
		r = result{err: ctx.Err()}
	case <-s.shardsDone:
		// Only after a forced stop: the shard exited before answering.
		r = result{err: apperr.ErrShuttingDown}
	}
	if r.err != nil {
		if errors.Is(r.err, apperr.ErrBusy) {
			depth := len(sh.ch)
			return nil, errOutcome(r.err), apperr.Overloaded(ctx, r.err, r.pushback, depth, float64(depth)/float64(cap(sh.ch)))
		}
		return nil, errOutcome(r.err), apperr.ToStatus(ctx, r.err, r.pushback)
	}
	switch {
	case r.reply.GetError() != nil:
		return r.reply, "rejected", nil
	case r.reply.GetBuyItem().GetReplayed(), r.reply.GetBattle().GetReplayed():
		return r.reply, "replayed", nil
	}
	return r.reply, "ok", nil
}

// ceilMillis rounds d up to a whole millisecond (the unit of retry_after_ms
// in the status details), at least 1 ms, so that a short wait is not sent as "0".
func ceilMillis(d time.Duration) time.Duration {
	return max(((d+time.Millisecond-1)/time.Millisecond)*time.Millisecond, time.Millisecond)
}

// validateAction checks what can be checked without the player's state, so
// that a bad request never takes a place in a shard's queue.
func validateAction(req *leveev2.LogicRequest) error {
	switch a := req.GetAction().(type) {
	case *leveev2.LogicRequest_Login:
		return nil
	case *leveev2.LogicRequest_GetProfile:
		if p := a.GetProfile.GetPlayerId(); p != "" && p != req.GetPlayerId() {
			return fmt.Errorf("%w: you may only read your own profile", apperr.ErrForbidden)
		}
		return nil
	case *leveev2.LogicRequest_BuyItem:
		if req.GetRequestId() == 0 {
			return fmt.Errorf("%w: a purchase needs a non-zero request_id", apperr.ErrBadRequest)
		}
		return checkQuantity(a.BuyItem.GetQuantity()) // the item is the shard's business
	case *leveev2.LogicRequest_StartBattle:
		return validateBattle(a.StartBattle)
	default:
		return fmt.Errorf("%w: request has no action", apperr.ErrBadRequest)
	}
}

// actionName is the logic_requests_total action label.
func actionName(req *leveev2.LogicRequest) string {
	switch req.GetAction().(type) {
	case *leveev2.LogicRequest_Login:
		return "login"
	case *leveev2.LogicRequest_GetProfile:
		return "get_profile"
	case *leveev2.LogicRequest_BuyItem:
		return "buy_item"
	case *leveev2.LogicRequest_StartBattle:
		return "start_battle"
	default:
		return "none"
	}
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
