package lease

import (
	"fmt"
	"math"
	"testing"
)

func counts(owners []string) map[string]int {
	c := map[string]int{}
	for _, o := range owners {
		c[o]++
	}
	return c
}

func TestAssignSpread(t *testing.T) {
	nodes := []string{"alpha", "bravo", "charlie"}
	const shards = 256
	c := counts(assign(nodes, shards))
	want := float64(shards) / 3
	for _, n := range nodes {
		if d := math.Abs(float64(c[n]) - want); d > want/4 {
			t.Errorf("%s holds %d of %d shards, more than 25%% off %.1f (all: %v)", n, c[n], shards, want, c)
		}
	}
	if len(c) != len(nodes) {
		t.Errorf("owners %v, want exactly %v", c, nodes)
	}
}

// TestAssignSpreadStatistics guards the hash's quality over many name
// sets: the spread must be that of independent fair draws (fnv64a without
// the mixer fails this badly).
func TestAssignSpreadStatistics(t *testing.T) {
	const shards, trials = 256, 500
	sumsq, off := 0.0, 0
	for i := range trials {
		nodes := []string{fmt.Sprintf("logic-%d-a", i), fmt.Sprintf("logic-%d-b", i), fmt.Sprintf("logic-%d-c", i)}
		c := counts(assign(nodes, shards))
		bad := false
		for _, n := range nodes {
			d := float64(c[n]) - shards/3.0
			sumsq += d * d
			bad = bad || math.Abs(d) > shards/3.0/4
		}
		if bad {
			off++
		}
	}
	sd := math.Sqrt(sumsq / (3 * trials))
	binomial := math.Sqrt(shards * (1.0 / 3) * (2.0 / 3))
	if sd > 1.15*binomial {
		t.Errorf("shards per node vary with sd %.2f, want about the binomial %.2f", sd, binomial)
	}
	if off > trials/20 {
		t.Errorf("%d of %d name sets had a node more than 25%% off its third, want under 5%%", off, trials)
	}
}

func TestAssignJoinMovesOnlyToNewcomer(t *testing.T) {
	const shards = 256
	before := assign([]string{"alpha", "bravo", "charlie"}, shards)
	after := assign([]string{"alpha", "bravo", "charlie", "delta"}, shards)
	moved := 0
	for s := range shards {
		if before[s] == after[s] {
			continue
		}
		moved++
		if after[s] != "delta" {
			t.Errorf("shard %d moved from %s to %s: a join may only move shards to the newcomer", s, before[s], after[s])
		}
	}
	want := float64(shards) / 4
	if math.Abs(float64(moved)-want) > want/4 {
		t.Errorf("%d shards moved on the 4th node's join, want about %.0f (1/n)", moved, want)
	}
	// Leaving is the same in reverse: only the leaver's shards move.
	gone := assign([]string{"alpha", "charlie", "delta"}, shards)
	for s := range shards {
		if after[s] != "bravo" && gone[s] != after[s] {
			t.Errorf("shard %d moved from %s to %s when bravo left", s, after[s], gone[s])
		}
	}
}

func TestDesiredOwnerTies(t *testing.T) {
	if got := desiredOwner(nil, 3); got != "" {
		t.Errorf("no nodes: %q, want empty", got)
	}
	// Order of the list does not matter, duplicates neither.
	a := assign([]string{"x", "y", "z"}, 64)
	b := assign([]string{"z", "y", "x", "y"}, 64)
	for s := range a {
		if a[s] != b[s] {
			t.Fatalf("shard %d: %s vs %s depending on the list's order", s, a[s], b[s])
		}
	}
}
