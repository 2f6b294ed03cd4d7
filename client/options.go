package client

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

// Options tune a connection. The zero value is ready to use: binary
// protobuf frames, gorilla's default dialer, no logging.
type Options struct {
	// JSON selects the "levee.v1.json" subprotocol (protojson text frames)
	// instead of "levee.v1.proto" (binary protobuf).
	JSON bool
	// Dialer makes the connection; nil means websocket.DefaultDialer. It is
	// copied, and its Subprotocols are replaced.
	Dialer *websocket.Dialer
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

	// Later: retry backoff and backpressure pacing plug in here, around
	// Client.roundTrip. Calls never retry until then.
}

// maxServerFrame bounds what the reader accepts from the server.
const maxServerFrame = 1 << 20

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
	return o
}
