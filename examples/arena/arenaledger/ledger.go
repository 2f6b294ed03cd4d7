// Package arenaledger is arena's auditor for the load tool (package
// loadtest/audit): the load tool's own record of the mutations its
// players sent, checked after a run against what the cluster says the
// players have: every acknowledged purchase and battle reward present
// once, nothing applied twice, nothing applied that was refused.
//
// # The record
//
// Per player, the ledger keeps its starting profile (the first snapshot
// received before the player's first mutation was sent: the Welcome of its
// first connection, or the login's profile fetch) and every mutation by
// request id: a purchase (item, quantity, gold_spent of the reply) or a
// battle (battle id, won, gold_gained, xp_gained, rating_delta), whether
// the reply said replayed, and how it ended:
//
//   - Acked: a success reply (replayed or not: either way it is applied,
//     once);
//   - Refused: a final answer that it was not applied: a refusal for load
//     (BUSY, SERVER_FULL, RATE_LIMITED), a business error (not enough
//     gold), a bad request, or any other error the SDK does not mark as
//     unresolved;
//   - Unresolved: the SDK returned an *client.UnresolvedError: it may or
//     may not have been applied; the ledger keeps its frame to resend.
//
// A mutation that was never sent on the wire (a local refusal, a ctx that
// ended first) is not recorded.
//
// # The check
//
// After the run (Check), each player with mutations is connected again,
// every unresolved frame is resent with its request id (the server
// applies an id at most once: a replayed reply means the first send had
// been applied, a fresh one that it is applied now; both make it Acked, a
// final refusal makes it Refused; a refusal for load or another unknown
// outcome leaves it Unresolved and it is tried again until the check's
// time is up), and the profile is read and compared with the record.
//
// What arena changes (examples/arena): a purchase takes
// gold_spent gold, adds quantity to inventory[item] and bumps version by
// one; a battle adds xp_gained xp and gold_gained gold, one win or one
// loss, rating_delta to the rating (clamped at 0, which rating_delta
// already reflects) and bumps version by one; a refused purchase (not
// enough gold) changes nothing; creating the player (the login) gives
// version 1 before any snapshot, and reading a profile changes nothing.
//
// # Attribution
//
// A profile holds counts, not request ids, so a difference is read per
// kind of mutation: per item for purchases (inventory[item] delta over the
// purchases' quantity) and all battles together (wins + losses delta).
// For a kind with a acknowledged, r refused and u still unresolved
// mutations and o applied according to the profile:
//
//   - o < a: a - o are Lost (acknowledged, missing);
//   - o > a: up to u of the excess are unresolved ones that had been
//     applied (no fault: they are counted as Unresolved); the rest, x, are
//     Phantom up to r (a refused mutation applied shows exactly as one
//     more of its kind), and beyond that Doubled when something of the
//     kind was acknowledged (an acknowledged one applied again); an excess
//     of a kind the ledger never sent, or that only unresolved and
//     refused ones cannot explain, is a Mismatch.
//
// Battles are counted by battle id: the server applies a battle once per
// battle id, so the naive client's new requests for one battle (after a
// refusal) are one battle, acknowledged if any of them was.
//
// When a kind has both refused and acknowledged mutations an excess is
// read as Phantom first: the two look the same in a profile, and the sum
// lost + doubled + phantom is exact where the split is a reading. A loss
// and a double of the same kind cancel out and are not seen (nor is an
// unresolved one applied together with a lost one): the profile cannot
// tell them apart from nothing happening.
//
// Besides the counts, the player is a Mismatch (once, whatever else) when:
// the version delta is not the number of mutations applied by the counts
// (something else changed the player, or a mutation was applied without
// its commit); an inventory delta is not a whole number of purchases; or
// gold, xp or rating differ from the start plus the acknowledged
// mutations' own figures plus the excess or missing ones valued at the
// prices and rewards the run's replies showed (a field is not compared
// when a value needed for it was never seen, and the rating only when no
// battle is missing or extra, since its clamping depends on order).
package arenaledger

