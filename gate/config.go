package gate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"levee/internal/clock"
)

// DevTokenSecret is the token secret a gate uses when none is configured. It
// is public, so it must never be used in production; the gate warns loudly
// when it falls back to it. The load test and the demo mint tokens with it.
const DevTokenSecret = "levee-dev-secret"

// Config is a gate's configuration. Every field has a flag in cmd/gate.
type Config struct {
	Addr     string // -addr: WebSocket (/ws) and plain HTTP (/)
	GRPCAddr string // -grpc-addr: gRPC health only
	OpsAddr  string // -ops-addr: /metrics /healthz /readyz

	LogicAddrs []string // -logic-addrs: logic instances, in shardmap.Instance order
	Shards     int      // -shards: must match the logic tier's

	TokenSecret string // -token-secret; empty means DevTokenSecret, with a warning

	PingInterval   time.Duration // -ping-interval: how often every connection is pinged
	PongTimeout    time.Duration // -pong-timeout: how long past a ping interval a pong may be late
	WriteTimeout   time.Duration // -write-timeout: the deadline of each write to a player
	RequestTimeout time.Duration // -request-timeout: the longest budget a request gets
	MaxInFlight    int           // -max-inflight: concurrent requests per connection

	ShutdownGrace time.Duration // -shutdown-grace: how long in-flight requests may take at shutdown
	Drain         time.Duration // -drain: NOT_SERVING this long before new connections are refused

	// Clock is the time tokens are verified against and what drives the ping
	// ticker. Nil means the wall clock. Socket deadlines always use the wall
	// clock, as the operating system does.
	Clock clock.Clock
}

// DefaultConfig returns the defaults. LogicAddrs has none: it is required.
func DefaultConfig() Config {
	return Config{
		Addr:           ":8080",
		GRPCAddr:       ":8081",
		OpsAddr:        ":8082",
		Shards:         8,
		PingInterval:   20 * time.Second,
		PongTimeout:    10 * time.Second,
		WriteTimeout:   5 * time.Second,
		RequestTimeout: 10 * time.Second,
		MaxInFlight:    32,
		ShutdownGrace:  10 * time.Second,
		Clock:          clock.Real{},
	}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid gate config")

// Validate reports the first invalid field, naming its flag.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	for _, a := range []struct{ flag, v string }{{"addr", c.Addr}, {"grpc-addr", c.GRPCAddr}, {"ops-addr", c.OpsAddr}} {
		if a.v == "" {
			return bad("-%s: required", a.flag)
		}
	}
	if len(c.LogicAddrs) == 0 {
		return bad("-logic-addrs: required (comma-separated logic gRPC addresses)")
	}
	for i, a := range c.LogicAddrs {
		if strings.TrimSpace(a) == "" {
			return bad("-logic-addrs: entry %d is empty", i)
		}
	}
	if c.Shards <= 0 {
		return bad("-shards: must be > 0, got %d", c.Shards)
	}
	if c.Shards < len(c.LogicAddrs) {
		return bad("-shards: must be >= the number of -logic-addrs (%d), got %d", len(c.LogicAddrs), c.Shards)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"ping-interval", c.PingInterval},
		{"pong-timeout", c.PongTimeout},
		{"write-timeout", c.WriteTimeout},
		{"request-timeout", c.RequestTimeout},
		{"shutdown-grace", c.ShutdownGrace},
	} {
		if d.v <= 0 {
			return bad("-%s: must be > 0, got %s", d.flag, d.v)
		}
	}
	if c.MaxInFlight <= 0 {
		return bad("-max-inflight: must be > 0, got %d", c.MaxInFlight)
	}
	if c.Drain < 0 {
		return bad("-drain: must be >= 0, got %s", c.Drain)
	}
	return nil
}
