package logic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"levee/internal/apperr"
	leveev1 "levee/proto/leveev1"
)

// simulator is what the shards need from the battle tier: one simulation,
// its error as a domain error, and the retry delay the callee asked for.
// A retry policy (one more try on another instance, under a budget) wraps it.
type simulator interface {
	Simulate(ctx context.Context, req *leveev1.SimulateRequest) (*leveev1.SimulateReply, time.Duration, error)
}

var _ simulator = (*battleClient)(nil)

// battleClient calls the battle tier over one ClientConn that balances round
// robin over every address.
type battleClient struct {
	conn    *grpc.ClientConn
	rpc     leveev1.BattleClient
	timeout time.Duration
	calls   *prometheus.CounterVec
}

// dialBattle builds the client; it connects lazily.
func dialBattle(addrs []string, timeout time.Duration, calls *prometheus.CounterVec) (*battleClient, error) {
	r := manual.NewBuilderWithScheme("levee-battle")
	var st resolver.State
	for _, a := range addrs {
		st.Endpoints = append(st.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: strings.TrimSpace(a)}}})
	}
	r.InitialState(st)
	conn, err := grpc.NewClient(r.Scheme()+":///battle",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
	)
	if err != nil {
		return nil, fmt.Errorf("-battle-addrs: %w", err)
	}
	return &battleClient{conn: conn, rpc: leveev1.NewBattleClient(conn), timeout: timeout, calls: calls}, nil
}

// Simulate calls one battle instance with the caller's remaining deadline,
// capped at the battle timeout.
func (c *battleClient) Simulate(ctx context.Context, req *leveev1.SimulateRequest) (*leveev1.SimulateReply, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var trailer metadata.MD
	rep, err := c.rpc.Simulate(ctx, req, grpc.Trailer(&trailer))
	if err != nil {
		derr := battleError(err)
		c.calls.WithLabelValues(battleOutcome(derr)).Inc()
		return nil, apperr.Pushback(trailer), derr
	}
	c.calls.WithLabelValues("ok").Inc()
	return rep, 0, nil
}

func (c *battleClient) close() error { return c.conn.Close() }

// battleError turns a battle call's gRPC error into a domain error, so that
// apperr.ToStatus maps it (and sets the pushback) at the logic edge.
func battleError(err error) error {
	st := status.Convert(err)
	var base error
	switch st.Code() {
	case codes.ResourceExhausted:
		base = apperr.ErrBusy
	case codes.Unavailable:
		base = apperr.ErrUnavailable
	case codes.DeadlineExceeded:
		base = apperr.ErrDeadline
	case codes.Canceled:
		base = context.Canceled
	default:
		base = apperr.ErrInternal
	}
	return fmt.Errorf("battle: %w: %s", base, st.Message())
}

// battleOutcome is the logic_battle_calls_total label for a battle error.
func battleOutcome(err error) string {
	switch {
	case errors.Is(err, apperr.ErrBusy):
		return "busy"
	case errors.Is(err, apperr.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, apperr.ErrDeadline), errors.Is(err, context.Canceled):
		return "deadline"
	default:
		return "error"
	}
}
