// Package lease lets N logic processes share S shards (for example 256)
// through lease rows in PostgreSQL (the shard_leases and logic_members
// tables of internal/pgschema), so that shards move between processes by
// leases alone and a dead process's shards are served again within a
// stated bound.
//
// # The promise
//
// A process serves a shard only while it holds the shard's lease: its row
// names the process as owner and has not expired by the database's clock.
// At most one process holds a lease at a time, by the database's rules: a
// lease is acquired only when its row is free (an empty owner) or expired
// (expires_at < now()), in one UPDATE that also increments the row's
// epoch. The epoch is the fencing token: every commit checks, in its own
// transaction, that owner and epoch are still its own and that the lease
// has not expired (logic's store does; see ErrFenced there). So a process
// that was paused, partitioned or slow past its lease cannot write after
// another took over, whatever it believes.
//
// Locally, a process also stops serving before the database could give a
// shard away: Holds is true only until the local deadline, which is the
// start of the last successful renewal (or of the acquisition) plus TTL
// minus a margin of Renew/2, measured on the monotonic clock. The database
// sets the expiry after that start, so the local deadline comes first by
// at least the margin (clock rates, not clock readings, must agree).
//
// # The protocol
//
// Run is one goroutine. At once and then every Renew (Config.Clock's
// ticker) it does one round, every statement bounded by Renew:
//
//  1. Renew: one UPDATE extends (to now() + TTL) every lease this process
//     holds, matched by shard, owner and the epoch it holds it at, and only
//     while unexpired. A held shard the UPDATE does not return was taken or
//     expired: the Lost hook runs for it at once.
//  2. Heartbeat: upsert this process's logic_members row (heartbeat_at =
//     now()). The live members are the rows heartbeated within TTL.
//  3. Read the live members and the whole owner map (shard, owner, addr,
//     epoch, live) for Owner, Snapshot and the metrics.
//  4. Compute each shard's desired owner by rendezvous hashing over the
//     live members: the highest fnv64a(node + "/" + shard), passed
//     through murmur3's fmix64 mixer (fnv alone spreads badly), equal
//     scores to the greater node string. A member joining or leaving moves
//     about 1/n of the shards, and none between the others.
//  5. Hand off each held shard whose desired owner is another live member:
//     Holds turns false, the Release hook runs until the shard has finished
//     what it accepted, then the row is freed (owner empty, expires_at =
//     now()) if it is still this process's at that epoch. Hand-offs stop
//     for the round once Renew/2 has passed since its start and go on the
//     next round, so a rebalance never delays the next renewal for long;
//     one goes every round all the same, so that a process whose rounds
//     are slow (a starved CPU, a slow database) still gives its shards up.
//  6. Acquire the desired shards this process does not hold that are free,
//     expired, or still its own in the database after a loss, each at a new
//     epoch, and run the Acquired hook for each.
//
// A timer on the earliest local deadline runs the Lost hook for every
// shard whose deadline passes without a renewal (the database is down or
// slow), also between rounds. Leases come back by acquisition, at new
// epochs, when the database answers again.
//
// So a member that joins takes its shards within a few Renew periods: the
// current owners see it on their next round and release, it acquires on
// its round after. A member that stops (crash, SIGKILL, SIGSTOP) stops
// heartbeating and renewing: after TTL it is out of every live set and its
// leases have expired, so its shards are acquired by the others within
// TTL + 2 x Renew (7 s with the defaults: TTL 5 s, Renew 1 s).
//
// When Run's context ends, the process leaves gracefully: it deletes its
// member row first (so that the others' next rounds want its shards), then
// hands every held shard off as in step 5 (renewing the rest meanwhile if
// that takes long), and returns nil. With the database unreachable it
// still runs every Release hook, without waiting on the database per
// shard; the rows then run out at their expiry. Run returns an error at
// once (wrapping pgschema.ErrShards) if the database was set up for
// another shard count.
//
// # Hooks
//
// The hooks run on the manager's goroutine, one at a time, in the order of
// the events: Acquired(shard, epoch) to start serving (it must not block
// long), Release(shard) to stop gracefully (it may block until the shard's
// last commit is done; the caller bounds it, as a Release longer than the
// local deadline loses the other shards), Lost(shard) to stop at once.
// Every Acquired is followed by exactly one Release or Lost before the
// shard is Acquired again by the same process. A shard released by one
// process is acquired by another only after its Release returned.
//
// Node ids must be unique per process start: two processes with the same
// id would share leases.
//
// # Metrics
//
// With Config.Reg: logic_shard_moves_total{reason="acquired|released|lost"},
// logic_shard_lease_losses_total, logic_shards_held,
// logic_shard_owner_map_age_seconds and logic_shards_without_owner (shards
// with no live lease in the last map read; the alert
// LeveeShardWithoutOwner fires when its max stays above 0 for 30 s).
package lease
