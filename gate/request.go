package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

const (
	// inflightRetryAfter is the pause suggested to a player who has too
	// many requests in flight on one connection.
	inflightRetryAfter = 100 * time.Millisecond
	// shuttingDownRetryAfter is the pause suggested while the gate stops.
	shuttingDownRetryAfter = time.Second
)

// handleFrame answers one frame: at once with a typed error when it cannot
// be routed or a limit refuses it, otherwise from a goroutine of its own, so
// the reader never blocks on logic. Every frame gets exactly one reply.
// The reader counted the frame as pending (beginPending); handleFrame
// reports whether that goroutine took the count over (and ends it once the
// reply is written), else the reader ends it.
//
// Every frame read costs a token of the connection's rate limit, malformed
// ones included, so a flood of garbage is throttled like any other.
func (c *conn) handleFrame(data []byte) (async bool) {
	start := time.Now()
	c.heard() // any frame is a sign of life
	f, req, refusal := c.s.decodeFrame(c.codec, data)
	var a *action
	name, class := actionInvalid, priority.Default
	if refusal == nil {
		a = c.s.actions[f.GetAction()] // the codec knows only declared actions
		name = a.name
		class = c.s.classify(a, f.GetCriticality())
	}
	id := f.GetRequestId()
	if refusal != nil {
		id = refusal.GetRequestId() // the id decodeFrame could read, if any
	}
	if c.replaced.Load() {
		// A newer connection of the player took over; this one closes
		// (4001) once what it has in flight is answered.
		c.reply(name, start, errorFrame(id, apperr.ErrReplaced, 0))
		return false
	}
	if c.s.cfg.connRateLimitOn() {
		if wait, ok := c.bucket.allow(c.s.clock.Now()); !ok {
			c.s.rejectRequest(reqRateLimited, class)
			c.reply(name, start, errorFrame(id, errRateLimited, ceilMillis(wait)))
			return false
		}
	}
	if c.s.pLimits.on() {
		// The player's rate, across all its connections on this gate.
		if wait, ok := c.s.pLimits.allow(c.playerID, c.s.clock.Now()); !ok {
			c.s.rejectRequest(reqPlayerRate, class)
			c.reply(name, start, errorFrame(id, errPlayerRate, ceilMillis(wait)))
			return false
		}
	}
	if refusal != nil {
		c.reply(actionInvalid, start, refusal)
		return false
	}
	if c.lineState.Load() != lineIn {
		c.reply(name, start, errorFrame(id, errNotAdmitted, c.s.line.notAdmittedRetry(c, c.s.clock.Now())))
		return false
	}
	shard := c.shard
	if a.target != nil {
		// An action that reads another player's state goes to that
		// player's shard; logic reads the target from the request there.
		target, err := a.targetOf(c.playerID, req)
		if err != nil {
			c.s.log.Error("routing a request", "action", name, "err", err)
			c.reply(name, start, errorFrame(id, apperr.ErrInternal, 0))
			return false
		}
		if target != c.playerID {
			shard = c.s.logic.shardOf(target)
		}
	}
	if !c.s.beginRequest() {
		c.reply(name, start, errorFrame(id, apperr.ErrShuttingDown, shuttingDownRetryAfter))
		return false
	}
	if c.s.cfg.logicPushbackOn() {
		// Logic refused this shard's requests of this class a moment ago:
		// answer for it, without a gRPC call (critical always goes on).
		if left, ok := c.s.cooling.cooling(shard, a.kind, class, c.s.clock); ok {
			c.s.endRequest()
			c.s.rejectRequest(reqCooling, class)
			c.reply(name, start, c.s.cooling.refusal(id, shard, left))
			return false
		}
	}
	if n := c.inflight.Add(1); c.s.cfg.inflightLimitOn() && int(n) > c.s.cfg.MaxInFlight {
		c.inflight.Add(-1)
		c.s.endRequest()
		c.s.rejectRequest(reqInflight, class)
		c.reply(name, start, errorFrame(id, errInflight, inflightRetryAfter))
		return false
	}
	go func() {
		defer c.endPending()   // last: the reply is out before a replaced connection closes
		defer c.s.endRequest() // after the reply is written, so shutdown waits for it
		out := c.s.do(c.ctx, shard, logicRequest(c.playerID, f), class, a.kind, c.budget(f))
		// The slot is free before the player can see the reply, so a player
		// who waits for replies is never refused for being over the limit.
		c.inflight.Add(-1)
		c.reply(name, start, out)
	}()
	return true
}

