package game_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/apperr"
)

type (
	counter = wrapperspb.Int64Value
	text    = wrapperspb.StringValue
)

func newCounter(string) *counter { return &counter{} }

func add(c *game.Ctx, s *counter, req *counter) (*counter, *counter, error) {
	s.Value += req.GetValue()
	return s, s, nil
}

func read(c *game.Ctx, s *counter, req *emptypb.Empty) (*counter, error) { return s, nil }

// Every declaration that cannot work is refused by Validate, with a
// message naming the action (or job) and what is wrong.
func TestValidateRefuses(t *testing.T) {
	for _, c := range []struct {
		name    string
		declare func(g *game.Game)
		want    string
	}{
		{"duplicate name", func(g *game.Game) {
			game.Mutation(g, "add", game.Critical, add)
			game.Mutation(g, "add", game.Default, add)
		}, `action "add" is declared twice`},
		{"duplicate job", func(g *game.Game) {
			game.Query(g, "read", game.Default, read)
			game.Job(g, "tally", func(ctx context.Context, r *counter) (*counter, error) { return r, nil })
			game.Job(g, "tally", func(ctx context.Context, r *counter) (*counter, error) { return r, nil })
		}, `job "tally" is declared twice`},
		{"missing class", func(g *game.Game) {
			game.Mutation(g, "add", 0, add)
		}, `action "add" has no class`},
		{"job action without key", func(g *game.Game) {
			game.Job(g, "tally", func(ctx context.Context, r *counter) (*counter, error) { return r, nil })
			game.JobAction(g, "tally", game.Default, "tally", nil,
				func(c *game.Ctx, s *counter, r *counter) (*counter, error) { return r, nil },
				func(c *game.Ctx, s *counter, r *counter, res *counter) (*counter, *counter, error) {
					return res, s, nil
				})
		}, `action "tally" is a mutation without a request id for its job "tally"`},
		{"continuation for an unknown job", func(g *game.Game) {
			game.JobAction(g, "tally", game.Default, "nope", func(r *counter) string { return "k" },
				func(c *game.Ctx, s *counter, r *counter) (*counter, error) { return r, nil },
				func(c *game.Ctx, s *counter, r *counter, res *counter) (*counter, *counter, error) {
					return res, s, nil
				})
		}, `action "tally": continuation for unknown job "nope"`},
		{"a reply type that does not match", func(g *game.Game) {
			game.Job(g, "tally", func(ctx context.Context, r *counter) (*counter, error) { return r, nil })
			game.JobAction(g, "tally", game.Default, "tally", func(r *counter) string { return "k" },
				func(c *game.Ctx, s *counter, r *counter) (*counter, error) { return r, nil },
				func(c *game.Ctx, s *counter, r *counter, res *text) (*counter, *counter, error) { return r, s, nil })
		}, `action "tally": its continuation takes google.protobuf.StringValue, but job "tally" replies google.protobuf.Int64Value`},
		{"a request type that does not match", func(g *game.Game) {
			game.Job(g, "tally", func(ctx context.Context, r *counter) (*counter, error) { return r, nil })
			game.JobAction(g, "tally", game.Default, "tally", func(r *counter) string { return "k" },
				func(c *game.Ctx, s *counter, r *counter) (*text, error) { return nil, nil },
				func(c *game.Ctx, s *counter, r *counter, res *counter) (*counter, *counter, error) {
					return res, s, nil
				})
		}, `action "tally" starts job "tally" with google.protobuf.StringValue, but the job takes google.protobuf.Int64Value`},
		{"ReadsPlayer on a mutation", func(g *game.Game) {
			game.Mutation(g, "add", game.Critical, add, game.ReadsPlayer(func(r *counter) string { return "" }))
		}, `action "add": only a read-only action may read another player's state`},
		{"reserved name login", func(g *game.Game) {
			game.Mutation(g, "login", game.Critical, add)
		}, `action "login": the name is Levee's own login`},
		{"bad name", func(g *game.Game) {
			game.Mutation(g, "Add Gold", game.Critical, add)
		}, `action "Add Gold": a name is 1-63 characters of [a-z0-9_]`},
		{"no handler", func(g *game.Game) {
			game.Mutation[*counter, *counter, *counter](g, "add", game.Critical, nil)
		}, `action "add" has no handler`},
		{"no action", func(g *game.Game) {}, `game "tiny" declares no action`},
		{"negative request cap", func(g *game.Game) {
			game.Mutation(g, "add", game.Critical, add, game.MaxRequestBytes(-1))
		}, `action "add": MaxRequestBytes -1 is negative`},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := game.New("tiny", newCounter)
			c.declare(g)
			err := g.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), `game "tiny" cannot run: `) {
				t.Fatalf("Validate() = %v, want an error with %q", err, c.want)
			}
		})
	}
}

// Validate reports every problem at once, not only the first.
func TestValidateReportsAll(t *testing.T) {
	g := game.New("tiny", newCounter)
	game.Mutation(g, "add", 0, add)
	game.Mutation(g, "login", game.Critical, add)
	err := g.Validate()
	for _, want := range []string{`action "add" has no class`, `action "login": the name is Levee's own login`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q in it", err, want)
		}
	}
	if bad := game.New("Tiny!", newCounter); bad.Validate() == nil || !strings.Contains(bad.Validate().Error(), `game "Tiny!": a name is`) {
		t.Errorf("bad game name: %v", bad.Validate())
	}
}

func TestArenaIsValid(t *testing.T) {
	if err := arena.Game().Validate(); err != nil {
		t.Fatal(err)
	}
}

// The game's errors carry their kind (the error code), the game's reason
// and the message; Rejectf formats it.
func TestGameErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind error
	}{
		{game.Invalid("bad_qty", "m"), apperr.ErrBadRequest},
		{game.Reject("poor", "m"), apperr.ErrRejected},
		{game.NotFound("no_item", "m"), apperr.ErrNotFound},
		{game.Forbidden("not_yours", "m"), apperr.ErrForbidden},
		{game.Rejectf("poor", "%d short", 3), apperr.ErrRejected},
	} {
		var ge *apperr.GameError
		if !errors.As(c.err, &ge) || !errors.Is(c.err, c.kind) || ge.Reason == "" {
			t.Errorf("%v: not a game error of kind %v", c.err, c.kind)
		}
		if r := apperr.Reply(c.err, 0); r.GetReason() != ge.Reason || r.GetMessage() != ge.Message {
			t.Errorf("%v: reply %v", c.err, r)
		}
	}
	if m := game.Rejectf("poor", "%d short", 3).Error(); m != "3 short" {
		t.Errorf("Rejectf message = %q", m)
	}
}
