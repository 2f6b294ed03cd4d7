// Package logic is Levee's stateful tier: it owns player state, sharded by a
// hash of the player id. Each shard is one goroutine that drains a bounded
// channel, so its state needs no locks; a request that finds the channel full
// is refused at once with RESOURCE_EXHAUSTED and a retry delay, and a request
// whose caller has gone by the time the shard picks it up is dropped.
//
// State is durable: every shard has its own bbolt file, and a shard commits
// all the mutations of one pass over its channel in a single transaction
// (group commit) before it answers any of them, so an acknowledged purchase
// survives a crash. Purchases are idempotent by request id and battle rewards
// by battle id: the outcome of each is stored in the player's record and a
// repeat is answered from it.
//
// Battles are simulated by the battle tier, called outside the shard
// goroutine; the result comes back to the shard as an internal message and
// is applied there exactly once.
package logic