// errNotAdmitted answers a request from a player still in the line.
var errNotAdmitted = fmt.Errorf("%w: you are still in line; requests are answered once you are welcomed", apperr.ErrNotAdmitted)

// rejectRequest counts a request the gate refused itself (reason is an
// index into requestReasons).
func (s *Server) rejectRequest(reason int, crit priority.Class) {
	s.m.rejectRequest[reason].Inc()
	s.m.rejectRequestCrit[reason][crit.Index()].Inc()
}

// ceilMillis rounds d up to a whole millisecond, so a retry_after in
// milliseconds is never shorter than the real wait (and never 0).
func ceilMillis(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// budget is the request's deadline: the client's timeout_ms when it is set
// and shorter than the gate's -request-timeout.
func (c *conn) budget(f *leveev2.ClientFrame) time.Duration {
	d := c.s.cfg.RequestTimeout
	if ms := f.GetTimeoutMs(); ms > 0 {
		d = min(d, time.Duration(ms)*time.Millisecond)
	}
	return d
}

// reply counts the reply to a request for action and writes it.
func (c *conn) reply(action string, start time.Time, f *leveev2.ServerFrame) {
	c.s.observe(action, start, f)
	_ = c.sendReply(f, action)
}

func (s *Server) observe(action string, start time.Time, f *leveev2.ServerFrame) {
	s.m.requests.WithLabelValues(action, outcome(f)).Inc()
	s.m.duration.WithLabelValues(action).Observe(time.Since(start).Seconds())
}

// decodeFrame parses a frame and its request; when it cannot be routed it
// returns the typed error reply instead, with the frame's request id
// whenever it could be read (see wire.DecodeClient): UNKNOWN_MESSAGE for
// an unknown action or field, BAD_REQUEST for anything else (a request
// that is not the action's, a malformed frame), each with a message that
// says what was wrong. A frame whose id cannot be read is BAD_REQUEST
// with id 0.
func (s *Server) decodeFrame(codec *wire.Codec, data []byte) (*leveev2.ClientFrame, proto.Message, *leveev2.ServerFrame) {
	f, req, err := codec.DecodeClient(data)
	if err == nil {
		if _, ok := s.actions[f.GetAction()]; ok {
			return f, req, nil
		}
		// Not reached: the codec resolves actions from the same declaration.
		return nil, nil, errorFrame(f.GetRequestId(), fmt.Errorf("%w: unknown action %q", apperr.ErrUnknownMessage, f.GetAction()), 0)
	}
	var fe *wire.FrameError
	if !errors.As(err, &fe) { // not from this decoder: nothing can be read
		return nil, nil, errorFrame(0, fmt.Errorf("%w: malformed frame", apperr.ErrBadRequest), 0)
	}
	switch {
	case fe.RequestID != 0 && (errors.Is(err, wire.ErrUnknownPayload) || errors.Is(err, wire.ErrUnknownAction)):
		return nil, nil, errorFrame(fe.RequestID, fmt.Errorf("%w: %s", apperr.ErrUnknownMessage, fe.Detail), 0)
	case errors.Is(err, wire.ErrMalformed):
		return nil, nil, errorFrame(fe.RequestID, fmt.Errorf("%w: malformed frame: %s", apperr.ErrBadRequest, fe.Detail), 0)
	default:
		return nil, nil, errorFrame(fe.RequestID, fmt.Errorf("%w: %s", apperr.ErrBadRequest, fe.Detail), 0)
	}
}

func errorFrame(id uint64, err error, retryAfter time.Duration) *leveev2.ServerFrame {
	return &leveev2.ServerFrame{RequestId: id, Payload: &leveev2.ServerFrame_Error{Error: apperr.Reply(err, retryAfter)}}
}

// logicRequest builds the logic call for a frame: the action and its
// request's bytes as the player sent them (binary) or as the gate encoded
// them (JSON). The player id is the token's, never anything the client
// sent.
func logicRequest(playerID string, f *leveev2.ClientFrame) *leveev2.LogicRequest {
	return &leveev2.LogicRequest{PlayerId: playerID, RequestId: f.GetRequestId(), IssuedAtMs: f.GetIssuedAtMs(),
		Kind: &leveev2.LogicRequest_Call{Call: &leveev2.Call{Action: f.GetAction(), Request: f.GetRequest()}}}
}

// do calls logic for a request of shard with the budget as the gRPC
// deadline and the class in metadata, and turns the outcome into the
// player's reply frame. A refusal comes back through apperr.FromStatus with
// its exact code (BUSY, SERVER_FULL, RATE_LIMITED, …), the retry delay as
// retry_after and the refusing shard's hints (leveev2.Backpressure, from
// the status details) as the frame's backpressure; a reply keeps the
// backpressure logic attached to it. With -logic-pushback a refusal under
// load (apperr.Overload) also starts the shard's cooling and the hints are
// kept for the gate's own refusals (see coolingTable).
//
// The gate never retries a request logic may have executed. The one
// request it sends again is one logic refused as not its shard's owner
// (apperr.NotOwner: not executed, logic on PostgreSQL): it goes to the
// owner named, which is cached for the shard's next requests, at most
// maxRedirects times within the one budget; past that it is refused BUSY
// with redirectRetryAfter. A cached owner whose connection is failing, or
// that answers UNAVAILABLE or lets the budget run out (DEADLINE_EXCEEDED),
// is forgotten: the shard's next request goes to its entry point
// (logicPool).
//
// kind is the request's cooling kind (kindOther for a login).
func (s *Server) do(ctx context.Context, shard int, req *leveev2.LogicRequest, crit priority.Class, kind int, budget time.Duration) *leveev2.ServerFrame {
	lc := s.logic.route(shard)
	if lc.failing() {
		return s.unreachableFrame(req)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	ctx = priority.Outgoing(ctx, crit)
	for hops := 0; ; hops++ {
		rep, err := lc.client.Do(ctx, req)
		if err == nil {
			if bp := rep.GetBackpressure(); bp != nil {
				s.pressure.Observe(bp.GetRatio())
				if s.cfg.logicPushbackOn() {
					s.cooling.hints(shard, bp)
				}
			}
			return serverFrame(req.GetRequestId(), rep)
		}
		if s.baseCtx.Err() != nil {
			return errorFrame(req.GetRequestId(), apperr.ErrShuttingDown, shuttingDownRetryAfter)
		}
		ownerShard, addr, redirect := apperr.OwnerOf(err)
		if !redirect {
			if code := status.Code(err); code == codes.Unavailable || code == codes.DeadlineExceeded {
				// Down, stopping, no longer the owner (apperr.NoOwner), or
				// silent for the whole budget (frozen, its connection up):
				// the next request starts from the entry point again, which
				// knows the shard's new owner once the leases have moved.
				s.logic.forget(shard, lc)
			}
			return s.refusalFrame(shard, req, crit, kind, err)
		}
		if hops == maxRedirects {
			// Owners that point at each other, or a shard moving faster
			// than the requests can follow it: let the map settle.
			s.m.redirectTooMany.Inc()
			s.logic.forget(shard, nil)
			return errorFrame(req.GetRequestId(), fmt.Errorf("%w: the game service is moving this player's data; try again", apperr.ErrBusy), redirectRetryAfter)
		}
		s.m.redirectFollowed.Inc()
		if ownerShard != shard {
			s.log.Warn("logic redirected a request for another shard: do the gate's and logic's -shards match?",
				"shard", shard, "owner_shard", ownerShard, "owner", addr, "shards", s.cfg.Shards)
		}
		next, ferr := s.logic.follow(shard, ownerShard, addr)
		if ferr != nil {
			if errors.Is(ferr, errPoolClosed) {
				return errorFrame(req.GetRequestId(), apperr.ErrShuttingDown, shuttingDownRetryAfter)
			}
			s.log.Error("following a logic redirect", "shard", shard, "owner", addr, "err", ferr)
			return errorFrame(req.GetRequestId(), fmt.Errorf("%w: the game service is moving this player's data; try again", apperr.ErrBusy), redirectRetryAfter)
		}
		if lc = next; lc.failing() {
			s.logic.forget(shard, lc)
			return s.unreachableFrame(req)
		}
	}
}

// unreachableFrame refuses a request whose logic connection is failing.
// Not sent: BUSY (not executed, so retrying is safe and nothing needs
// resending later) with the time the gate's next attempt to reach logic may
// take, instead of UNAVAILABLE (outcome unknown).
func (s *Server) unreachableFrame(req *leveev2.LogicRequest) *leveev2.ServerFrame {
	s.m.logicUnreachable.Inc()
	return errorFrame(req.GetRequestId(), fmt.Errorf("%w: the game service is unreachable", apperr.ErrBusy), logicUnreachableRetryAfter)
}

// refusalFrame is the player's frame for logic's refusal err of a request
// of shard, with logic's code, retry delay and backpressure; with
// -logic-pushback a refusal under load starts the shard's cooling.
func (s *Server) refusalFrame(shard int, req *leveev2.LogicRequest, crit priority.Class, kind int, err error) *leveev2.ServerFrame {
	refusal := apperr.FromStatus(err)
	e := refusal.Player()
	bp := refusal.Backpressure
	pushbackOn := s.cfg.logicPushbackOn()
	if bp != nil {
		s.pressure.Observe(bp.GetRatio())
		if pushbackOn {
			s.cooling.hints(shard, bp)
		}
		if bp.RetryAfterMs == 0 {
			bp.RetryAfterMs = e.GetRetryAfterMs()
		}
	}
	if pushbackOn && apperr.Overload(refusal.Code) {
		// The delay logic asked for; none (0) starts no cooling.
		s.cooling.cool(shard, kind, crit, s.clock.Now(), refusal.RetryAfter)
	}
	return &leveev2.ServerFrame{
		RequestId:    req.GetRequestId(),
		Backpressure: bp,
		Payload:      &leveev2.ServerFrame_Error{Error: e},
	}
}

// maxRedirects is how many logic redirects (apperr.NotOwner) one request
// follows: a shard's owner is one hop from any entry point, and one more
// covers an owner that moved while the gate followed it.
const maxRedirects = 3

// redirectRetryAfter is the retry_after of a request refused after
// maxRedirects hops: about logic's lease renewal period (1 s), in which
// the owner map settles.
const redirectRetryAfter = time.Second

// logicUnreachableRetryAfter is the retry_after of a request refused
// because its logic instance is unreachable: about the gate's wait between
// two connection attempts (internal/grpcdial's backoff, 0.25 s growing to
// its 3 s cap).
const logicUnreachableRetryAfter = 2 * time.Second

// serverFrame maps a LogicReply to the player's frame, oneof to oneof,
// with its replayed mark and the state's version.
func serverFrame(id uint64, rep *leveev2.LogicReply) *leveev2.ServerFrame {
	f := &leveev2.ServerFrame{RequestId: id, Backpressure: rep.GetBackpressure(), Replayed: rep.GetReplayed(), Version: rep.GetVersion()}
	switch r := rep.GetResult().(type) {
	case *leveev2.LogicReply_Error:
		f.Payload = &leveev2.ServerFrame_Error{Error: r.Error}
	case *leveev2.LogicReply_Welcome:
		f.Payload = &leveev2.ServerFrame_Welcome{Welcome: r.Welcome}
	case *leveev2.LogicReply_Reply:
		f.Payload = &leveev2.ServerFrame_Reply{Reply: r.Reply}
	default:
		f.Payload = &leveev2.ServerFrame_Error{Error: apperr.Reply(fmt.Errorf("%w: empty reply from logic", apperr.ErrInternal), 0)}
	}
	return f
}
