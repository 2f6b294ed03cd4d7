package battle

import (
	"context"
	"errors"
	"fmt"

	"levee/internal/apperr"
	leveev1 "levee/proto/leveev1"
)

// Simulate is the Battle service's one RPC: validate, admit (or refuse at
// once), fight, record. Errors become gRPC statuses here and only here.
func (s *Server) Simulate(ctx context.Context, req *leveev1.SimulateRequest) (*leveev1.SimulateReply, error) {
	if err := Validate(req); err != nil {
		s.m.requests.WithLabelValues(outcomeBadRequest).Inc()
		return nil, apperr.ToStatus(ctx, err, 0)
	}
	done, retryAfter, err := s.admit.admit(ctx)
	if err != nil {
		s.m.requests.WithLabelValues(outcomeBusy).Inc()
		return nil, apperr.ToStatus(ctx, err, retryAfter)
	}
	defer done()
	s.m.inflight.Inc()
	defer s.m.inflight.Dec()

	start := s.clk.Now()
	rep, err := s.sim(ctx, req)
	outcome := outcomeOf(err)
	s.m.requests.WithLabelValues(outcome).Inc()
	switch outcome {
	case outcomeOK:
		s.m.latency.Observe(s.clk.Now().Sub(start).Seconds())
		return rep, nil
	case outcomeError:
		s.log.Error("battle simulation failed", "battle_id", req.GetBattleId(), "err", err)
		if !errors.Is(err, apperr.ErrInternal) {
			err = fmt.Errorf("%w: %v", apperr.ErrInternal, err)
		}
	}
	return nil, apperr.ToStatus(ctx, err, 0)
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
