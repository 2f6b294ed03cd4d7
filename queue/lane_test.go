package queue

import (
	"testing"
)

// FuzzLaneRanksMatchNaive checks ranks, fronts and compaction against a
// plain list under pushes and removals the input chooses (then a seeded
// stream). The seed corpus is the former fixed-seed run: 60,000 steps from
// PCG(1, 2), long enough that the lane must compact.
func FuzzLaneRanksMatchNaive(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint32(60_000), []byte(nil))
	f.Add(uint64(3), uint64(4), uint32(5_000), []byte{0, 0, 0, 9, 9, 9, 5, 5, 8, 8, 8, 8})
	f.Fuzz(func(t *testing.T, seed1, seed2 uint64, n uint32, ops []byte) {
		laneSteps(t, newSteps(seed1, seed2, ops), int(min(n, 60_000)), n >= 60_000 && len(ops) == 0)
	})
}

func laneSteps(t *testing.T, rnd *steps, n int, mustCompact bool) {
	var l lane
	var live []uint64 // lane indices in order
	for step := range n {
		switch op := rnd.IntN(10); {
		case op < 5 || len(live) == 0:
			live = append(live, l.push(slot{seq: uint64(step)}))
		case op < 8: // release the front
			_, idx, ok := l.front()
			if !ok || idx != live[0] {
				t.Fatalf("step %d: front %d %v, want %d", step, idx, ok, live[0])
			}
			l.remove(idx)
			live = live[1:]
		default: // a hole anywhere
			i := rnd.IntN(len(live))
			l.remove(live[i])
			live = append(live[:i], live[i+1:]...)
		}
		if l.live != len(live) {
			t.Fatalf("step %d: live %d, want %d", step, l.live, len(live))
		}
		if step%97 == 0 {
			for want, idx := range live {
				if l.at(idx) == nil {
					t.Fatalf("step %d: index %d lost", step, idx)
				}
				if got := l.rank(idx); got != want+1 {
					t.Fatalf("step %d: rank(%d) = %d, want %d", step, idx, got, want+1)
				}
			}
		}
	}
	if mustCompact && l.base == 0 {
		t.Fatal("the lane never compacted")
	}
}
