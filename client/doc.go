// Package client is the Go SDK that game clients and the load-test bots use
// to talk to a Levee gate over its WebSocket player protocol.
//
// Dial connects, authenticates with a player token and waits for the gate's
// Welcome; DialRetry and Reconnect dial again after a refusal or a lost
// connection, spreading and backing off their attempts. A gate serving TLS
// is dialed at a wss:// URL: Options.TLS (TLSConfigFromCAFile for a private
// CA; nil for the system roots) says whom to trust, a certificate that
// fails verification is an ErrCertificate (never retried, never skipped),
// and a shared TLS session cache makes reconnects resume their sessions
// (Client.TLS reports DidResume).
//
// On launch day the gate may hold a player in its admission line before the
// Welcome: Dial then waits in line (its ctx bounds the wait, so give it
// minutes), reports each QueueStatus the gate pushes (place, ETA, release
// rate) to Options.OnQueue, and returns after the Admitted push and the
// Welcome. A dial that fails while in line wraps a *LineError carrying the
// line ticket; DialRetry and Reconnect use it to come back to the same place
// within the gate's grace period (Options.Ticket does it by hand). A player
// let in from the line gets an admission pass with Admitted, which
// Client.Ticket then returns instead of the line ticket: presented after a
// gate restart it lets the player in at once rather than back in line.
// A call names one of the game's actions and carries its request:
// Call(ctx, action, req, reply) encodes the request message and decodes
// the reply into reply (the generic Call[Rep] returns it typed); Send does
// the same with a request already encoded and returns the reply frame,
// with its Replayed flag and the state's Version. Each sends one
// ClientFrame with a fresh request id and issued_at_ms and waits for the
// one ServerFrame that answers it; Do is the same for a frame built by
// hand. Welcome holds the player's state as the game declares it (State
// decodes it). A game's typed helpers live with the game (for the demo
// game, examples/arena/arenaclient). Options.Game, the game's declaration,
// tells the SDK each action's class and the message types the JSON
// subprotocol needs. A typed server error comes back as *Error (its Reason
// is the game's own code, e.g. "out_of_stock"; REJECTED is a
// business error, final like every error a mutation ends with); a connection that
// ends while calls are pending fails them with an error that wraps ErrClosed
// and, when the server sent one, its *CloseError. When that close is 1012
// (Service Restart: a stopping gate answers every request it has read,
// then closes) the error is also a SHUTTING_DOWN *Error: a typed answer,
// outcome unknown, to resend on the next connection. When it is 4001 (a
// newer connection of the same player id replaced this one: the gate holds
// one connection per player, and answered every request it had read
// first) the error wraps ErrReplaced, and Reconnect and DialRetry do not
// dial again.
//
// The SDK honours the cluster's backpressure (all of it on by default, each
// part switchable in Options):
//
//   - Pacing: every request waits its turn in an adaptive leaky bucket
//     (package pacer) whose rate follows the backpressure ratio the server
//     attaches to its replies, rate = base × (1 − 0.85 × ratio), at least
//     1/s. Its local queue is bounded; a CRITICAL request evicts the oldest
//     waiting request of the lowest criticality, which fails locally with a
//     *LocalError.
//   - Retries: refusals for load (BUSY, SERVER_FULL, RATE_LIMITED) and
//     answers that leave the outcome unknown (UNAVAILABLE,
//     DEADLINE_EXCEEDED) are retried, always with the same request id (the
//     server executes an id at most once, so a purchase is never charged
//     twice), after an exponential full-jitter delay never sooner than the
//     server's retry_after, at most 3 attempts in all, within the caller's
//     deadline, and only while a client-wide retry budget (package
//     backoff: about 10 % extra requests) allows. The budget grows with
//     the requests the server answers (a result or a final error), not
//     with the ones it refuses: while a tier is down, retries are paid
//     only by what the last 10 s of answered requests left and the
//     budget's small reserve.
//   - Outcome unknown: when the SDK gives up on a request that may have
//     been executed (its connection or ctx ended while it was in flight,
//     or the last answer was UNAVAILABLE, DEADLINE_EXCEEDED or
//     SHUTTING_DOWN), the error carries an *UnresolvedError with the
//     request; Resend sends it again with its id, typically after
//     Reconnect. Never send such a request again with a new id.
//   - Criticality: the game's declaration decides it (the gate reads each
//     action's class from it); the SDK sends the same class when it has
//     the declaration (Options.Game), DEFAULT otherwise, and orders its
//     pacer by it. WithCriticality
//     may lower a call's class (the gate honours that) but not raise it
//     (the gate ignores that).
//
// WithCallInfo gives a caller that keeps its own record of its requests
// (a load tool's ledger) the request id each call used and how many times
// it was sent on the wire.
//
// One reader goroutine per Client, owned by the Client, matches replies to
// callers and feeds the pacer; it ends on Close or when the connection is
// lost (see Done and Err). Every other wait happens on the caller's
// goroutine, on Options.Clock.
package client
