package lease

import (
	"hash/fnv"
	"strconv"
)

// score is node's rendezvous weight for shard: fnv64a of node + "/" +
// the shard's decimal number, finished with murmur3's 64-bit mixer
// (fmix64). The mixer matters: rendezvous hashing compares whole values,
// so their high bits decide, and fnv's high bits barely depend on the last
// bytes hashed (the shard number, or a node name's last letter). Without
// it, nodes "logic-a", "logic-b" and "logic-c" got 54, 10 and 0 of 64
// shards.
func score(node string, shard int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(node))
	h.Write([]byte{'/'})
	h.Write(strconv.AppendInt(nil, int64(shard), 10))
	return fmix64(h.Sum64())
}

// fmix64 is murmur3's finalizer: every input bit flips each output bit
// with probability about 1/2.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// desiredOwner is the node of nodes with the highest score for shard
// (rendezvous or highest-random-weight hashing); equal scores go to the
// greater node string, so every process picks the same one. "" when nodes
// is empty.
func desiredOwner(nodes []string, shard int) string {
	best, bestScore := "", uint64(0)
	for _, n := range nodes {
		s := score(n, shard)
		if best == "" || s > bestScore || (s == bestScore && n > best) {
			best, bestScore = n, s
		}
	}
	return best
}

// assign is desiredOwner of every shard in [0, shards). A node joining
// takes about 1/len(nodes) of the shards, each from whichever node had
// it, and no shard moves between the others; a node leaving gives only
// its own shards away.
func assign(nodes []string, shards int) []string {
	out := make([]string, shards)
	for s := range out {
		out[s] = desiredOwner(nodes, s)
	}
	return out
}
