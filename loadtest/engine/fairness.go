package engine

import (
	"slices"
	"sort"
	"time"

	"levee/loadtest/report"
)

// entry is one player's arrival and admission, for the fairness figures.
type entry struct {
	Gate     int   `json:"g"`
	Arrived  int64 `json:"a"` // ms since the run's start
	Admitted int64 `json:"d"` // ms since the run's start; -1 never
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
