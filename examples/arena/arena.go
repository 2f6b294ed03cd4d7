// Package arena is Levee's demo game, declared on the public API (package
// game) alone: a shop of five items, purchases paid in gold, and battles
// fought on the battle tier whose rewards are applied once per battle id.
//
// It declares:
//
//	action        class     mutates  request             reply
//	get_profile   default   no       GetProfileRequest   ProfileReply
//	buy_item      critical  yes      BuyItemRequest      BuyItemReply
//	start_battle  default   yes      StartBattleRequest  BattleReply    (runs job "simulate")
//	job simulate                     SimulateRequest     SimulateReply
//
// The default binaries (cmd/gate, cmd/logic, cmd/battle, cmd/loadtest) run
// it; package arenaclient holds its typed SDK helpers.
package arena

import (
	"fmt"

	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/examples/arena/sim"
	"github.com/leveehq/levee/game"
)

// Action and job names.
const (
	ActionGetProfile  = "get_profile"
	ActionBuyItem     = "buy_item"
	ActionStartBattle = "start_battle"
	JobSimulate       = "simulate"
)

// New players start with these.
const (
	StartGold   = 1000
	StartRating = 1000
)

// NewPlayer is a new player's state.
func NewPlayer(id string) *arenapb.Player {
	return &arenapb.Player{Id: id, Level: 1, Gold: StartGold, Rating: StartRating, Inventory: map[string]uint32{}}
}

// Game declares arena. Each call returns a new declaration.
func Game() *game.Game {
	g := game.New("arena", NewPlayer)
	game.Query(g, ActionGetProfile, game.Default, getProfile)
	game.Mutation(g, ActionBuyItem, game.Critical, buyItem, game.MaxRequestBytes(256))
	game.Job(g, JobSimulate, sim.Simulate)
	game.JobAction(g, ActionStartBattle, game.Default, JobSimulate,
		func(r *arenapb.StartBattleRequest) string { return r.GetBattleId() },
		startBattle, applyBattle, game.MaxRequestBytes(256))
	return g
}

func getProfile(c *game.Ctx, p *arenapb.Player, req *arenapb.GetProfileRequest) (*arenapb.ProfileReply, error) {
	if id := req.GetPlayerId(); id != "" && id != c.PlayerID() {
		return nil, game.Forbidden("not_yours", "you may only read your own profile")
	}
	return &arenapb.ProfileReply{Player: p}, nil
}

func buyItem(c *game.Ctx, p *arenapb.Player, req *arenapb.BuyItemRequest) (*arenapb.BuyItemReply, *arenapb.Player, error) {
	cost, err := PriceOf(req.GetItemId(), req.GetQuantity())
	if err != nil {
		return nil, nil, err
	}
	if p.GetGold() < cost {
		return nil, nil, game.Rejectf(ReasonInsufficientGold, "%d %s cost %d gold, you have %d",
			req.GetQuantity(), req.GetItemId(), cost, p.GetGold())
	}
	p.Gold -= cost
	if p.Inventory == nil {
		p.Inventory = map[string]uint32{}
	}
	p.Inventory[req.GetItemId()] += uint32(req.GetQuantity())
	return &arenapb.BuyItemReply{Player: p, GoldSpent: cost}, p, nil
}

func startBattle(c *game.Ctx, p *arenapb.Player, req *arenapb.StartBattleRequest) (*arenapb.SimulateRequest, error) {
	if err := ValidateBattle(req); err != nil {
		return nil, err
	}
	return SimulateRequest(p, req), nil
}

func applyBattle(c *game.Ctx, p *arenapb.Player, req *arenapb.StartBattleRequest, res *arenapb.SimulateReply) (*arenapb.BattleReply, *arenapb.Player, error) {
	br := ApplyReward(p, req.GetBattleId(), res)
	br.Player = p
	return br, p, nil
}

// ReasonInsufficientGold is the reason of a purchase the player cannot pay.
const ReasonInsufficientGold = "insufficient_gold"

// Reasons of arena's validation errors.
const (
	ReasonBadQuantity = "bad_quantity"
	ReasonUnknownItem = "unknown_item"
	ReasonBadBattle   = "bad_battle"
)

// Catalog is the shop: item id -> price in gold.
var Catalog = map[string]int64{
	"potion":      10,
	"sword":       100,
	"shield":      80,
	"helmet":      60,
	"dragon_skin": 500,
}

// Bounds on a purchase's quantity.
const (
	MinQuantity = 1
	MaxQuantity = 100
)

// PriceOf checks a purchase and returns what it costs: a quantity out of
// range is Invalid, an item not in the shop NotFound.
func PriceOf(item string, quantity int32) (int64, error) {
	if quantity < MinQuantity || quantity > MaxQuantity {
		return 0, game.Invalid(ReasonBadQuantity, fmt.Sprintf("quantity must be %d..%d, got %d", MinQuantity, MaxQuantity, quantity))
	}
	price, ok := Catalog[item]
	if !ok {
		if len(item) > 64 {
			item = item[:64] + "..."
		}
		return 0, game.NotFound(ReasonUnknownItem, fmt.Sprintf("no item %q in the shop", item))
	}
	return price * int64(quantity), nil
}
