package sim

import (
	"cmp"
	"context"
	"slices"

	arenapb "github.com/leveehq/levee/examples/arena/arenapb"
)

const (
	// planSteps is the length of the path each unit plans before it acts: a
	// fixed amount of deterministic arithmetic that stands in for game AI and
	// pathfinding, so that a battle's CPU cost grows with units × ticks.
	// Changing it changes every result_hash.
	planSteps = 200
	// ctxCheckTicks is how often (in ticks) a simulation looks at its context.
	ctxCheckTicks = 4
	// critOneIn is the chance (1 in n) that a hit does double damage.
	critOneIn = 16
)

// Teams as they appear in SimulateReply.winner.
const (
	Draw  = 0
	TeamA = 1
	TeamB = 2
)

type fighter struct {
	hp      int64
	attack  int64
	defense int64
	speed   uint32
	team    int // 0 is team A, 1 is team B
	index   int // position within its team
}

// stats is what a simulation cost, for tests and benchmarks.
type stats struct {
	actions uint64 // attacks made; each plans a path first
}

// Simulate fights req to the end, or until max_ticks, and returns its result.
// The same request always gives the same reply, result_hash included. It
// validates req first (errors wrap apperr.ErrBadRequest) and returns ctx's
// error if ctx ends before the fight does.
func Simulate(ctx context.Context, req *arenapb.SimulateRequest) (*arenapb.SimulateReply, error) {
	if err := Validate(req); err != nil {
		return nil, err
	}
	rep, _, err := simulate(ctx, req)
	return rep, err
}

// simulate runs a validated request.
//
// Each tick every living unit acts, fastest first (then by index, team A
// before team B on a tie): it picks a living enemy at random, plans a path
// to it, and hits it for max(1, attack - defense/2), ±15 %, doubled on a
// critical hit. A unit at 0 hp or less is dead and stops acting. The fight
// ends when a team is wiped out (the other wins) or after max_ticks (a draw).
// result_hash is FNV-1a over the seed, the team sizes, every hit (tick,
// attacker, target, damage, planned path) and the outcome.
func simulate(ctx context.Context, req *arenapb.SimulateRequest) (*arenapb.SimulateReply, stats, error) {
	var st stats
	na, nb := len(req.GetTeamA()), len(req.GetTeamB())
	fs := make([]fighter, 0, na+nb)
	for team, units := range [2][]*arenapb.Unit{req.GetTeamA(), req.GetTeamB()} {
		for i, u := range units {
			fs = append(fs, fighter{
				hp:      int64(u.GetHp()),
				attack:  int64(u.GetAttack()),
				defense: int64(u.GetDefense()),
				speed:   u.GetSpeed(),
				team:    team,
				index:   i,
			})
		}
	}
	order := make([]int, len(fs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int {
		a, b := &fs[x], &fs[y]
		return cmp.Or(cmp.Compare(b.speed, a.speed), cmp.Compare(a.index, b.index), cmp.Compare(a.team, b.team))
	})
	// alive holds each team's living fighters (indexes into fs) in index order.
	var alive [2][]int
	alive[0] = make([]int, 0, na)
	alive[1] = make([]int, 0, nb)
	for i := range fs {
		alive[fs[i].team] = append(alive[fs[i].team], i)
	}

	r := newRNG(req.GetSeed())
	h := newFNV()
	h.word(req.GetSeed())
	h.word(uint64(na)<<32 | uint64(nb))
	var dealt [2]uint64
	var tick uint32
	for tick = 1; tick <= req.GetMaxTicks(); tick++ {
		if tick%ctxCheckTicks == 1 {
			if err := ctx.Err(); err != nil {
				return nil, st, err
			}
		}
		for _, ai := range order {
			a := &fs[ai]
			if a.hp <= 0 {
				continue
			}
			enemies := alive[1-a.team]
			if len(enemies) == 0 {
				break
			}
			slot := r.intn(len(enemies))
			ti := enemies[slot]
			t := &fs[ti]
			path := plan(r.next() ^ uint64(ai)<<48 ^ uint64(ti)<<32)
			dmg := damage(a, t, &r)
			dealt[a.team] += uint64(min(dmg, t.hp))
			t.hp -= dmg
			st.actions++
			h.word(uint64(tick)<<32 | uint64(ai)<<16 | uint64(ti))
			h.word(uint64(dmg))
			h.word(path)
			if t.hp <= 0 {
				alive[t.team] = slices.Delete(enemies, slot, slot+1)
			}
		}
		if len(alive[0]) == 0 || len(alive[1]) == 0 {
			break
		}
	}
	rep := &arenapb.SimulateReply{
		BattleId:   req.GetBattleId(),
		Ticks:      min(tick, req.GetMaxTicks()),
		SurvivorsA: uint32(len(alive[0])),
		SurvivorsB: uint32(len(alive[1])),
		DamageA:    dealt[0],
		DamageB:    dealt[1],
	}
	switch {
	case rep.SurvivorsB == 0:
		rep.Winner = TeamA
	case rep.SurvivorsA == 0:
		rep.Winner = TeamB
	default:
		rep.Winner = Draw
	}
	h.word(uint64(rep.Winner)<<32 | uint64(rep.Ticks))
	h.word(uint64(rep.SurvivorsA)<<32 | uint64(rep.SurvivorsB))
	h.word(rep.DamageA)
	h.word(rep.DamageB)
	rep.ResultHash = uint64(h)
	return rep, st, nil
}

// damage is what a hits t for: max(1, attack - defense/2), scaled by a
// random 85..115 %, at least 1, doubled on a critical hit.
func damage(a, t *fighter, r *rng) int64 {
	base := max(1, a.attack-t.defense/2)
	d := max(1, base*int64(85+r.intn(31))/100)
	if r.intn(critOneIn) == 0 {
		d *= 2
	}
	return d
}

// plan walks planSteps steps of a greedy path over a procedural cost grid
// keyed by key: at each step it scores the four neighbours and moves to the
// cheapest. It returns the path's cost and end point, which feed the result
// hash, so the work is never optimized away.
func plan(key uint64) uint64 {
	x, y := uint32(key), uint32(key>>32)
	var total uint64
	for range planSteps {
		e := gridCost(key, x+1, y)
		w := gridCost(key, x-1, y)
		n := gridCost(key, x, y+1)
		s := gridCost(key, x, y-1)
		bx, by, best := x+1, y, e
		if w < best {
			bx, by, best = x-1, y, w
		}
		if n < best {
			bx, by, best = x, y+1, n
		}
		if s < best {
			bx, by, best = x, y-1, s
		}
		x, y = bx, by
		total += best
	}
	return total<<40 ^ uint64(x)<<20 ^ uint64(y)
}

// gridCost is the cost (0..255) of entering cell (x, y) on key's grid.
func gridCost(key uint64, x, y uint32) uint64 {
	return mix64(key^(uint64(x)<<32|uint64(y))) >> 56
}
