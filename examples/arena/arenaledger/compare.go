package arenaledger

import (
	"fmt"
	"sort"
)

// Values are the prices and rewards the run's acknowledged replies
// showed, to value a mutation the ledger has no reply for.
type Values struct {
	Price map[string]int64 // gold per unit of an item
	Win   *Reward          // nil: no battle won was acknowledged
	Loss  *Reward          // nil: no battle lost was acknowledged
}

// Reward is what one battle gave.
type Reward struct {
	Gold int64
	XP   uint64
}

// Values reads the prices and rewards off every acknowledged mutation.
func (l *Ledger) Values() Values {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := Values{Price: map[string]int64{}}
	for _, pl := range l.players {
		for _, m := range pl.Muts {
			v.note(m)
		}
	}
	return v
}

func (v *Values) note(m *Mutation) {
	if m.Outcome != Acked {
		return
	}
	switch m.Kind {
	case KindPurchase:
		if m.Quantity > 0 {
			v.Price[m.Item] = m.GoldSpent / int64(m.Quantity)
		}
	case KindBattle:
		r := &Reward{Gold: m.GoldGained, XP: m.XPGained}
		if m.Won {
			v.Win = r
		} else {
			v.Loss = r
		}
	}
}

// merged is muts with the battles of one battle id made one: the server
// applies a battle once per battle id, whatever request ids carried it (the
// naive client sends a refused battle again as a new request with the same
// battle id). The one is Acked (with its reply's figures) when any was,
// else Unresolved when any was, else Refused.
func merged(muts []*Mutation) []*Mutation {
	rank := map[Outcome]int{Acked: 3, Unresolved: 2, Refused: 1}
	var out []*Mutation
	byBattle := map[string]int{}
	for _, m := range muts {
		if m.Kind != KindBattle || m.BattleID == "" {
			out = append(out, m)
			continue
		}
		i, ok := byBattle[m.BattleID]
		if !ok {
			byBattle[m.BattleID] = len(out)
			out = append(out, m)
			continue
		}
		if rank[m.Outcome] > rank[out[i].Outcome] {
			out[i] = m
		}
	}
	return out
}

// Result is one player's check.
type Result struct {
	Acked      int // acknowledged mutations (battles: battle ids)
	Refused    int
	Unresolved int // still unknown
	Lost       int // acknowledged, missing from the profile
	Doubled    int // applied more than once
	Phantom    int // applied though refused
	Mismatch   bool
	Why        []string // what did not match, for a report
}

// OK says the profile matched the record: nothing lost, doubled, phantom
// or mismatched (unresolved mutations are not a failure of the server).
func (r Result) OK() bool { return r.Lost+r.Doubled+r.Phantom == 0 && !r.Mismatch }

// kind is one kind of mutation's tally in a player's record.
type kind struct {
	item                  string // purchases; "" for battles
	acked, refused, unres int
	qty                   int32 // the purchases' quantity; -1 when they differ
	ackedUnits            int64
}