import (
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/examples/arena/arenapb"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Outcome is how a mutation ended.
type Outcome uint8

// The outcomes.
const (
	Acked Outcome = iota + 1
	Refused
	Unresolved
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Refused:
		return "refused"
	case Unresolved:
		return "unresolved"
	}
	return "unknown"
}

// Mutation kinds.
const (
	KindPurchase = "purchase"
	KindBattle   = "battle"
)

// Mutation is one mutation a player sent, by its request id.
type Mutation struct {
	RequestID uint64
	Kind      string // KindPurchase or KindBattle

	Item      string // purchase
	Quantity  int32
	GoldSpent int64 // from the reply

	BattleID    string // battle
	Won         bool
	GoldGained  int64
	XPGained    uint64
	RatingDelta int32

	Replayed bool
	Outcome  Outcome
	Frame    *leveev2.ClientFrame // Unresolved: the frame to resend
	Err      string               // the last error (Refused, Unresolved)
}

// Player is one player's part of the ledger.
type Player struct {
	ID    string
	Start *Profile    // nil: no snapshot came before its first mutation
	Muts  []*Mutation // in the order sent
	byID  map[uint64]*Mutation
}

// Ledger is the record of a run's mutations, safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	players map[string]*Player
	order   []string
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{players: map[string]*Player{}} }

func (l *Ledger) player(id string) *Player {
	p := l.players[id]
	if p == nil {
		p = &Player{ID: id, byID: map[uint64]*Mutation{}}
		l.players[id] = p
		l.order = append(l.order, id)
	}
	return p
}

// Snapshot notes a profile of player at version (a Welcome's or a
// profile reply's): the first one before the player's first mutation is
// its start.
func (l *Ledger) Snapshot(player string, p *arenapb.Player, version uint64) {
	if p == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	pl := l.player(player)
	if pl.Start == nil && len(pl.Muts) == 0 {
		pl.Start = cloneStart(p, version)
	}
}

// cloneStart keeps the fields the check compares.
func cloneStart(p *arenapb.Player, version uint64) *Profile {
	inv := make(map[string]uint32, len(p.GetInventory()))
	for k, v := range p.GetInventory() {
		inv[k] = v
	}
	return &Profile{Player: &arenapb.Player{Id: p.GetId(), Level: p.GetLevel(), Xp: p.GetXp(), Gold: p.GetGold(), Rating: p.GetRating(),
		Wins: p.GetWins(), Losses: p.GetLosses(), Inventory: inv}, Version: version}
}

// Purchase records a purchase of quantity item sent with request id id,
// by its reply r (replayed: the frame said so) and error err as the SDK
// returned them; sends is how many times it went on the wire
// (client.CallInfo.Attempts): one never sent (0, and not unresolved) is
// not recorded.
func (l *Ledger) Purchase(player string, id uint64, item string, quantity int32, sends int, r *arenapb.BuyItemReply, replayed bool, err error) {
	m := &Mutation{RequestID: id, Kind: KindPurchase, Item: item, Quantity: quantity}
	l.add(player, m, sends, err, func() { m.GoldSpent, m.Replayed = r.GetGoldSpent(), replayed })
}

// Battle records battle battleID sent with request id id, as Purchase.
func (l *Ledger) Battle(player string, id uint64, battleID string, sends int, r *arenapb.BattleReply, replayed bool, err error) {
	m := &Mutation{RequestID: id, Kind: KindBattle, BattleID: battleID}
	l.add(player, m, sends, err, func() { fillBattle(m, r, replayed) })
}

func fillBattle(m *Mutation, r *arenapb.BattleReply, replayed bool) {
	m.Won, m.GoldGained, m.XPGained, m.RatingDelta, m.Replayed = r.GetWon(), r.GetGoldGained(), r.GetXpGained(), r.GetRatingDelta(), replayed
}

