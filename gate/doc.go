// Package gate is Levee's edge tier: it holds the players' WebSocket
// connections, authenticates them with signed tokens, and routes each
// player's requests to the logic instance that owns the player's shard.
//
// Every request frame gets exactly one reply frame with the same request id:
// the logic tier's result or a typed error. The gate never retries logic.
//
// Per-connection cost is kept small: the HTTP handler returns right after the
// upgrade, so a connection holds one reader goroutine, a 1 KiB read buffer and
// no write buffer between writes (a shared pool). One server-owned goroutine
// pings every connection; writes are serialized by a per-connection mutex.
//
// Overload protection (level 1 of Levee's three), each mechanism with its
// own switch and all of them under Config.Protection:
//
//   - Connection cap (MaxConns): past it a player is upgraded and answered
//     from the HTTP handler itself with a pre-encoded SERVER_FULL frame
//     (retry_after jittered ±20 %, a friendly message and the optional
//     "while you wait" card) and a 1013 close, in one write, then the socket
//     is closed; nothing is kept and gate_active_connections does not move.
//   - Handshake cap (MaxHandshakes): while that many connections are
//     starting, HTTP 503 with Retry-After before any upgrade.
//   - Per-connection rate limit: a token bucket (ConnRate, ConnBurst) on the
//     frames a player sends; over it, RATE_LIMITED with the time until a
//     token as retry_after.
//   - Per-connection in-flight limit (MaxInFlight): RATE_LIMITED with a
//     short retry_after.
//
// When logic refuses under load (RESOURCE_EXHAUSTED) the player gets a typed
// BUSY with logic's pushback as retry_after and its queue depth and fill
// ratio as the frame's backpressure. The gate never retries logic.
package gate
