package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Call performs the game's action with request req and decodes the reply
// into reply (nil: the reply is not decoded). It is Send with req encoded:
// a fresh request id and issued_at_ms, the action's class (Options.Game;
// DEFAULT without one; WithCriticality may lower it), pacing, retries
// with the same id, and an *UnresolvedError to Resend when the outcome is
// unknown. A typed server error comes back as *Error (its Reason is the
// game's own code). WithCallInfo tells the request id, whether the reply
// was a replay of the first outcome and the state's version.
func (c *Client) Call(ctx context.Context, action string, req, reply proto.Message) error {
	var b []byte
	if req != nil {
		var err error
		if b, err = proto.Marshal(req); err != nil {
			return fmt.Errorf("client: encode %s request: %w", action, err)
		}
	}
	f, err := c.Send(ctx, action, b)
	if err != nil {
		return err
	}
	return decodeReply(f, action, reply)
}

// Call is (*Client).Call with the reply returned, typed:
//
//	rep, err := client.Call[*mygamepb.CraftReply](ctx, c, "craft", &mygamepb.CraftRequest{Recipe: "plank"})
func Call[Rep proto.Message](ctx context.Context, c *Client, action string, req proto.Message) (Rep, error) {
	var zero Rep
	rep := zero.ProtoReflect().New().Interface().(Rep)
	if err := c.Call(ctx, action, req, rep); err != nil {
		return zero, err
	}
	return rep, nil
}

// Send performs the game's action with request, its request message
// already encoded (protobuf), and returns the gate's reply frame: the
// reply's bytes (GetReply), whether it was a replay of the request's first
// outcome (Replayed), the version of the player's state (Version). It is
// Call without the encoding, for a caller that holds the bytes (a load
// tool's templates).
func (c *Client) Send(ctx context.Context, action string, request []byte) (*leveev2.ServerFrame, error) {
	if action == "" {
		return nil, errors.New("client: Send: no action")
	}
	f, err := c.Do(ctx, &leveev2.ClientFrame{
		Action:      action,
		Request:     request,
		Criticality: criticality(ctx, c.ClassOf(action)),
	})
	if err != nil {
		return f, err
	}
	if f.GetPayload() == nil {
		return f, unexpected(f, action)
	}
	if _, ok := f.GetPayload().(*leveev2.ServerFrame_Reply); !ok {
		return f, unexpected(f, action)
	}
	return f, nil
}

// ClassOf is the criticality the game declares for action (Options.Game),
// DEFAULT when the SDK has no declaration or the game no such action (the
// gate then answers UNKNOWN_MESSAGE).
func (c *Client) ClassOf(action string) leveev2.Criticality {
	if d := c.opts.def(); d != nil {
		if a, ok := d.Action(action); ok && a.Class.Valid() {
			return a.Class.Priority().Proto()
		}
	}
	return leveev2.Criticality_CRITICALITY_DEFAULT
}

// State decodes the player's state from the Welcome (the game's state
// message, as it was when the player was let in) into into.
func State(c *Client, into proto.Message) error {
	if err := proto.Unmarshal(c.Welcome().GetState(), into); err != nil {
		return fmt.Errorf("client: decode welcome state: %w", err)
	}
	return nil
}

// StateOf is State with the state returned, typed.
func StateOf[S proto.Message](c *Client) (S, error) {
	var zero S
	s := zero.ProtoReflect().New().Interface().(S)
	if err := State(c, s); err != nil {
		return zero, err
	}
	return s, nil
}

// decodeReply decodes f's reply bytes into reply (nil: skipped).
func decodeReply(f *leveev2.ServerFrame, action string, reply proto.Message) error {
	if reply == nil {
		return nil
	}
	if err := proto.Unmarshal(f.GetReply(), reply); err != nil {
		return fmt.Errorf("%w: %s reply does not decode as %s: %v", ErrUnexpectedReply, action,
			reply.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

func unexpected(f *leveev2.ServerFrame, action string) error {
	return fmt.Errorf("%w: want the reply of %s, got %T", ErrUnexpectedReply, action, f.GetPayload())
}