// Compare reads player pl's profile got against its record (see the
// package doc); v values mutations the record has no reply for.
func Compare(pl *Player, got *Profile, v Values) Result {
	var res Result
	why := func(format string, args ...any) {
		res.Mismatch = true
		res.Why = append(res.Why, fmt.Sprintf(format, args...))
	}
	start := pl.Start
	kinds := map[string]*kind{}
	battles := &kind{}
	kinds["battle"] = battles
	var spent, gained int64
	var xp uint64
	var rating int64
	var wins, losses int64
	for _, m := range merged(pl.Muts) {
		k := battles
		if m.Kind == KindPurchase {
			key := "item:" + m.Item
			if k = kinds[key]; k == nil {
				k = &kind{item: m.Item, qty: m.Quantity}
				kinds[key] = k
			}
			if k.qty != m.Quantity {
				k.qty = -1
			}
		}
		switch m.Outcome {
		case Acked:
			res.Acked++
			k.acked++
			switch m.Kind {
			case KindPurchase:
				spent += m.GoldSpent
				k.ackedUnits += int64(m.Quantity)
			case KindBattle:
				gained += m.GoldGained
				xp += m.XPGained
				rating += int64(m.RatingDelta)
				if m.Won {
					wins++
				} else {
					losses++
				}
			}
		case Refused:
			res.Refused++
			k.refused++
		default:
			res.Unresolved++
			k.unres++
		}
	}
	// Items the profile has that the record never bought.
	for item, n := range got.GetInventory() {
		if kinds["item:"+item] == nil && n != start.GetInventory()[item] {
			why("inventory %s: %d, started with %d, and no purchase of it was sent", item, n, start.GetInventory()[item])
		}
	}
	for item, n := range start.GetInventory() {
		if kinds["item:"+item] == nil && got.GetInventory()[item] != n {
			why("inventory %s: %d, started with %d, and no purchase of it was sent", item, got.GetInventory()[item], n)
		}
	}

	applied := int64(0) // mutations applied, by the counts
	gold := start.GetGold() - spent + gained
	goldKnown, xpKnown := true, true
	xpWant := start.GetXp() + xp
	keys := make([]string, 0, len(kinds))
	for key := range kinds {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		k := kinds[key]
		var o int64
		if k == battles {
			o = int64(got.GetWins()) + int64(got.GetLosses()) - int64(start.GetWins()) - int64(start.GetLosses())
		} else {
			units := int64(got.GetInventory()[k.item]) - int64(start.GetInventory()[k.item])
			switch {
			case k.qty <= 0:
				if units != k.ackedUnits {
					why("inventory %s: %+d, want %+d (purchases of mixed quantities: not attributed)", k.item, units, k.ackedUnits)
				}
				applied += int64(k.acked)
				continue
			case units%int64(k.qty) != 0:
				why("inventory %s: %+d is not a whole number of purchases of %d", k.item, units, k.qty)
				applied += int64(k.acked)
				continue
			}
			o = units / int64(k.qty)
		}
		if o < 0 {
			why("%s: %d fewer than at the start", key, -o)
		}
		applied += max(o, 0)
		a := int64(k.acked)
		if o < a {
			res.Lost += int(a - max(o, 0))
		}
		if x := o - a - int64(k.unres); x > 0 {
			ph := min(x, int64(k.refused))
			res.Phantom += int(ph)
			switch rest := x - ph; {
			case rest > 0 && a > 0:
				res.Doubled += int(rest)
			case rest > 0:
				why("%s: %d applied that were never sent", key, rest)
			}
		}
		// Value what the profile shows beyond (or short of) the acked.
		if extra := o - a; extra != 0 && k != battles {
			price, ok := v.Price[k.item]
			if ok {
				gold -= extra * int64(k.qty) * price
			} else {
				goldKnown = false
			}
		}
	}
	extraW := int64(got.GetWins()) - int64(start.GetWins()) - wins
	extraL := int64(got.GetLosses()) - int64(start.GetLosses()) - losses
	for _, e := range []struct {
		n int64
		r *Reward
	}{{extraW, v.Win}, {extraL, v.Loss}} {
		switch {
		case e.n == 0:
		case e.r == nil:
			goldKnown, xpKnown = false, false
		default:
			gold += e.n * e.r.Gold
			xpWant = uint64(int64(xpWant) + e.n*int64(e.r.XP))
		}
	}
	if dv := int64(got.GetVersion()) - int64(start.GetVersion()); dv != applied {
		why("version %d, started at %d: %+d, but %d mutations are applied by the counts", got.GetVersion(), start.GetVersion(), dv, applied)
	}
	if goldKnown && got.GetGold() != gold {
		why("gold %d, want %d", got.GetGold(), gold)
	}
	if xpKnown && got.GetXp() != xpWant {
		why("xp %d, want %d", got.GetXp(), xpWant)
	}
	if extraW == 0 && extraL == 0 {
		if want := int64(start.GetRating()) + rating; int64(got.GetRating()) != want {
			why("rating %d, want %d", got.GetRating(), want)
		}
	}
	return res
}
