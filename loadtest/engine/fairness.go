package engine

import (
	"cmp"
	"slices"
	"sort"
	"time"

	"github.com/leveehq/levee/loadtest/report"
)

// entry is one player's arrival and admission, for the fairness figures.
type entry struct {
	Gate     int   `json:"g"`
	Arrived  int64 `json:"a"` // ms since the run's start
	Admitted int64 `json:"d"` // ms since the run's start; -1 never
	Joined   int64 `json:"j"` // its first QueueStatus, ms since the run's start; -1 none
	// Waited is the gate's waited_ms of its admission when it was let in
	// by its first and only dial; -1 otherwise (its release is not dated).
	Waited int64 `json:"w"`
}

// inversionSlack is how much earlier a player must have arrived than
// another, admitted before it, for the pair to count as out of order: the
// dial to the gate and the gate's pacing tick blur order below it.
const inversionSlack = time.Second

// fairness measures what one line per gate costs players: admissions out
// of arrival order, and the spread of waiting times of players who
// arrived in the same second, across all gates and within each gate.
func fairness(es []entry, gates int) *report.Fairness {
	var adm []entry
	for _, e := range es {
		if e.Admitted >= 0 {
			adm = append(adm, e)
		}
	}
	f := &report.Fairness{Players: len(es), Admitted: len(adm), Gates: gates, SlackMs: inversionSlack.Milliseconds()}
	f.SureInversions, f.SurePairs = sureOrderByGate(adm)
	if len(adm) < 2 {
		return f
	}
	f.Inversions = inversions(adm)
	f.SpreadP50Ms, f.SpreadMaxMs = spread(adm)
	byGate := map[int][]entry{}
	for _, e := range adm {
		byGate[e.Gate] = append(byGate[e.Gate], e)
	}
	var within []int64
	for g := range gates {
		f.InversionsWithinGates += inversions(byGate[g])
		if p50, _ := spread(byGate[g]); p50 >= 0 {
			within = append(within, p50)
		}
	}
	f.SpreadWithinGateP50Ms = median(within)
	pairs := int64(len(adm)) * int64(len(adm)-1) / 2
	if pairs > 0 {
		f.InversionShare = float64(f.Inversions) / float64(pairs)
	}
	return f
}

// inversions counts pairs (i, j) where i arrived more than the slack
// before j but was admitted after j: sort by arrival, and for each j count,
// among those who arrived early enough, the ones admitted later (a
// Fenwick tree over admission ranks).
func inversions(es []entry) int64 {
	if len(es) < 2 {
		return 0
	}
	byArr := slices.Clone(es)
	sort.Slice(byArr, func(a, b int) bool { return byArr[a].Arrived < byArr[b].Arrived })
	ranks := make([]int64, len(byArr))
	for i, e := range byArr {
		ranks[i] = e.Admitted
	}
	sorted := slices.Clone(ranks)
	slices.Sort(sorted)
	rank := func(v int64) int { i, _ := slices.BinarySearch(sorted, v); return i + 1 }
	tree := make([]int64, len(sorted)+2)
	addAt := func(i int) {
		for ; i < len(tree); i += i & -i {
			tree[i]++
		}
	}
	sumTo := func(i int) (s int64) { // how many inserted have rank <= i
		for ; i > 0; i -= i & -i {
			s += tree[i]
		}
		return
	}
	slack := inversionSlack.Milliseconds()
	var n, inserted int64
	k := 0
	for j := range byArr {
		for k < j && byArr[k].Arrived+slack < byArr[j].Arrived {
			addAt(rank(byArr[k].Admitted))
			inserted++
			k++
		}
		// Early arrivals admitted strictly after j.
		upper, _ := slices.BinarySearch(sorted, byArr[j].Admitted+1)
		n += inserted - sumTo(upper)
	}
	return n
}

