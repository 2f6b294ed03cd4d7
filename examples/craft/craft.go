// Package craft is Levee's second example game, a crafting game declared on
// Levee's public API (package game) alone, in a Go module of its own. It
// proves the API is not shaped around arena: a different state, different
// actions and classes, and a different compute job.
//
// A player (a Crafter) gathers materials, forges items from recipes on the
// job tier, collects them once they are ready, and sells them for coins:
//
//	action   class      mutates  what
//	gather   default    yes      adds 1-3 of a material; one gather per GatherCooldown
//	craft    default    yes      job "forge": spends a recipe's materials, the item is ready RecipeTime later
//	collect  default    yes      moves a ready item (by craft id, or the soonest) into the items; "not_ready" before
//	trade    critical   yes      sells items for coins
//	emote    sheddable  no       a wave or a cheer, shed first when the cluster is full
//	inspect  default    no       another player's public workshop (game.ReadsPlayer)
//	job forge                    hashes a recipe for its quality: CPU work off the shard
//
// A craft is keyed by a craft id the client chooses: resending it, under any
// request id, gets the first outcome; the forge's result is applied once.
package craft

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
	"time"

	"example.com/craft/craftpb"
	"github.com/leveehq/levee/game"
)

// Action and job names.
const (
	ActionGather  = "gather"
	ActionCraft   = "craft"
	ActionCollect = "collect"
	ActionTrade   = "trade"
	ActionEmote   = "emote"
	ActionInspect = "inspect"
	JobForge      = "forge"
)

// Reasons of craft's game errors (leveev2.Error.reason on the wire).
const (
	ReasonUnknownMaterial = "unknown_material"
	ReasonCooldown        = "cooldown"
	ReasonUnknownRecipe   = "unknown_recipe"
	ReasonBadCraftID      = "bad_craft_id"
	ReasonNoMaterials     = "not_enough_materials"
	ReasonWorkshopFull    = "workshop_full"
	ReasonNoSuchCraft     = "no_such_craft"
	ReasonNotReady        = "not_ready"
	ReasonUnknownItem     = "unknown_item"
	ReasonBadQuantity     = "bad_quantity"
	ReasonNotEnoughItems  = "not_enough_items"
	ReasonUnknownEmote    = "unknown_emote"
	ReasonBadRounds       = "bad_rounds"
)

// Rules of the game.
const (
	// GatherCooldown is the least time between two gathers of a player.
	GatherCooldown = time.Second
	// MaxMaterial is the most of one material a player can carry.
	MaxMaterial = 500
	// MaxPending is how many forged items may wait to be collected.
	MaxPending = 4
	// MaxTrade is the most items one trade sells.
	MaxTrade = 100
	// MaxRounds bounds a forge job's work.
	MaxRounds = 1 << 20
)

// Recipe is what an item costs to forge.
type Recipe struct {
	Materials map[string]uint32
	// Time is how long after the forge the item is ready to collect.
	Time time.Duration
	// Rounds is the forge's CPU work (hashing rounds).
	Rounds uint32
	// Price is what the market pays for one.
	Price int64
}

// Recipes are the items a player can forge.
var Recipes = map[string]Recipe{
	"plank":   {Materials: map[string]uint32{"wood": 2}, Time: 2 * time.Second, Rounds: 2000, Price: 6},
	"ingot":   {Materials: map[string]uint32{"ore": 2}, Time: 5 * time.Second, Rounds: 5000, Price: 14},
	"tonic":   {Materials: map[string]uint32{"herb": 2}, Time: 3 * time.Second, Rounds: 3000, Price: 9},
	"hammer":  {Materials: map[string]uint32{"wood": 1, "ore": 3}, Time: 20 * time.Second, Rounds: 10000, Price: 40},
	"lantern": {Materials: map[string]uint32{"ore": 1, "herb": 2}, Time: 10 * time.Second, Rounds: 8000, Price: 25},
}

// Materials a player can gather.
var Materials = []string{"wood", "ore", "herb"}

// Emotes a player can show.
var Emotes = []string{"wave", "cheer", "bow", "dance"}

// NewCrafter is a new player's state.
func NewCrafter(id string) *craftpb.Crafter {
	return &craftpb.Crafter{Id: id, Coins: 50,
		Materials: map[string]uint32{"wood": 10, "ore": 6, "herb": 4},
		Items:     map[string]uint32{}}
}

