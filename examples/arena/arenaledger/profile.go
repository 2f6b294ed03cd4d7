package arenaledger

import "github.com/leveehq/levee/examples/arena/arenapb"

// Profile is a player's state as the ledger compares it: arena's Player
// and Levee's version of it (Welcome.version, ServerFrame.version). Its
// getters are nil-safe, as the generated ones are.
type Profile struct {
	Player  *arenapb.Player
	Version uint64
}

func (p *Profile) player() *arenapb.Player {
	if p == nil {
		return nil
	}
	return p.Player
}

// GetVersion is the version, 0 for nil.
func (p *Profile) GetVersion() uint64 {
	if p == nil {
		return 0
	}
	return p.Version
}

func (p *Profile) GetId() string                   { return p.player().GetId() }
func (p *Profile) GetXp() uint64                   { return p.player().GetXp() }
func (p *Profile) GetGold() int64                  { return p.player().GetGold() }
func (p *Profile) GetRating() int32                { return p.player().GetRating() }
func (p *Profile) GetWins() uint32                 { return p.player().GetWins() }
func (p *Profile) GetLosses() uint32               { return p.player().GetLosses() }
func (p *Profile) GetInventory() map[string]uint32 { return p.player().GetInventory() }
