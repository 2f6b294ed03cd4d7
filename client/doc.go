// Package client is the Go SDK that game clients and the load-test bots use
// to talk to a Levee gate over its WebSocket player protocol.
//
// Dial connects, authenticates with a player token and waits for the gate's
// Welcome. Each call (GetProfile, BuyItem, StartBattle, or the general Do)
// sends one ClientFrame with a fresh request id and waits for the one
// ServerFrame that answers it. A typed server error comes back as *Error; a
// connection that ends while calls are pending fails them with an error that
// wraps ErrClosed and, when the server sent one, its *CloseError.
//
// One reader goroutine per Client, owned by the Client, matches replies to
// callers; it ends on Close or when the connection is lost (see Done and
// Err). Calls never retry by themselves.
package client
