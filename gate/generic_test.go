package gate

import (
	"context"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// otherLogic answers otherGame's calls: a welcome with the player's id as
// the state, and for every call the sender's id as a StringValue reply.
func otherLogic(t *testing.T) *fakeLogic {
	l := startFakeLogic(t)
	l.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		if req.GetLogin() != nil {
			return &leveev2.LogicReply{Version: 1, Result: &leveev2.LogicReply_Welcome{Welcome: &leveev2.Welcome{
				State: marshal(wrapperspb.String(req.GetPlayerId())), PlayerId: req.GetPlayerId(), Version: 1}}}, nil
		}
		var rep proto.Message = &emptypb.Empty{}
		if req.GetCall().GetAction() == "look" {
			rep = wrapperspb.String(req.GetPlayerId())
		}
		return &leveev2.LogicReply{Version: 2, Result: &leveev2.LogicReply_Reply{Reply: marshal(rep)}}, nil
	})
	return l
}

// connectTypes is connect for a game with its own message types.
func (g *testGate) connectTypes(t *testing.T, player, subprotocol string, types wire.Resolver) *client {
	t.Helper()
	c := dialRaw(t, g.wsURL(g.tokenFor(t, player)), subprotocol, nil)
	c.codec.Game = types
	if f := c.recv(); f.GetWelcome().GetPlayerId() != player {
		t.Fatalf("want a welcome, got %v", f)
	}
	return c
}

// An action declared with ReadsPlayer goes to the shard of the player it
// names, with the sender's id; every other action, and a target naming
// the sender or no one, to the sender's shard.
func TestReadsPlayerRoutesToTheTargetsShard(t *testing.T) {
	logics := []*fakeLogic{otherLogic(t), otherLogic(t)}
	game := otherGame()
	g := startGate(t, func(c *Config) { c.Game = game }, logics...)
	types := wire.ForGame(game.Def())
	instance := func(p string) int { return shardmap.Instance(shardmap.Shard(p, g.cfg.Shards), len(logics)) }
	// Two players on different instances.
	alice, bob := "alice", ""
	for _, p := range []string{"bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan"} {
		if instance(p) != instance(alice) {
			bob = p
			break
		}
	}
	if bob == "" {
		t.Fatal("no player on the other instance")
	}
	for _, sp := range []string{wire.ProtoSubprotocol, wire.JSONSubprotocol} {
		c := g.connectTypes(t, alice, sp, types)
		for i, tc := range []struct {
			action string
			req    proto.Message
			to     string // whose instance logic gets it on
		}{
			{"look", wrapperspb.String(bob), bob},
			{"look", wrapperspb.String(alice), alice},
			{"look", wrapperspb.String(""), alice},
			{"emote", wrapperspb.String(bob), alice}, // no target: the sender's
		} {
			id := uint64(100 + i)
			for _, l := range logics {
				drain(l.got)
			}
			c.send(callFrame(id, tc.action, tc.req))
			if f := c.recv(); f.GetRequestId() != id || f.GetError() != nil {
				t.Fatalf("%s %s %v: %v", sp, tc.action, tc.req, f)
			}
			got := <-logics[instance(tc.to)].got
			if got.GetRequestId() != id || got.GetPlayerId() != alice || got.GetCall().GetAction() != tc.action {
				t.Fatalf("%s %s %v: logic of %s got %v, want it from %s", sp, tc.action, tc.req, tc.to, got, alice)
			}
		}
	}
}

func drain(ch chan *leveev2.LogicRequest) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// Logic's replayed mark and version reach the player on both subprotocols,
// and a JSON welcome's state is the game's state object.
func TestReplayedAndVersionReachThePlayer(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		rep := defaultReply(req)
		if req.GetCall() != nil {
			rep.Replayed, rep.Version = true, 42
		}
		return rep, nil
	})
	for _, sp := range []string{wire.ProtoSubprotocol, wire.JSONSubprotocol} {
		c, w := g.connect(t, "alice", sp)
		if stateOf(t, w).GetGold() != 100 || w.GetVersion() != 1 {
			t.Fatalf("%s: welcome %v", sp, w)
		}
		c.send(buyFrame(5, "sword", 1))
		f := c.recv()
		if !f.GetReplayed() || f.GetVersion() != 42 || replyOf(f, &arenapb.BuyItemReply{}).GetGoldSpent() != 10 {
			t.Fatalf("%s: %v, want the replayed purchase at version 42", sp, f)
		}
	}
	// On JSON the welcome's state is an object.
	c := dialRaw(t, g.wsURL(g.tokenFor(t, "bob")), wire.JSONSubprotocol, nil)
	_, b, err := c.ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.ReplaceAll(string(b), " ", ""); !strings.Contains(s, `"state":{"id":"bob"`) || !strings.Contains(s, `"playerId":"bob"`) {
		t.Fatalf("JSON welcome %s", b)
	}
}

// A request over its action's declared MaxRequestBytes is BAD_REQUEST with
// its id, never sent to logic; a reply logic sends that is not the action's
// reply message cannot be converted for a JSON player: INTERNAL, same id.
func TestPerActionLimitAndUnconvertibleReply(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	for _, sp := range []string{wire.ProtoSubprotocol, wire.JSONSubprotocol} {
		c, _ := g.connect(t, "alice", sp)
		c.send(buyFrame(7, strings.Repeat("x", 300), 1))
		if e := wantError(t, c.recv(), 7, leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST); !strings.Contains(e.GetMessage(), "at most 256") {
			t.Fatalf("%s: %v", sp, e)
		}
		c.send(profileFrame(8))
		if f := c.recv(); !isProfile(f) {
			t.Fatalf("%s: after the refusal %v", sp, f)
		}
	}
	for _, r := range logic.requests() {
		if r.GetRequestId() == 7 {
			t.Fatalf("logic got the oversized request %v", r)
		}
	}
	logic.setHandle(func(ctx context.Context, req *leveev2.LogicRequest) (*leveev2.LogicReply, error) {
		if req.GetCall() != nil {
			return &leveev2.LogicReply{Result: &leveev2.LogicReply_Reply{Reply: []byte{0xff, 0xff}}}, nil
		}
		return defaultReply(req), nil
	})
	c, _ := g.connect(t, "bob", wire.JSONSubprotocol)
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(`{"requestId":"9","action":"get_profile"}`)); err != nil {
		t.Fatal(err)
	}
	wantError(t, c.recv(), 9, leveev2.ErrorCode_ERROR_CODE_INTERNAL)
}
