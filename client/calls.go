package client

import (
	"context"
	"fmt"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// GetProfile fetches a player's profile; an empty playerID means yourself.
// It is DEFAULT (WithCriticality overrides it).
func (c *Client) GetProfile(ctx context.Context, playerID string) (*leveev2.Player, error) {
	f, err := c.Do(ctx, &leveev2.ClientFrame{
		Criticality: criticality(ctx, leveev2.Criticality_CRITICALITY_DEFAULT),
		Payload:     &leveev2.ClientFrame_GetProfile{GetProfile: &leveev2.GetProfileRequest{PlayerId: playerID}},
	})
	if err != nil {
		return nil, err
	}
	r := f.GetProfile()
	if r == nil {
		return nil, unexpected(f, "profile")
	}
	return r.GetPlayer(), nil
}

// BuyItem buys quantity of itemID with the player's gold. It is CRITICAL:
// shed last when the cluster is overloaded (WithCriticality overrides it).
// A retry keeps the request id, so a purchase is applied at most once.
func (c *Client) BuyItem(ctx context.Context, itemID string, quantity int32) (*leveev2.BuyItemReply, error) {
	f, err := c.Do(ctx, &leveev2.ClientFrame{
		Criticality: criticality(ctx, leveev2.Criticality_CRITICALITY_CRITICAL),
		Payload:     &leveev2.ClientFrame_BuyItem{BuyItem: &leveev2.BuyItemRequest{ItemId: itemID, Quantity: quantity}},
	})
	if err != nil {
		return nil, err
	}
	r := f.GetBuyItem()
	if r == nil {
		return nil, unexpected(f, "buy_item")
	}
	return r, nil
}

// StartBattle fights battle battleID (client chosen; its reward is applied
// once) with units per team for at most ticks ticks. It is DEFAULT:
// starting a new battle is not an in-match action, so it may wait while
// purchases go first (WithCriticality overrides it).
func (c *Client) StartBattle(ctx context.Context, battleID string, units, ticks uint32) (*leveev2.BattleReply, error) {
	f, err := c.Do(ctx, &leveev2.ClientFrame{
		Criticality: criticality(ctx, leveev2.Criticality_CRITICALITY_DEFAULT),
		Payload:     &leveev2.ClientFrame_StartBattle{StartBattle: &leveev2.StartBattleRequest{BattleId: battleID, Units: units, Ticks: ticks}},
	})
	if err != nil {
		return nil, err
	}
	r := f.GetBattle()
	if r == nil {
		return nil, unexpected(f, "battle")
	}
	return r, nil
}

func unexpected(f *leveev2.ServerFrame, want string) error {
	return fmt.Errorf("%w: want %s, got %T", ErrUnexpectedReply, want, f.GetPayload())
}
