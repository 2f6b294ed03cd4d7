package client_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenaclient"
	"github.com/leveehq/levee/examples/arena/arenapb"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// arenaPlay plays the demo game on the fake gate.
var arenaPlay = clienttest.Game(arena.Game())

// The demo game's calls, as the SDK's tests make them.
func getProfile(ctx context.Context, c *client.Client, id string) (*arenapb.Player, error) {
	return arenaclient.GetProfile(ctx, c, id)
}

func buyItem(ctx context.Context, c *client.Client, item string, q int32) (*arenapb.BuyItemReply, error) {
	rep, _, err := arenaclient.BuyItem(ctx, c, item, q)
	return rep, err
}

func startBattle(ctx context.Context, c *client.Client, id string, units, ticks uint32) (*arenapb.BattleReply, error) {
	rep, _, err := arenaclient.StartBattle(ctx, c, id, units, ticks)
	return rep, err
}

// frame is a request frame for action with req.
func frame(action string, req proto.Message) *leveev2.ClientFrame {
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	return &leveev2.ClientFrame{Action: action, Request: b}
}

// buyFrame is a buy_item request frame.
func buyFrame(item string, q int32) *leveev2.ClientFrame {
	return frame(arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: item, Quantity: q})
}

// buyReq is f's buy_item request, nil when f is another action's.
func buyReq(f *leveev2.ClientFrame) *arenapb.BuyItemRequest {
	if f.GetAction() != arena.ActionBuyItem {
		return nil
	}
	r := &arenapb.BuyItemRequest{}
	if proto.Unmarshal(f.GetRequest(), r) != nil {
		return nil
	}
	return r
}

// profileReq is f's get_profile request, nil when f is another action's.
func profileReq(f *leveev2.ClientFrame) *arenapb.GetProfileRequest {
	if f.GetAction() != arena.ActionGetProfile {
		return nil
	}
	r := &arenapb.GetProfileRequest{}
	if proto.Unmarshal(f.GetRequest(), r) != nil {
		return nil
	}
	return r
}

// withArena is opts with arena's declaration.
func withArena(opts client.Options) client.Options { return arenaclient.Options(opts) }

// constRand is a jitter source that always returns f.
func constRand(f float64) func() float64 { return func() float64 { return f } }

// scripted is a Handler that passes every request to got (before it
// answers) and answers request n (0-based, in arrival order) with
// answer(n, f); a nil answer leaves the request unanswered.
func scripted(got chan<- *leveev2.ClientFrame, answer func(n int, f *leveev2.ClientFrame) *leveev2.ServerFrame) clienttest.Handler {
	return func(c *clienttest.Conn) {
		for n := 0; ; n++ {
			f, err := c.Recv()
			if err != nil {
				return
			}
			if got != nil {
				got <- f
			}
			if out := answer(n, f); out != nil {
				if c.Send(out) != nil {
					return
				}
			}
		}
	}
}

// refusal is an error reply to f with code and retry_after ms.
func refusal(f *leveev2.ClientFrame, code leveev2.ErrorCode, retryMs uint32) *leveev2.ServerFrame {
	return clienttest.Reply(f, &leveev2.Error{Code: code, Message: "test", RetryAfterMs: retryMs})
}

func busy(f *leveev2.ClientFrame, retryMs uint32) *leveev2.ServerFrame {
	return refusal(f, leveev2.ErrorCode_ERROR_CODE_BUSY, retryMs)
}

// bought is a successful BuyItem reply to f.
func bought(f *leveev2.ClientFrame) *leveev2.ServerFrame {
	return clienttest.Reply(f, &arenapb.BuyItemReply{Player: &arenapb.Player{}, GoldSpent: 10})
}

// next reads the next request the gate saw, failing after 5 s.
func next(t *testing.T, got <-chan *leveev2.ClientFrame) *leveev2.ClientFrame {
	t.Helper()
	select {
	case f := <-got:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("the gate saw no request")
		return nil
	}
}

// nothing fails if the gate has seen a request that was not read yet.
func nothing(t *testing.T, got <-chan *leveev2.ClientFrame) {
	t.Helper()
	select {
	case f := <-got:
		t.Fatalf("unexpected request %d (%s)", f.GetRequestId(), f.GetAction())
	default:
	}
}

// result waits for a call's error, failing after 5 s.
func result(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("call did not return")
		return nil
	}
}

// mustProfile is the player's state from the Welcome.
func mustProfile(t *testing.T, c *client.Client) *arenapb.Player {
	t.Helper()
	p, err := arenaclient.Profile(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// buyRep is f's reply decoded as a buy_item reply.
func buyRep(f *leveev2.ServerFrame) *arenapb.BuyItemReply {
	r := &arenapb.BuyItemReply{}
	if proto.Unmarshal(f.GetReply(), r) != nil {
		return nil
	}
	return r
}
