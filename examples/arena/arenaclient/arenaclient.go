// Package arenaclient is the demo game's typed SDK helpers, built on the
// generic client (client.Call and client.Send): one function per arena
// action, returning arena's messages.
//
//	c, err := client.Dial(ctx, url, token, client.Options{Game: arena.Game()})
//	rep, replayed, err := arenaclient.BuyItem(ctx, c, "potion", 1)
//
// Give the Client arena's declaration (Options.Game) so that each call
// carries its action's class (BuyItem CRITICAL, the others DEFAULT) and
// the JSON subprotocol knows arena's messages.
package arenaclient

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
)

// Options are client.Options for arena: opts with arena's declaration
// when it has none.
func Options(opts client.Options) client.Options {
	if opts.Game == nil {
		opts.Game = arena.Game()
	}
	return opts
}

// Profile is the player's state as the Welcome gave it.
func Profile(c *client.Client) (*arenapb.Player, error) {
	return client.StateOf[*arenapb.Player](c)
}

// GetProfile fetches a player's profile; an empty playerID means yourself
// (arena lets a player read only their own: another id is FORBIDDEN). It
// is DEFAULT (WithCriticality may lower it).
func GetProfile(ctx context.Context, c *client.Client, playerID string) (*arenapb.Player, error) {
	rep, err := client.Call[*arenapb.ProfileReply](ctx, c, arena.ActionGetProfile, &arenapb.GetProfileRequest{PlayerId: playerID})
	if err != nil {
		return nil, err
	}
	return rep.GetPlayer(), nil
}

// BuyItem buys quantity of itemID with the player's gold. It is CRITICAL:
// shed last when the cluster is overloaded (WithCriticality may lower
// it). A retry keeps the request id, so a purchase is applied at most
// once; replayed says the reply is the stored outcome of an earlier send
// of the same request id. A purchase the player cannot pay is REJECTED
// with reason arena.ReasonInsufficientGold.
func BuyItem(ctx context.Context, c *client.Client, itemID string, quantity int32) (rep *arenapb.BuyItemReply, replayed bool, err error) {
	return send[*arenapb.BuyItemReply](ctx, c, arena.ActionBuyItem, &arenapb.BuyItemRequest{ItemId: itemID, Quantity: quantity})
}

// StartBattle fights battle battleID (client chosen; its reward is applied
// once) with units per team for at most ticks ticks. It is DEFAULT:
// starting a new battle is not an in-match action, so it may wait while
// purchases go first. replayed says the reply is the stored outcome of an
// earlier battle with the same id (or an earlier send of the request).
func StartBattle(ctx context.Context, c *client.Client, battleID string, units, ticks uint32) (rep *arenapb.BattleReply, replayed bool, err error) {
	return send[*arenapb.BattleReply](ctx, c, arena.ActionStartBattle, &arenapb.StartBattleRequest{BattleId: battleID, Units: units, Ticks: ticks})
}

// send calls action with req and decodes its reply, with the frame's
// replayed flag.
func send[Rep proto.Message](ctx context.Context, c *client.Client, action string, req proto.Message) (Rep, bool, error) {
	var zero Rep
	b, err := proto.Marshal(req)
	if err != nil {
		return zero, false, fmt.Errorf("arenaclient: encode %s: %w", action, err)
	}
	f, err := c.Send(ctx, action, b)
	if err != nil {
		return zero, false, err
	}
	rep := zero.ProtoReflect().New().Interface().(Rep)
	if err := proto.Unmarshal(f.GetReply(), rep); err != nil {
		return zero, false, fmt.Errorf("%w: %s reply: %v", client.ErrUnexpectedReply, action, err)
	}
	return rep, f.GetReplayed(), nil
}
