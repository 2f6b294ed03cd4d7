package game_test

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leveehq/levee/game"
)

// A tiny game: its player state is a counter (any protobuf message will
// do; a real game declares its own), "add" is a critical mutation and
// "read" a sheddable query. Levee makes "add" idempotent by request id.
func Example() {
	g := game.New("tiny", func(playerID string) *wrapperspb.Int64Value { return &wrapperspb.Int64Value{} })
	game.Mutation(g, "add", game.Critical,
		func(c *game.Ctx, s *wrapperspb.Int64Value, req *wrapperspb.Int64Value) (*wrapperspb.Int64Value, *wrapperspb.Int64Value, error) {
			if req.GetValue() <= 0 {
				return nil, nil, game.Invalid("not_positive", "add a positive number")
			}
			s.Value += req.GetValue()
			return s, s, nil
		})
	game.Query(g, "read", game.Sheddable,
		func(c *game.Ctx, s *wrapperspb.Int64Value, req *emptypb.Empty) (*wrapperspb.Int64Value, error) {
			return s, nil
		})
	fmt.Println(g.Name(), "valid:", g.Validate() == nil)

	// A declaration that cannot work is refused, naming the action.
	game.Mutation(g, "add", game.Default,
		func(c *game.Ctx, s *wrapperspb.Int64Value, req *wrapperspb.Int64Value) (*wrapperspb.Int64Value, *wrapperspb.Int64Value, error) {
			return s, nil, nil
		})
	fmt.Println(g.Validate())
	// Output:
	// tiny valid: true
	// game "tiny" cannot run: action "add" is declared twice
}

// An action that runs a compute job: "roll" keys the job by the request's
// id, starts it on the player's shard, runs it on the job tier and applies
// its result once per key.
func ExampleJobAction() {
	type (
		state = wrapperspb.Int64Value
		req   = wrapperspb.StringValue
	)
	g := game.New("dice", func(string) *state { return &state{} })
	game.Job(g, "roll", func(ctx context.Context, r *wrapperspb.UInt64Value) (*wrapperspb.UInt64Value, error) {
		return &wrapperspb.UInt64Value{Value: r.GetValue()%6 + 1}, nil
	})
	game.JobAction(g, "roll", game.Default, "roll",
		func(r *req) string { return r.GetValue() }, // the key: one roll per id
		func(c *game.Ctx, s *state, r *req) (*wrapperspb.UInt64Value, error) {
			return &wrapperspb.UInt64Value{Value: uint64(s.GetValue()) + c.RequestID()}, nil
		},
		func(c *game.Ctx, s *state, r *req, res *wrapperspb.UInt64Value) (*wrapperspb.UInt64Value, *state, error) {
			s.Value += int64(res.GetValue())
			return res, s, nil
		})
	fmt.Println(g.Validate())
	// Output:
	// <nil>
}
