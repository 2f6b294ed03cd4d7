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
package gate
