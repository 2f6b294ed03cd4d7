package battle

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"google.golang.org/protobuf/proto"

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
// busy right now, and one frees as soon as a job ends. Its retry
// delay is about one job (the shedder's smallest recent latency,
// between capRetryMin and capRetryMax) plus as much jitter: a caller that
// honours it as a cooling time (logic does) comes back when a slot is
// likely free, instead of leaving the instance idle for 100 ms.
const (
	shedRetryAfter  = 100 * time.Millisecond
	shedRetryJitter = 100 * time.Millisecond
	capRetryMin     = time.Millisecond
	capRetryMax     = 20 * time.Millisecond
)

// jobsService is the Jobs gRPC service. Its one RPC is Run, a name the
// Server's own Run (serve until stopped) has, so it lives on a type of its
// own.
type jobsService struct {
	leveev2.UnimplementedJobsServer
	s *Server
}

var _ leveev2.JobsServer = jobsService{}

// Run is the Jobs service's one RPC (see Server.handle).
func (j jobsService) Run(ctx context.Context, in *leveev2.JobRequest) (*leveev2.JobReply, error) {
	return j.s.handle(ctx, in)
}

// handle serves Jobs.Run: it runs one of the game's jobs. The steps, in
// order:
//
//  1. look the job up by name (unknown: UNKNOWN_MESSAGE, as Unimplemented)
//     and decode the request as the job's request message (BAD_REQUEST);
//  2. drop it if its caller has already gone (its context is done);
//  3. the CPU throttle: above -throttle-cpu, wait a random
//     0..-throttle-max-delay, giving up if the caller goes meanwhile; the
//     wait holds no in-flight slot and does not count as in flight for the
//     shedder, whose latencies are those of jobs alone;
//  4. drop it if its caller went during the wait;
//  5. admission: the adaptive shedder (never for critical requests), then
//     the hard in-flight cap (for every criticality); a refusal is
//     RESOURCE_EXHAUSTED at once, with the BUSY code, a retry delay and the
//     backpressure hints in the status details;
//  6. run the job (its context ends with the caller's), record, encode its
//     reply.
//
// With -protection off only steps 1 and 6 remain, and the job runs to the
// end even if its caller has gone. A job's game error (game.Invalid,
// Reject, NotFound, Forbidden) travels with its code, message and reason;
// any other error, and a panic, is INTERNAL. Errors become gRPC statuses
// here and only here.
func (s *Server) handle(ctx context.Context, in *leveev2.JobRequest) (*leveev2.JobReply, error) {
	j, req, err := s.decode(in)
	if err != nil {
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
	rep, err := s.runJob(ctx, j, in.GetKey(), req)
	end := s.clk.Now()
	var out []byte
	if err == nil {
		if rep == nil || !rep.ProtoReflect().IsValid() {
			err = fmt.Errorf("%w: job %q returned no reply and no error", apperr.ErrInternal, j.def.Name)
		} else if out, err = proto.Marshal(rep); err != nil {
			err = fmt.Errorf("%w: job %q: encode its reply: %v", apperr.ErrInternal, j.def.Name, err)
		}
	}
	outcome := outcomeOf(err)
	s.m.requests.WithLabelValues(outcome).Inc()
	if outcome == outcomeOK {
		slot.done(end)
		j.latency.Observe(end.Sub(start).Seconds())
		return &leveev2.JobReply{Reply: out}, nil
	}
	slot.cancel()
	if outcome == outcomeError {
		if !errors.Is(err, errPanicked) {
			s.log.Error("job failed", "job", j.def.Name, "key", in.GetKey(), "err", err)
		}
		if !errors.Is(err, apperr.ErrInternal) {
			err = fmt.Errorf("%w: job %q: %v", apperr.ErrInternal, j.def.Name, err)
		}
	}
	return nil, apperr.ToStatus(ctx, err, 0)
}

// decode finds in's job and decodes its request.
func (s *Server) decode(in *leveev2.JobRequest) (*job, proto.Message, error) {
	j, ok := s.jobs[in.GetJob()]
	if !ok {
		return nil, nil, fmt.Errorf("%w: no job %q in game %q", apperr.ErrUnknownMessage, in.GetJob(), s.cfg.Game.Name())
	}
	req := j.def.Request.New().Interface()
	if err := proto.Unmarshal(in.GetRequest(), req); err != nil {
		return nil, nil, fmt.Errorf("%w: job %q: the request does not decode as %s: %v",
			apperr.ErrBadRequest, j.def.Name, j.def.Request.Descriptor().FullName(), err)
	}
	return j, req, nil
}

// errPanicked marks the error of a job that panicked (already logged).
var errPanicked = fmt.Errorf("%w: the job panicked", apperr.ErrInternal)

// runJob runs j on req. A panic fails this call alone: it is logged with
// the job's name and key and the stack, counted in
// battle_job_panics_total, and returned as INTERNAL; the process lives.
func (s *Server) runJob(ctx context.Context, j *job, key string, req proto.Message) (rep proto.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			j.panics.Inc()
			s.log.Error("job panicked", "job", j.def.Name, "key", key, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			rep, err = nil, errPanicked
		}
	}()
	return j.run(ctx, req)
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

// drop answers a request whose caller has gone without running it.
func (s *Server) drop(ctx context.Context, err error) error {
	s.m.requests.WithLabelValues(outcomeCancelled).Inc()
	return apperr.ToStatus(ctx, err, 0)
}

// refuse answers a request that admission refused: RESOURCE_EXHAUSTED with a
// jittered retry delay, the jobs in flight and how full the tier is,
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
		err = fmt.Errorf("battle: %d jobs in flight, the most allowed", depth)
		base := capRetryBase(s.adm.shedder.Stats(now).MinRTT)
		retryAfter = base + time.Duration(s.int64N(int64(base)))
	}
	return apperr.Overloaded(ctx, fmt.Errorf("%w: %w", apperr.ErrBusy, err), retryAfter, depth, ratio)
}

// capRetryBase is the least retry delay of a refusal at the in-flight cap:
// about one job, minRTT, within [capRetryMin, capRetryMax].
func capRetryBase(minRTT time.Duration) time.Duration {
	return min(max(minRTT, capRetryMin), capRetryMax)
}

// outcomeOf classifies a job's error for battle_requests_total. Only a
// game's own error (apperr.GameError) is the game's answer: an invalid
// request, or a rejection with its reason; every other error is the job's
// failure.
func outcomeOf(err error) string {
	var ge *apperr.GameError
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, errPanicked):
		return outcomeError
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcomeCancelled
	case errors.As(err, &ge) && errors.Is(ge, apperr.ErrBadRequest):
		return outcomeBadRequest
	case ge != nil:
		return outcomeGameError
	default:
		return outcomeError
	}
}