// spread returns the median and the largest, over arrival seconds with at
// least two players, of the longest minus the shortest wait; -1 when
// there is no such second.
func spread(es []entry) (p50, maxMs int64) {
	type mm struct{ lo, hi int64 }
	sec := map[int64]*mm{}
	count := map[int64]int{}
	for _, e := range es {
		w := e.Admitted - e.Arrived
		s := e.Arrived / 1000
		count[s]++
		if m := sec[s]; m == nil {
			sec[s] = &mm{w, w}
		} else {
			m.lo, m.hi = min(m.lo, w), max(m.hi, w)
		}
	}
	var spreads []int64
	for s, m := range sec {
		if count[s] >= 2 {
			spreads = append(spreads, m.hi-m.lo)
		}
	}
	if len(spreads) == 0 {
		return -1, -1
	}
	slices.Sort(spreads)
	return median(spreads), spreads[len(spreads)-1]
}

func median(v []int64) int64 {
	if len(v) == 0 {
		return -1
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// sureOrderByGate is sureOrder within each gate's line, summed.
func sureOrderByGate(es []entry) (inv, pairs int64) {
	byGate := map[int][]entry{}
	for _, e := range es {
		byGate[e.Gate] = append(byGate[e.Gate], e)
	}
	for _, g := range byGate {
		i, p := sureOrder(g)
		inv, pairs = inv+i, pairs+p
	}
	return inv, pairs
}

// sureOrder judges one line's order only where it is sure, as the players
// saw it. A pair (x, y) is surely in arrival order when x had its first
// QueueStatus before y arrived; it is surely inverted when, also, the gate
// surely released y before x. A release is dated by the gate's own
// waited_ms (entry.Waited): the gate joined the player to its line at some
// instant J between its arrival and its first status and released it at
// J + waited, which is also no later than the player saw itself admitted.
// So the order in which the Admitted pushes of one batch reach the players
// (written by one goroutine per player, in any order) does not count. The
// times are whole milliseconds (truncated), so every bound is widened by
// 1 ms on each side. Players without a dated release are left out. pairs
// counts the surely ordered pairs, inv the surely inverted ones;
// O(n log n).
func sureOrder(es []entry) (inv, pairs int64) {
	type rel struct {
		entry
		lo, hi int64 // the release surely fell in [lo, hi]
	}
	var xs, ys []rel // candidates for the earlier arrival (by first status), for the later one (by arrival)
	for _, e := range es {
		if e.Admitted < 0 || e.Waited < 0 {
			continue
		}
		r := rel{entry: e, lo: e.Arrived - 1 + e.Waited, hi: e.Admitted + 1}
		if e.Joined >= 0 {
			r.hi = min(r.hi, e.Joined+e.Waited+2)
			xs = append(xs, r)
		}
		ys = append(ys, r)
	}
	slices.SortFunc(xs, func(a, b rel) int { return cmp.Compare(a.Joined, b.Joined) })
	slices.SortFunc(ys, func(a, b rel) int { return cmp.Compare(a.Arrived, b.Arrived) })
	keys := make([]int64, len(xs)) // the xs' earliest releases, sorted
	for i, x := range xs {
		keys[i] = x.lo
	}
	slices.Sort(keys)
	rank := func(t int64) int { // keys at or before t
		return sort.Search(len(keys), func(i int) bool { return keys[i] > t })
	}
	tree := make([]int64, len(keys)+1)
	add := func(i int) {
		for i++; i < len(tree); i += i & -i {
			tree[i]++
		}
	}
	prefix := func(n int) (s int64) { // inserted among the first n keys
		for ; n > 0; n -= n & -n {
			s += tree[n]
		}
		return s
	}
	var inserted int64
	next := 0
	for _, y := range ys {
		// x surely had its place before y arrived: x.Joined+1 <= y.Arrived-1.
		for next < len(xs) && xs[next].Joined+2 <= y.Arrived {
			add(rank(xs[next].lo) - 1)
			inserted++
			next++
		}
		pairs += inserted
		inv += inserted - prefix(rank(y.hi)) // those surely released after y: lo > y.hi
	}
	return inv, pairs
}
