package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/client/backoff"
	"github.com/leveehq/levee/client/pacer"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/gamedef"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// DefaultPaceRate is the pacer's base rate, in requests per second per
// connection, when Options.Pacer.Rate is 0. A player issues a few actions a
// second at most (the load-test bots about 2); 20/s leaves room for bursts
// of UI activity while still capping a runaway loop, and keeps 3/s at full
// backpressure (15 %). It must not exceed the gate's per-connection rate
// limit (-conn-rate, 20/s with a burst of 40 by default): the pacer has no
// burst, so a paced client is then never refused with RATE_LIMITED.
const DefaultPaceRate = 20.0

// ErrInvalidOptions is wrapped by Dial's error for an Options field that
// makes no sense (a negative backoff, a pacer factor above 1, ...).
var ErrInvalidOptions = errors.New("client: invalid options")

// Options tune a connection. The zero value is ready to use: binary
// protobuf frames, gorilla's default dialer, no logging, and every overload
// protection on with the seed defaults (retries of busy replies with
// backoff and a retry budget; pacing by the server's backpressure).
type Options struct {
	// Game is the game's declaration (optional). From it the SDK knows
	// each action's class, the default criticality of a call and its
	// place in the pacer (without it every call is DEFAULT unless
	// WithCriticality says otherwise), and the message types that the
	// JSON subprotocol needs.
	Game *game.Game
	// JSON selects the "levee.v2.json" subprotocol (protojson text frames,
	// the game's messages as their protojson objects) instead of
	// "levee.v2.proto" (binary protobuf). It needs Game.
	JSON bool
	// Dialer makes the connection; nil means websocket.DefaultDialer. It is
	// copied, and its Subprotocols are replaced.
	Dialer *websocket.Dialer
	// TLS configures wss:// connections (ws:// ignores it): the CAs to
	// trust (RootCAs; TLSConfigFromCAFile builds one from a CA file), the
	// server name, client certificates. nil uses the Dialer's
	// TLSClientConfig, and without one Go's defaults: the system roots.
	// A config without a ClientSessionCache is given the SDK's shared one
	// (see DefaultSessionCacheSize; set SessionTicketsDisabled to opt
	// out), so a reconnect resumes the TLS session rather than paying for
	// a full handshake. There is deliberately no way here to skip
	// verification: a certificate the client cannot verify fails Dial
	// with ErrCertificate.
	TLS *tls.Config
	// Header is sent with the handshake (copied, not modified).
	Header http.Header
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// WriteTimeout bounds each frame write; 0 means 10 s. A write that
	// times out ends the connection.
	WriteTimeout time.Duration
	// CloseTimeout bounds how long Close waits for the server to answer
	// the close frame; 0 means 2 s.
	CloseTimeout time.Duration

	// Retry is the schedule for retrying a request the server refused for
	// load (BUSY, SERVER_FULL, RATE_LIMITED): full jitter over
	// min(Base·2^n, Cap) on top of the server's retry_after, at most
	// MaxAttempts attempts in all. Zero fields take the seed defaults
	// (100 ms, 5 s, 3 attempts).
	Retry backoff.Policy
	// NoRetry turns retries off: every refusal is returned as it came.
	NoRetry bool
	// Budget is the retry budget (retries at most about 10 % of the
	// requests the server answered).
	// Set it to share one budget among many clients (e.g. all the bots of
	// a load test, or all connections of a game process); nil gives each
	// client its own with backoff.DefaultBudgetConfig.
	Budget *backoff.Budget

	// Pacer tunes the adaptive leaky bucket that every request passes
	// before it is sent. Zero fields take their defaults: Rate
	// DefaultPaceRate (20/s), and pacer's MinRate 1/s, Factor 0.85,
	// Capacity 50.
	Pacer pacer.Config
	// NoPacing turns the pacer off: requests are sent at once.
	NoPacing bool

	// Reconnect is the redial schedule of DialRetry and Reconnect: the
	// first redial after a random delay in [0, Spread), then full jitter
	// over min(Base·2^n, Cap), never sooner than the server's retry_after.
	// Zero fields take backoff.DefaultReconnect (5 s, 100 ms, 5 s).
	Reconnect backoff.Reconnect

	// Clock times the retry waits, the pacer, the retry budget and the
	// redial waits; nil means the real clock. (Write and close timeouts,
	// and the request's timeout_ms, always use the real clock, as ctx
	// deadlines do.)
	Clock clock.Clock
	// Rand returns a float in [0, 1) for the jitter; it must be safe for
	// concurrent use. nil means math/rand/v2.Float64.
	Rand func() float64

	// OnQueue, when set, is called with every QueueStatus the gate pushes
	// while the player waits in its admission line (position, ETA, release
	// rate, ticket: the last one the gate sent on this connection, which
	// it sends in the first status only), in the order they came (seldom
	// far back in a standing line: see Dial), on the goroutine that called
	// Dial (or DialRetry, Reconnect), before Dial returns. It should return
	// quickly: while it runs, the connection's frames are not read.
	OnQueue func(*leveev2.QueueStatus)
	// OnAdmitted, when set, is called when the gate lets the waiting
	// player in (its Admitted push), on the same goroutine as OnQueue,
	// before the Welcome (for which the gate still logs the player in).
	OnAdmitted func(*leveev2.Admitted)
	// Ticket resumes a place in the gate's admission line: the Ticket of
	// a QueueStatus from an earlier connection, sent as the ticket query
	// parameter. The gate keeps a dropped player's place for the status's
	// GraceMs. An admission pass (Admitted.Ticket; Client.Ticket gives the
	// latest of the two) is presented the same way and brings back a
	// player who was in. DialRetry and Reconnect fill it in by themselves
	// from the last status they saw (see LineError); empty means a new
	// place.
	Ticket string
}

// maxServerFrame bounds what the reader accepts from the server.
const maxServerFrame = 1 << 20

// validate reports an Options field that the SDK cannot use.
func (o Options) validate() error {
	if o.JSON && o.Game == nil {
		return fmt.Errorf("%w: JSON needs Game, the declaration of the game's messages", ErrInvalidOptions)
	}
	if err := o.Retry.Validate(); err != nil {
		return fmt.Errorf("%w: Retry: %w", ErrInvalidOptions, err)
	}
	if err := o.Pacer.Validate(); err != nil {
		return fmt.Errorf("%w: Pacer: %w", ErrInvalidOptions, err)
	}
	if err := o.Reconnect.Validate(); err != nil {
		return fmt.Errorf("%w: Reconnect: %w", ErrInvalidOptions, err)
	}
	return nil
}

// def is the game's declaration, nil without one.
func (o Options) def() *gamedef.Def {
	if o.Game == nil {
		return nil
	}
	return o.Game.Def()
}

func (o Options) withDefaults() Options {
	if o.Dialer == nil {
		o.Dialer = websocket.DefaultDialer
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 2 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Pacer.Rate == 0 {
		o.Pacer.Rate = DefaultPaceRate
	}
	return o
}
