package queue

import (
	"math/rand/v2"
	"testing"
)

// TestLaneRanksMatchNaive checks ranks, fronts and compaction against a
// plain list under random pushes and removals.
func TestLaneRanksMatchNaive(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var l lane
	var live []uint64 // lane indices in order
	for step := range 60_000 {
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
	if l.base == 0 {
		t.Fatal("the lane never compacted")
	}
}
