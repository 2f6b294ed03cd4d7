package gate

import (
	"net/http"
	"time"
)

// The seams where the admission queue and further per-connection limits
// plug in. Nil hooks admit and allow everything. The gate's own protection
// (connection cap, handshake cap, rate and in-flight limits) runs besides
// them: the connection cap before admit, the rate limit before allow and the
// in-flight limit after it.

// admitFunc decides, before the WebSocket upgrade, whether an authenticated
// player may open a connection. On success release is called once, when the
// connection closes. On refusal the player is told why (a typed error frame
// with retryAfter) and the socket is closed with 1013 (Try Again Later).
type admitFunc func(r *http.Request, playerID string) (release func(), retryAfter time.Duration, err error)

// allowFunc decides whether a connection may start one more request. A
// refusal is answered with a typed error frame carrying retryAfter.
type allowFunc func(now time.Time) (retryAfter time.Duration, err error)
