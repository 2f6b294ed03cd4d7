package clienttest

import (
	"errors"
	"fmt"

	"github.com/leveehq/levee/internal/apperr"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Prices is the fake gate's item catalog.
var Prices = map[string]int64{"potion": 10, "shield": 80, "sword": 100}

// Game is a Handler that plays a minimal game: it answers every request in
// order, keeps the player's gold and inventory for the connection, refuses
// unknown items (NOT_FOUND) and purchases beyond the player's gold
// (INSUFFICIENT_GOLD), wins every other battle, and attaches idle
// backpressure hints to each reply.
func Game(c *Conn) {
	p := &leveev2.Player{Id: c.Player, Level: 1, Gold: StartGold, Inventory: map[string]uint32{}}
	battles := 0
	for {
		f, err := c.Recv()
		if err != nil {
			if errors.Is(err, ErrFrame) && f.GetRequestId() != 0 {
				_ = c.Send(Reply(f, apperr.Reply(fmt.Errorf("%w: %w", apperr.ErrBadRequest, err), 0)))
				continue
			}
			if errors.Is(err, ErrFrame) {
				continue
			}
			return
		}
		out := Reply(f, GameReply(p, f, &battles))
		out.Backpressure = apperr.NewBackpressure(0, 0, 0)
		if err := c.Send(out); err != nil {
			return
		}
	}
}

// GameReply computes Game's answer to f for player p (mutating p); battles
// counts the battles fought so far.
func GameReply(p *leveev2.Player, f *leveev2.ClientFrame, battles *int) any {
	switch r := f.GetPayload().(type) {
	case *leveev2.ClientFrame_GetProfile:
		if id := r.GetProfile.GetPlayerId(); id != "" && id != p.GetId() {
			return refuse(apperr.ErrNotFound, "no such player")
		}
		return &leveev2.ProfileReply{Player: p}
	case *leveev2.ClientFrame_BuyItem:
		price, ok := Prices[r.BuyItem.GetItemId()]
		q := r.BuyItem.GetQuantity()
		switch {
		case q < 1 || q > 100:
			return refuse(apperr.ErrBadRequest, "quantity must be 1..100")
		case !ok:
			return refuse(apperr.ErrNotFound, "no such item")
		case price*int64(q) > p.Gold:
			return refuse(apperr.ErrInsufficientGold, "not enough gold")
		}
		p.Gold -= price * int64(q)
		p.Inventory[r.BuyItem.GetItemId()] += uint32(q)
		p.Version++
		return &leveev2.BuyItemReply{Player: p, GoldSpent: price * int64(q)}
	case *leveev2.ClientFrame_StartBattle:
		b := r.StartBattle
		if b.GetBattleId() == "" || b.GetUnits() < 1 || b.GetUnits() > 64 || b.GetTicks() < 1 || b.GetTicks() > 10000 {
			return refuse(apperr.ErrBadRequest, "bad battle")
		}
		*battles++
		won := *battles%2 == 1
		rep := &leveev2.BattleReply{BattleId: b.GetBattleId(), Won: won, XpGained: 10}
		if won {
			rep.GoldGained = 50
			rep.RatingDelta = 8
			p.Wins++
		} else {
			rep.RatingDelta = -8
			p.Losses++
		}
		p.Gold += rep.GoldGained
		p.Xp += rep.XpGained
		p.Rating += rep.RatingDelta
		p.Version++
		rep.Player = p
		return rep
	}
	return apperr.Reply(apperr.ErrUnknownMessage, 0)
}

// refuse is the typed error the real gate sends for the domain error err,
// its code taken from Levee's error table.
func refuse(err error, detail string) *leveev2.Error {
	return apperr.Reply(fmt.Errorf("%w: %s", err, detail), 0)
}
