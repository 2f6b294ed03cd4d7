package battle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/shed"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// shedRetryAfter is the least retry delay sent with an adaptive shed (the
// CPU is saturated, which lasts); a random 0..shedRetryJitter is added, so
// refused callers do not come back together.
//
// A refusal at the hard in-flight cap says something else: every slot is
// busy right now, and one frees as soon as a simulation ends. Its retry
// delay is about one simulation (the shedder's smallest recent latency,
// between capRetryMin and capRetryMax) plus as much jitter: a caller that
// honours it as a cooling time (logic does) comes back when a slot is
// likely free, instead of leaving the instance idle for 100 ms.
const (
	shedRetryAfter  = 100 * time.Millisecond
	shedRetryJitter = 100 * time.Millisecond
	capRetryMin     = time.Millisecond
	capRetryMax     = 20 * time.Millisecond
)

// Simulate is the Battle service's one RPC. The steps, in order:
//
//  1. validate the request (InvalidArgument);
//  2. drop it if its caller has already gone (its context is done);
//  3. the CPU throttle: above -throttle-cpu, wait a random
//     0..-throttle-max-delay, giving up if the caller goes meanwhile; the
//     wait holds no in-flight slot and does not count as in flight for the
//     shedder, whose latencies are those of simulations alone;
//  4. drop it if its caller went during the wait;
//  5. admission: the adaptive shedder (never for critical requests), then
//     the hard in-flight cap (for every criticality); a refusal is
//     RESOURCE_EXHAUSTED at once, with the BUSY code, a retry delay and the
//     backpressure hints in the status details;
//  6. fight (the simulation stops if the caller goes), record.
//
// With -protection off only steps 1 and 6 remain, and the fight runs to the
// end even if its caller has gone. Errors become gRPC statuses here and only
// here.
func (s *Server) Simulate(ctx context.Context, req *leveev2.SimulateRequest) (*leveev2.SimulateReply, error) {
	if err := Validate(req); err != nil {
		s.m.requests.WithLabelValues(outcomeBadRequest).Inc()
		return nil, apperr.ToStatus(ctx, err, 0)
	}
	crit := priority.FromIncoming(ctx) // logic's, which is the gate's decision
	if !s.cfg.Protection {
		// The unprotected tier works for callers that have gone.
		ctx = context.WithoutCancel(ctx)
	} else if err := ctx.Err(); err != nil {
		return nil, s.drop(ctx, err)
	}
	if s.cfg.throttleOn() {
		if err := s.wait(ctx, s.throttle.Delay(s.cpu())); err != nil {
			return nil, s.drop(ctx, err)
		}
	}

	slot, why := s.adm.admit(s.clk.Now(), s.cpu(), crit)
	if why != admitted {
		return nil, s.refuse(ctx, why, crit)
	}
	s.m.inflight.Inc()
	defer s.m.inflight.Dec()

	start := s.clk.Now()
	rep, err := s.sim(ctx, req)
	end := s.clk.Now()
	outcome := outcomeOf(err)
	s.m.requests.WithLabelValues(outcome).Inc()
	if outcome == outcomeOK {
		slot.done(end)
		s.m.latency.Observe(end.Sub(start).Seconds())
		return rep, nil
	}
	slot.cancel()
	if outcome == outcomeError {
		s.log.Error("battle simulation failed", "battle_id", req.GetBattleId(), "err", err)
		if !errors.Is(err, apperr.ErrInternal) {
			err = fmt.Errorf("%w: %v", apperr.ErrInternal, err)
		}
	}
	return nil, apperr.ToStatus(ctx, err, 0)
}

// wait holds the request back for d on the server's clock; it returns ctx's
// error if the caller goes first, or had gone by the time the wait ended.
func (s *Server) wait(ctx context.Context, d time.Duration) error {
	if d > 0 {
		s.m.throttle.Observe(d.Seconds())
		if err := clock.Sleep(ctx, s.clk, d); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// drop answers a request whose caller has gone without simulating it.
func (s *Server) drop(ctx context.Context, err error) error {
	s.m.requests.WithLabelValues(outcomeCancelled).Inc()
	return apperr.ToStatus(ctx, err, 0)
}

// refuse answers a request that admission refused: RESOURCE_EXHAUSTED with a
// jittered retry delay, the simulations in flight and how full the tier is,
// all in the status details (apperr.Overloaded).
func (s *Server) refuse(ctx context.Context, why refusal, crit priority.Class) error {
	s.m.requests.WithLabelValues(outcomeShed).Inc()
	s.m.shedBy[why][crit.Index()].Inc()
	now := s.clk.Now()
	depth, ratio := s.adm.pressure(now, why)
	var err error
	var retryAfter time.Duration
	switch why {
	case refusedAdaptive:
		err = fmt.Errorf("battle: %w (%d in flight)", shed.ErrShed, depth)
		retryAfter = shedRetryAfter + time.Duration(s.int64N(int64(shedRetryJitter)))
	default:
		err = fmt.Errorf("battle: %d simulations in flight, the most allowed", depth)
		base := capRetryBase(s.adm.shedder.Stats(now).MinRTT)
		retryAfter = base + time.Duration(s.int64N(int64(base)))
	}
	return apperr.Overloaded(ctx, fmt.Errorf("%w: %w", apperr.ErrBusy, err), retryAfter, depth, ratio)
}

// capRetryBase is the least retry delay of a refusal at the in-flight cap:
// about one simulation, minRTT, within [capRetryMin, capRetryMax].
func capRetryBase(minRTT time.Duration) time.Duration {
	return min(max(minRTT, capRetryMin), capRetryMax)
}

// outcomeOf classifies a simulation's error for battle_requests_total.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcomeCancelled
	case errors.Is(err, apperr.ErrBadRequest):
		return outcomeBadRequest
	default:
		return outcomeError
	}
}