func (l *Ledger) add(player string, m *Mutation, sends int, err error, ok func()) {
	if id := m.RequestID; id == 0 {
		return
	}
	switch f := client.Unresolved(err); {
	case err == nil:
		m.Outcome = Acked
		ok()
	case f != nil:
		m.Outcome, m.Frame, m.Err = Unresolved, f, err.Error()
	case sends == 0:
		return // never on the wire
	default:
		m.Outcome, m.Err = Refused, err.Error()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	pl := l.player(player)
	if _, dup := pl.byID[m.RequestID]; dup {
		return // one entry per request id: a resend goes through Resolve
	}
	pl.byID[m.RequestID] = m
	pl.Muts = append(pl.Muts, m)
}

// Resolve records the answer to a Resend of player's unresolved mutation
// id, as Resend returned it: a success reply makes it Acked (replayed or
// not); an unresolved error, a retryable refusal (BUSY and the like: this
// send was not executed, but an earlier one may have been) or an error
// without a server answer leaves it Unresolved; any other error makes it
// Refused (the server looked the id
// up and did not apply it). It reports the mutation's outcome now (0 when
// the ledger has no such unresolved mutation).
func (l *Ledger) Resolve(player string, id uint64, f *leveev2.ServerFrame, err error) Outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	pl := l.players[player]
	if pl == nil {
		return 0
	}
	m := pl.byID[id]
	if m == nil || m.Outcome != Unresolved {
		if m != nil {
			return m.Outcome
		}
		return 0
	}
	if err != nil {
		if uf := client.Unresolved(err); uf != nil {
			m.Frame = uf
		}
		m.Err = err.Error()
		if e := client.AsError(err); e == nil || e.Retryable() || client.Unresolved(err) != nil {
			return Unresolved
		}
		m.Outcome, m.Frame = Refused, nil
		return Refused
	}
	switch {
	case m.Kind == KindPurchase && f.GetPayload() != nil && f.GetError() == nil && f.GetReply() != nil:
		r := &arenapb.BuyItemReply{}
		if proto.Unmarshal(f.GetReply(), r) != nil {
			m.Err = "undecodable reply to a resend"
			return Unresolved
		}
		m.GoldSpent, m.Replayed = r.GetGoldSpent(), f.GetReplayed()
	case m.Kind == KindBattle && f.GetPayload() != nil && f.GetError() == nil && f.GetReply() != nil:
		r := &arenapb.BattleReply{}
		if proto.Unmarshal(f.GetReply(), r) != nil {
			m.Err = "undecodable reply to a resend"
			return Unresolved
		}
		fillBattle(m, r, f.GetReplayed())
	default:
		m.Err = "unexpected reply to a resend"
		return Unresolved
	}
	m.Outcome, m.Frame, m.Err = Acked, nil, ""
	return Acked
}

// Pending is player's unresolved mutations' frames, to resend.
func (l *Ledger) Pending(player string) []*leveev2.ClientFrame {
	l.mu.Lock()
	defer l.mu.Unlock()
	pl := l.players[player]
	if pl == nil {
		return nil
	}
	var out []*leveev2.ClientFrame
	for _, m := range pl.Muts {
		if m.Outcome == Unresolved && m.Frame != nil {
			out = append(out, m.Frame)
		}
	}
	return out
}

// Players are the ids of the players with at least one mutation, in the
// order they were first seen.
func (l *Ledger) Players() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, id := range l.order {
		if len(l.players[id].Muts) > 0 {
			out = append(out, id)
		}
	}
	return out
}

// Player returns a copy of player's record (nil if none).
func (l *Ledger) Player(id string) *Player {
	l.mu.Lock()
	defer l.mu.Unlock()
	pl := l.players[id]
	if pl == nil {
		return nil
	}
	out := &Player{ID: pl.ID, Start: pl.Start}
	for _, m := range pl.Muts {
		c := *m
		out.Muts = append(out.Muts, &c)
	}
	return out
}