// Game declares craft. Each call returns a new declaration.
func Game() *game.Game {
	g := game.New("craft", NewCrafter)
	small := game.MaxRequestBytes(256)
	game.Mutation(g, ActionGather, game.Default, gather, small)
	game.Job(g, JobForge, Forge)
	game.JobAction(g, ActionCraft, game.Default, JobForge,
		func(r *craftpb.CraftRequest) string { return r.GetCraftId() },
		startCraft, applyCraft, small)
	game.Mutation(g, ActionCollect, game.Default, collect, small)
	game.Mutation(g, ActionTrade, game.Critical, trade, small)
	game.Query(g, ActionEmote, game.Sheddable, emote, small)
	game.Query(g, ActionInspect, game.Default, inspect, small,
		game.ReadsPlayer(func(r *craftpb.InspectRequest) string { return r.GetPlayerId() }))
	return g
}

func known(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func gather(c *game.Ctx, p *craftpb.Crafter, req *craftpb.GatherRequest) (*craftpb.GatherReply, *craftpb.Crafter, error) {
	m := req.GetMaterial()
	if !known(Materials, m) {
		return nil, nil, game.NotFound(ReasonUnknownMaterial, fmt.Sprintf("there is no %s to gather (try wood, ore or herb)", clip(m)))
	}
	now := c.Now().UnixMilli()
	next := p.GetLastGatherMs() + GatherCooldown.Milliseconds()
	if p.GetLastGatherMs() != 0 && now < next {
		return nil, nil, game.Rejectf(ReasonCooldown, "you are tired: gather again in %d ms", next-now)
	}
	amount := uint32(1 + c.RequestID()%3)
	if p.Materials == nil {
		p.Materials = map[string]uint32{}
	}
	p.Materials[m] = min(p.Materials[m]+amount, MaxMaterial)
	p.LastGatherMs = now
	return &craftpb.GatherReply{Material: m, Amount: amount, Total: p.Materials[m],
		NextGatherMs: now + GatherCooldown.Milliseconds()}, p, nil
}

var craftIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkCraft is what a craft needs: a known recipe, its materials and room
// in the workshop. start checks it before the forge, apply again after it
// (the state may have changed while the job ran).
func checkCraft(p *craftpb.Crafter, req *craftpb.CraftRequest) (Recipe, error) {
	if !craftIDRE.MatchString(req.GetCraftId()) {
		return Recipe{}, game.Invalid(ReasonBadCraftID, "a craft id is 1-64 characters of A-Z a-z 0-9 _ -")
	}
	r, ok := Recipes[req.GetRecipe()]
	if !ok {
		return Recipe{}, game.NotFound(ReasonUnknownRecipe, fmt.Sprintf("no recipe for %q", clip(req.GetRecipe())))
	}
	for m, n := range r.Materials {
		if p.GetMaterials()[m] < n {
			return Recipe{}, game.Rejectf(ReasonNoMaterials, "a %s needs %d %s, you have %d", req.GetRecipe(), n, m, p.GetMaterials()[m])
		}
	}
	if len(p.GetPending()) >= MaxPending {
		return Recipe{}, game.Rejectf(ReasonWorkshopFull, "your workshop holds %d items: collect one first", MaxPending)
	}
	return r, nil
}

func startCraft(c *game.Ctx, p *craftpb.Crafter, req *craftpb.CraftRequest) (*craftpb.ForgeRequest, error) {
	r, err := checkCraft(p, req)
	if err != nil {
		return nil, err
	}
	return &craftpb.ForgeRequest{PlayerId: c.PlayerID(), CraftId: req.GetCraftId(), Recipe: req.GetRecipe(), Rounds: r.Rounds}, nil
}

func applyCraft(c *game.Ctx, p *craftpb.Crafter, req *craftpb.CraftRequest, res *craftpb.ForgeReply) (*craftpb.CraftReply, *craftpb.Crafter, error) {
	r, err := checkCraft(p, req)
	if err != nil {
		return nil, nil, err
	}
	for m, n := range r.Materials {
		p.Materials[m] -= n
	}
	pend := &craftpb.Pending{CraftId: req.GetCraftId(), Recipe: req.GetRecipe(), Quality: res.GetQuality(),
		ReadyAtMs: c.Now().Add(r.Time).UnixMilli()}
	p.Pending = append(p.Pending, pend)
	p.Crafted++
	return &craftpb.CraftReply{Pending: pend, Materials: p.Materials}, p, nil
}

func collect(c *game.Ctx, p *craftpb.Crafter, req *craftpb.CollectRequest) (*craftpb.CollectReply, *craftpb.Crafter, error) {
	now := c.Now().UnixMilli()
	i := pick(p.GetPending(), req.GetCraftId(), now)
	if i < 0 {
		if req.GetCraftId() == "" {
			return nil, nil, game.NotFound(ReasonNoSuchCraft, "nothing waits in your workshop")
		}
		return nil, nil, game.NotFound(ReasonNoSuchCraft, fmt.Sprintf("no craft %q waits in your workshop", clip(req.GetCraftId())))
	}
	pend := p.Pending[i]
	if wait := pend.GetReadyAtMs() - now; wait > 0 {
		return nil, nil, game.Rejectf(ReasonNotReady, "your %s is ready in %d ms", pend.GetRecipe(), wait)
	}
	p.Pending = append(p.Pending[:i], p.Pending[i+1:]...)
	if p.Items == nil {
		p.Items = map[string]uint32{}
	}
	p.Items[pend.GetRecipe()]++
	p.Collected++
	return &craftpb.CollectReply{Item: pend.GetRecipe(), Quality: pend.GetQuality(), Count: p.Items[pend.GetRecipe()]}, p, nil
}

// pick is the index of the pending craft to collect: the one named id, or
// for "" the first ready one (else the one ready soonest); -1 for none.
func pick(pending []*craftpb.Pending, id string, now int64) int {
	best := -1
	for i, pend := range pending {
		if id != "" {
			if pend.GetCraftId() == id {
				return i
			}
			continue
		}
		if best < 0 || pend.GetReadyAtMs() < pending[best].GetReadyAtMs() {
			best = i
		}
	}
	return best
}

func trade(c *game.Ctx, p *craftpb.Crafter, req *craftpb.TradeRequest) (*craftpb.TradeReply, *craftpb.Crafter, error) {
	if q := req.GetQuantity(); q < 1 || q > MaxTrade {
		return nil, nil, game.Invalid(ReasonBadQuantity, fmt.Sprintf("a trade sells 1..%d items, got %d", MaxTrade, q))
	}
	r, ok := Recipes[req.GetItem()]
	if !ok {
		return nil, nil, game.NotFound(ReasonUnknownItem, fmt.Sprintf("the market buys no %q", clip(req.GetItem())))
	}
	have := p.GetItems()[req.GetItem()]
	if have < req.GetQuantity() {
		return nil, nil, game.Rejectf(ReasonNotEnoughItems, "you have %d %s, not %d", have, req.GetItem(), req.GetQuantity())
	}
	earned := r.Price * int64(req.GetQuantity())
	p.Items[req.GetItem()] = have - req.GetQuantity()
	p.Coins += earned
	return &craftpb.TradeReply{Earned: earned, Coins: p.Coins, Left: p.Items[req.GetItem()]}, p, nil
}

func emote(c *game.Ctx, p *craftpb.Crafter, req *craftpb.EmoteRequest) (*craftpb.EmoteReply, error) {
	if !known(Emotes, req.GetEmote()) {
		return nil, game.Invalid(ReasonUnknownEmote, fmt.Sprintf("no emote %q", clip(req.GetEmote())))
	}
	return &craftpb.EmoteReply{PlayerId: c.PlayerID(), Emote: req.GetEmote(), Title: Title(p)}, nil
}

// Title is what a crafter is called, by the crafts they have forged.
func Title(p *craftpb.Crafter) string {
	switch n := p.GetCrafted(); {
	case n < 5:
		return "novice"
	case n < 50:
		return "artisan"
	}
	return "master"
}

// inspect reads the target's state (game.ReadsPlayer) and shows only what
// is public: the items and the crafts forged, not coins or materials.
func inspect(c *game.Ctx, p *craftpb.Crafter, req *craftpb.InspectRequest) (*craftpb.InspectReply, error) {
	return &craftpb.InspectReply{PlayerId: p.GetId(), Items: p.GetItems(), Crafted: p.GetCrafted()}, nil
}

// Forge is the forge job: it hashes the craft for its rounds and derives
// the item's quality (1..100) from the digest. It is deterministic, so a
// forge run twice after a failure gives the same item.
func Forge(ctx context.Context, req *craftpb.ForgeRequest) (*craftpb.ForgeReply, error) {
	if req.GetRounds() == 0 || req.GetRounds() > MaxRounds {
		return nil, game.Invalid(ReasonBadRounds, fmt.Sprintf("a forge takes 1..%d rounds, got %d", MaxRounds, req.GetRounds()))
	}
	sum := sha256.Sum256([]byte(req.GetPlayerId() + "\x00" + req.GetCraftId() + "\x00" + req.GetRecipe()))
	for i := uint32(0); i < req.GetRounds(); i++ {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		sum = sha256.Sum256(sum[:])
	}
	d := binary.BigEndian.Uint64(sum[:8])
	return &craftpb.ForgeReply{Quality: uint32(1 + d%100), Digest: d}, nil
}

func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}
