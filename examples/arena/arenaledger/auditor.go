package arenaledger

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/loadtest/audit"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Auditor is the ledger as the load tool's auditor (audit.Auditor): it
// reads arena's requests and replies off the calls the engine hands it.
type Auditor struct {
	L *Ledger
}

var _ audit.Auditor = (*Auditor)(nil)

// New is arena's audit.Factory: loadtestcmd.Options{Audit: arenaledger.New}.
func New(*game.Game) audit.Auditor { return &Auditor{L: NewLedger()} }

// Welcome notes the welcome's state as a snapshot of the player.
func (a *Auditor) Welcome(player string, w *leveev2.Welcome) {
	p := &arenapb.Player{}
	if w == nil || proto.Unmarshal(w.GetState(), p) != nil {
		return
	}
	a.L.Snapshot(player, p, w.GetVersion())
}

// Call records a purchase or a battle, and a profile read as a snapshot.
func (a *Auditor) Call(c audit.Call) {
	if c.Action == nil {
		return
	}
	replayed := c.Frame.GetReplayed()
	switch c.Action.Name {
	case arena.ActionBuyItem:
		req, _ := c.Request.(*arenapb.BuyItemRequest)
		var r *arenapb.BuyItemReply
		if c.Err == nil {
			r = &arenapb.BuyItemReply{}
			_ = proto.Unmarshal(c.Frame.GetReply(), r) // a reply that does not decode values nothing
		}
		a.L.Purchase(c.Player, c.RequestID, req.GetItemId(), req.GetQuantity(), c.Sends, r, replayed, c.Err)
	case arena.ActionStartBattle:
		req, _ := c.Request.(*arenapb.StartBattleRequest)
		var r *arenapb.BattleReply
		if c.Err == nil {
			r = &arenapb.BattleReply{}
			_ = proto.Unmarshal(c.Frame.GetReply(), r)
		}
		a.L.Battle(c.Player, c.RequestID, req.GetBattleId(), c.Sends, r, replayed, c.Err)
	case arena.ActionGetProfile:
		req, _ := c.Request.(*arenapb.GetProfileRequest)
		if c.Err != nil || (req.GetPlayerId() != "" && req.GetPlayerId() != c.Player) {
			return
		}
		r := &arenapb.ProfileReply{}
		if proto.Unmarshal(c.Frame.GetReply(), r) == nil {
			a.L.Snapshot(c.Player, r.GetPlayer(), c.Frame.GetVersion())
		}
	}
}

// Resolve records the answer to a resend.
func (a *Auditor) Resolve(player string, id uint64, f *leveev2.ServerFrame, err error) {
	a.L.Resolve(player, id, f, err)
}

// Check runs the ledger's check and returns its figures by counter name.
func (a *Auditor) Check(ctx context.Context, cfg audit.CheckConfig) map[string]int64 {
	f := a.L.Check(ctx, CheckConfig{
		Timeout: cfg.Timeout,
		Call:    cfg.Call,
		Clock:   cfg.Clock,
		Dial: func(ctx context.Context, id string) (Conn, error) {
			c, err := cfg.Dial(ctx, id)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		Report: func(id string, r Result) {
			if !r.OK() && cfg.Log != nil {
				cfg.Log.Warn("ledger check", "player", id, "lost", r.Lost, "doubled", r.Doubled,
					"phantom", r.Phantom, "mismatch", r.Why)
			}
		},
	})
	return f.Counters()
}
