// Package logic is Levee's stateful tier: it serves a declared game
// (Config.Game, package game) and owns its player state, sharded by a hash
// of the player id. Each shard is one goroutine that drains a bounded
// request channel and an internal channel (job results), the internal one
// always first, so its state needs no locks and a result never waits
// behind new requests.
//
// A request is a login or a call of one of the game's actions, by name
// (an undeclared one is UNKNOWN_MESSAGE), with its request message
// (one that does not decode as the action's is BAD_REQUEST, before it
// takes a place in a queue). A login creates a new player's initial state
// at version 1. On the shard, a query's handler reads a copy of the state
// (of another player only where the game declares it: game.ReadsPlayer,
// routed to that player's shard); a mutation's handler gets a copy of the
// state and returns the reply and the next state, and Levee bumps the
// version; an action that runs a job builds the job's request on the
// shard (start), runs it on the battle tier off the shard (Jobs.Run, or
// Config.Jobs in process), and applies its result back on the shard with
// the game's continuation, exactly once per key. A game's error
// (game.Invalid, Reject, NotFound, Forbidden) is a request's outcome; any
// other error, or a panic, fails the request with INTERNAL and changes
// nothing (guard.go: every call of the game's code is timed per action,
// logic_handler_duration_seconds, budget 1 ms, and a panic is counted,
// logic_handler_panics_total, and logged; the shard goes on).
//
// Admission (level 2 of the backpressure) never blocks: a request is refused
// at once with RESOURCE_EXHAUSTED when the channel is at least 90 % full
// (-reject-fill; SHEDDABLE requests from 50 %, -reject-fill-sheddable;
// CRITICAL ones only when it is full), or, for DEFAULT and SHEDDABLE
// requests, when the estimated wait (queue depth × the shard's measured time
// per request) exceeds -queue-max-wait (50 ms; half for SHEDDABLE). The
// refusal carries, in its status details (apperr.Overloaded), the BUSY code
// with the retry delay (that estimated wait, in [50 ms, 5 s]) and a
// leveev2.Backpressure with the queue depth and the fill ratio. A request whose caller
// has gone by the time the shard picks it up is answered with a deadline
// error and never executed, and a non-critical one that has waited more
// than 2 × -queue-max-wait is answered busy, unexecuted. The class
// (levee/internal/priority) arrives in the levee-criticality gRPC metadata,
// set by the gate from the action's declared class (logic is internal and
// trusts it; none means default), and travels on to battle with the remaining
// deadline. -protection=false (or the switch of each mechanism) turns this
// off, for comparison.
//
// State is durable: every shard has its own bbolt file (-store bolt, the
// default) or its rows in a PostgreSQL database that every logic process
// shares (-store postgres; store.go is the boundary, pgstore.go the rows),
// and a shard commits all the mutations of one pass over its channel in a
// single transaction (group commit) before it answers any of them, so an
// acknowledged mutation survives a crash. Mutations are idempotent by
// request id, and actions that run a job also by their job key (the
// game's, e.g. a battle id): the first outcome of each, game errors
// included, is stored in the shard's bucket "outcomes" (PostgreSQL: the
// outcomes table, unique by player and key, so that no second commit of
// it, from any process, can succeed) in the same commit as the change it
// answers, and a
// resend is answered from it for -idempotency-window (24 h) after the
// request was issued; the shard purges older outcomes itself, and a resend
// older than the window whose outcome is gone is answered REQUEST_EXPIRED,
// never applied again. A request Levee refuses before the game's code runs
// (not decodable, too big, no request id, busy, expired, shutting down, a
// failure of the game's code or of the store) stores nothing: its id stays
// open for a resend.
//
// Jobs run on the battle tier, called outside the shard goroutine; the
// result comes back to the shard as an internal message (which bypasses
// admission) and is applied there exactly once. Logic is the one layer
// that retries: a job call refused or unreachable is retried
// once, on another battle instance, under a retry throttle. A refusing
// battle instance is left to cool for the pushback it sent; while every
// instance cools, non-critical jobs are refused locally without an RPC
// (new requests for them already at admission). Each instance also has an
// adaptive concurrency limit (AIMD, with a delay signal per unit of work),
// and a job that finds every instance at its limit waits briefly for a
// slot (-battle-wait) or is refused. The instance's limiter (cooling, calls
// outstanding, the limit: battlelimit.go) and the picker (battlepick.go)
// are pure and told the time; battleclient.go makes the calls and feeds
// them.
//
// The battle instances are either a fixed list (-battle-addrs host:port,...)
// or followed in DNS (-battle-addrs dns:///HOST:PORT, e.g. a headless
// Kubernetes Service; battledns.go): HOST is looked up every
// -battle-resolve-interval (10 s), and early, at most once a second, when
// a call finds an instance unreachable or a connection goes to
// TRANSIENT_FAILURE. Each address is one instance: a new one gets its
// connection, limiter and logic_battle_limit series and takes calls at
// once; one gone from the answer takes no new call, and its connection
// closes once its calls in flight have ended. A failed lookup or an empty
// answer keeps the last known instances (logic_battle_resolve_total
// {result="error"|"empty"}); logic_battle_instances is how many there
// are. Calls read the instances from a copy-on-write set, never a lock.
//
// In a StatefulSet, -instance-from-hostname takes -instance from the pod's
// ordinal (hostname logic-N is instance N).
package logic
