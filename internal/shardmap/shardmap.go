// Package shardmap decides which logic shard owns a player, and which logic
// instance hosts a shard. Gate and logic must agree, so both use this.
package shardmap

import "hash/fnv"

// Shard returns the shard in [0, shards) that owns playerID (FNV-1a, stable
// across processes and releases).
func Shard(playerID string, shards int) int {
	h := fnv.New64a()
	h.Write([]byte(playerID))
	return int(h.Sum64() % uint64(shards))
}

// Instance returns which of `instances` logic processes hosts shard.
func Instance(shard, instances int) int { return shard % instances }
