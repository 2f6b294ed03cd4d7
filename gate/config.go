package gate

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/jwtauth"
	"github.com/leveehq/levee/internal/lineapi"
	"github.com/leveehq/levee/internal/wire"
	"github.com/leveehq/levee/queue"
)

// DevTokenSecret is the token secret a gate uses when none is configured. It
// is public, so it must never be used in production; the gate warns loudly
// when it falls back to it. The load test and the demo mint tokens with it.
const DevTokenSecret = "levee-dev-secret"

// Config is a gate's configuration. Every field but Game and Clock has a
// flag in gate/gatecmd.
type Config struct {
	// Security is how this tier's gRPC is secured, both its server and
	// its calls to the tier below: grpcdial.MTLS with the cluster's
	// certificates, or grpcdial.Insecure (the zero value: plaintext; the
	// binaries require -insecure for it).
	Security grpcdial.Security

	// Game is the game the gate serves: each action's class, request and
	// reply types and limits come from its declaration. Required; New
	// refuses one whose Validate fails.
	Game *game.Game

	// MaxFrame (-max-frame) is the largest frame read from a player, in
	// bytes; a larger one closes the connection (1009). An action's
	// request is also capped by its declared MaxRequestBytes.
	MaxFrame int

	Addr     string // -addr: WebSocket (/ws) and plain HTTP (/)
	GRPCAddr string // -grpc-addr: gRPC health only
	OpsAddr  string // -ops-addr: /metrics /healthz /readyz

	// LogicAddrs (-logic-addrs) are the logic instances, in
	// shardmap.Instance order. With logic on PostgreSQL (-store=postgres)
	// they are only entry points (one Kubernetes Service will do): logic
	// answers a request for a shard it does not hold with the owner's
	// address, and the gate follows it and caches the owner (logicPool).
	LogicAddrs []string
	Shards     int // -shards: must match the logic tier's

	TokenSecret string // -token-secret; empty means DevTokenSecret, with a warning

	// TLSCert and TLSKey (-tls-cert, -tls-key) are the PEM files of the
	// gate's public certificate: given, the player port (wss and https)
	// and the ops port (https) serve TLS 1.2+ (tlsconf.Edge), re-reading
	// the files when they change. Both or neither; neither is plain ws.
	TLSCert, TLSKey string
	// TokenKeys (-token-keys) is a key ring file (token.ParseKeys, see
	// docs/keys.md), read again when it changes; it replaces TokenSecret
	// (both set is refused).
	TokenKeys string
	// Studio JWTs (internal/jwtauth, docs/keys.md): accepted next to Levee
	// tokens when JWKS is set; JWTIssuer and JWTAudience are then required.
	JWKS           string        // -jwks: a JWKS file or https URL
	JWTIssuer      string        // -jwt-issuer: the required iss
	JWTAudience    string        // -jwt-audience: the required aud
	JWTPlayerClaim string        // -jwt-player-claim: the claim holding the player id
	JWTLeeway      time.Duration // -jwt-leeway: clock skew allowed on exp, nbf, iat
	// TokenMaxLifetime (-token-max-lifetime) refuses, UNAUTHORIZED with a
	// 1008 close, a token whose expiry lies further ahead than this.
	TokenMaxLifetime time.Duration

	PingInterval   time.Duration // -ping-interval: how often every connection is pinged
	PongTimeout    time.Duration // -pong-timeout: how long past a ping interval a pinged player may stay silent
	WriteTimeout   time.Duration // -write-timeout: the deadline of each write to a player
	RequestTimeout time.Duration // -request-timeout: the longest budget a request gets
	MaxInFlight    int           // -max-inflight: concurrent requests per connection

	// Overload protection (issue 3, level 1). A mechanism is active when
	// Protection and its own switch are both true; an inactive one is
	// unlimited (see each switch).
	Protection bool // -protection: false turns every mechanism below off at once

	// ConnCap (-conn-cap) refuses a player past MaxConns open connections
	// with a SERVER_FULL frame, the optional card and a 1013 close. Off: no
	// limit on connections.
	ConnCap        bool
	MaxConns       int           // -max-conns: open player connections per gate
	FullRetryAfter time.Duration // -full-retry-after: retry_after of a SERVER_FULL refusal, jittered ±20 %
	FullCardFile   string        // -full-card-file: optional "while you wait" text appended to the SERVER_FULL message

	// HandshakeCap (-handshake-cap) answers HTTP 503 with Retry-After, before
	// upgrading, while MaxHandshakes connections are starting (from the
	// upgrade request until the player is welcomed or refused). Off: no limit.
	HandshakeCap  bool
	MaxHandshakes int // -max-handshakes

	// ConnRateLimit (-conn-rate-limit) gives each connection a token bucket
	// of ConnBurst tokens refilled at ConnRate per second; a frame that finds
	// it empty is answered RATE_LIMITED with the time until the next token.
	// Off: no rate limit.
	ConnRateLimit bool
	ConnRate      float64 // -conn-rate: requests per second per connection
	ConnBurst     int     // -conn-burst: bucket size

	// InflightLimit (-inflight-limit) answers RATE_LIMITED to a request past
	// MaxInFlight on one connection. Off: no limit.
	InflightLimit bool

	// LogicPushback (-logic-pushback) honours logic's pushback: after logic
	// refuses a request for a shard with RESOURCE_EXHAUSTED and a pushback
	// P, the gate itself answers BUSY to that shard's requests of the same
	// or a lower criticality for P (at most 2 s), without calling logic;
	// critical requests always go to logic. Off: every request goes to
	// logic.
	LogicPushback bool

	// Limits per source address and per player (limits.go). Each is off
	// at 0, and all are off with Protection.
	AddrHandshakeRate  float64  // -addr-handshake-rate: handshakes per second per /24 (IPv4) or /64 (IPv6)
	AddrHandshakeBurst int      // -addr-handshake-burst: the handshake bucket's size per address bucket
	AddrMaxConns       int      // -addr-max-conns: open connections per address bucket
	AddrLimitExempt    []string // -addr-limit-exempt: CIDRs not limited per address ("none": every address is)
	TrustedProxies     []string // -trusted-proxies: CIDRs whose X-Forwarded-For is honoured (rightmost untrusted hop)
	PlayerRate         float64  // -player-rate: requests per second per player, across its connections
	PlayerBurst        int      // -player-burst: the player bucket's size

	ShutdownGrace time.Duration // -shutdown-grace: how long in-flight requests may take at shutdown
	Drain         time.Duration // -drain: NOT_SERVING this long before new connections are refused

	// The admission line (issue 4); see the package doc.
	LineMode       string        // -line-mode: open, queueing, paced, closed or auto
	LineRate       int           // -line-rate: players released per -line-interval when paced
	LineInterval   time.Duration // -line-interval
	LineMax        int           // -line-max: the longest the line may be; past it SERVER_FULL
	LineGrace      time.Duration // -line-grace: how long a player who dropped keeps their place
	LinePush       time.Duration // -line-push: how often the walker looks at the waiting players: the fastest one is pushed a QueueStatus (see the push rule in the package doc)
	LineRetryAfter time.Duration // -line-retry-after: retry_after given to newcomers while closed

	// AdminToken (-admin-token, GATE_ADMIN_TOKEN) is the bearer token of the
	// admin API on the ops listener (/admin/line). Empty: the API is off and
	// answers 404.
	AdminToken string

	// Auto mode: the release rate follows the health of the tiers below,
	// between AutoMinRate and AutoMaxRate players per second.
	AutoMinRate         float64       // -auto-min-rate: per second
	AutoMaxRate         float64       // -auto-max-rate: per second
	AutoInterval        time.Duration // -auto-interval: how often the signals are read and the rate adjusted
	AutoUp              float64       // -auto-up: rate factor when healthy (> 1)
	AutoDown            float64       // -auto-down: rate factor when unhealthy (< 1)
	AutoMetricsURLs     []string      // -auto-metrics-urls: logic and battle /metrics URLs
	AutoMaxQueueDepth   int           // -auto-max-queue-depth: healthy below this sum of logic_queue_depth
	AutoBattleP99       time.Duration // -auto-battle-p99: healthy below this battle p99 (max over instances)
	AutoMaxBackpressure float64       // -auto-max-backpressure: healthy at or below this EWMA of logic's reply backpressure ratio

	// Clock is the time tokens are verified against and what drives the ping
	// ticker. Nil means the wall clock. Socket deadlines always use the wall
	// clock, as the operating system does.
	Clock clock.Clock
}

// DefaultConfig returns the defaults. LogicAddrs has none: it is required.
func DefaultConfig() Config {
	return Config{
		Addr:             ":8080",
		GRPCAddr:         ":8081",
		OpsAddr:          ":8082",
		Shards:           8,
		TokenMaxLifetime: 24 * time.Hour,
		JWTPlayerClaim:   jwtauth.DefaultPlayerClaim,
		JWTLeeway:        jwtauth.DefaultLeeway,
		PingInterval:     20 * time.Second,
		PongTimeout:      10 * time.Second,
		WriteTimeout:     5 * time.Second,
		RequestTimeout:   10 * time.Second,
		MaxInFlight:      32,
		MaxFrame:         wire.MaxFrame,
		Protection:       true,
		ConnCap:          true,
		MaxConns:         250_000,
		FullRetryAfter:   30 * time.Second,
		HandshakeCap:     true,
		MaxHandshakes:    1024,
		ConnRateLimit:    true,
		ConnRate:         20,
		ConnBurst:        40,
		InflightLimit:    true,
		LogicPushback:    true,
		ShutdownGrace:    10 * time.Second,

		AddrHandshakeRate:  defaultAddrHandshakeRate,
		AddrHandshakeBurst: defaultAddrHandshakeBurst,
		AddrMaxConns:       defaultAddrMaxConns,
		AddrLimitExempt:    append([]string(nil), defaultAddrLimitExempt...),
		PlayerRate:         defaultPlayerRate,
		PlayerBurst:        defaultPlayerBurst,

		LineMode:       "open",
		LineRate:       1000,
		LineInterval:   10 * time.Second,
		LineMax:        200_000,
		LineGrace:      60 * time.Second,
		LinePush:       lineapi.DefaultPush,
		LineRetryAfter: 60 * time.Second,

		AutoMinRate:         10,
		AutoMaxRate:         1000,
		AutoInterval:        5 * time.Second,
		AutoUp:              1.25,
		AutoDown:            0.5,
		AutoMaxQueueDepth:   500,
		AutoBattleP99:       500 * time.Millisecond,
		AutoMaxBackpressure: 0.5,

		Clock: clock.Real{},
	}
}

// Whether each protection mechanism is active: its own switch and
// Protection are both on.
func (c Config) connCapOn() bool       { return c.Protection && c.ConnCap }
func (c Config) handshakeCapOn() bool  { return c.Protection && c.HandshakeCap }
func (c Config) connRateLimitOn() bool { return c.Protection && c.ConnRateLimit }
func (c Config) inflightLimitOn() bool { return c.Protection && c.InflightLimit }
func (c Config) logicPushbackOn() bool { return c.Protection && c.LogicPushback }
func (c Config) addrLimitOn() bool {
	return c.Protection && (c.AddrHandshakeRate > 0 || c.AddrMaxConns > 0)
}
func (c Config) playerLimitOn() bool { return c.Protection && c.PlayerRate > 0 }

// Bounds on the protection knobs: a retry_after must fit the protocol's
// uint32 milliseconds with room for the jitter, and a bucket's arithmetic
// must not overflow.
const (
	maxFullRetryAfter = 24 * time.Hour
	maxConnRate       = 1e9
	maxConnBurst      = 1_000_000
	minMaxFrame       = 256
	maxMaxFrame       = 1 << 20
)

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
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return bad("-tls-cert and -tls-key: give both (wss with the gate's certificate) or neither (plain ws)")
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
	if err := c.validateAuth(); err != nil {
		return err
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
		{"token-max-lifetime", c.TokenMaxLifetime},
	} {
		if d.v <= 0 {
			return bad("-%s: must be > 0, got %s", d.flag, d.v)
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"ping-interval", c.PingInterval}, {"pong-timeout", c.PongTimeout}} {
		if d.v > maxKeepaliveFlag {
			return bad("-%s: must be at most %s, got %s", d.flag, maxKeepaliveFlag, d.v)
		}
	}
	if c.MaxFrame < minMaxFrame || c.MaxFrame > maxMaxFrame {
		return bad("-max-frame: must be in [%d, %d], got %d", minMaxFrame, maxMaxFrame, c.MaxFrame)
	}
	if c.MaxInFlight <= 0 {
		return bad("-max-inflight: must be > 0, got %d", c.MaxInFlight)
	}
	if c.Drain < 0 {
		return bad("-drain: must be >= 0, got %s", c.Drain)
	}
	// The protection knobs are checked even when their switch is off, so
	// turning a mechanism back on never reveals a bad value.
	if c.MaxConns <= 0 {
		return bad("-max-conns: must be > 0, got %d", c.MaxConns)
	}
	if c.FullRetryAfter <= 0 || c.FullRetryAfter > maxFullRetryAfter {
		return bad("-full-retry-after: must be in (0, %s], got %s", maxFullRetryAfter, c.FullRetryAfter)
	}
	if c.MaxHandshakes <= 0 {
		return bad("-max-handshakes: must be > 0, got %d", c.MaxHandshakes)
	}
	if math.IsNaN(c.ConnRate) || c.ConnRate <= 0 || c.ConnRate > maxConnRate {
		return bad("-conn-rate: must be in (0, %g], got %g (use -conn-rate-limit=false for no limit)", float64(maxConnRate), c.ConnRate)
	}
	if c.ConnBurst < 1 || c.ConnBurst > maxConnBurst {
		return bad("-conn-burst: must be in [1, %d], got %d", maxConnBurst, c.ConnBurst)
	}
	if err := c.validateLimits(bad); err != nil {
		return err
	}
	return c.validateLine(bad)
}

// validateLimits checks the per-address and per-player limits.
func (c Config) validateLimits(bad func(string, ...any) error) error {
	for _, r := range []struct {
		flag string
		v    float64
	}{{"addr-handshake-rate", c.AddrHandshakeRate}, {"player-rate", c.PlayerRate}} {
		if math.IsNaN(r.v) || r.v < 0 || r.v > maxConnRate {
			return bad("-%s: must be in [0, %g] (0: off), got %g", r.flag, float64(maxConnRate), r.v)
		}
	}
	for _, b := range []struct {
		flag string
		v    int
	}{{"addr-handshake-burst", c.AddrHandshakeBurst}, {"player-burst", c.PlayerBurst}} {
		if b.v < 1 || b.v > maxConnBurst {
			return bad("-%s: must be in [1, %d], got %d", b.flag, maxConnBurst, b.v)
		}
	}
	if c.AddrMaxConns < 0 {
		return bad("-addr-max-conns: must be >= 0 (0: off), got %d", c.AddrMaxConns)
	}
	if _, err := parsePrefixes("addr-limit-exempt", c.AddrLimitExempt); err != nil {
		return bad("%v", err)
	}
	if _, err := parsePrefixes("trusted-proxies", c.TrustedProxies); err != nil {
		return bad("%v", err)
	}
	return nil
}

// Bounds on the line's knobs the queue package does not bound itself.
const (
	minLinePush      = 100 * time.Millisecond
	maxLinePush      = time.Minute
	maxKeepaliveFlag = time.Hour // -ping-interval and -pong-timeout
	minAutoInterval  = 100 * time.Millisecond
	maxAutoInterval  = time.Hour
	maxAutoUp        = 10
)

// validateLine checks the admission line's and auto mode's fields.
func (c Config) validateLine(bad func(string, ...any) error) error {
	if _, _, err := parseLineMode(c.LineMode); err != nil {
		return bad("-line-mode: %v", err)
	}
	if c.LineRate < 1 {
		return bad("-line-rate: must be >= 1, got %d", c.LineRate)
	}
	if c.LineInterval < queue.MinInterval || c.LineInterval > queue.MaxInterval {
		return bad("-line-interval: must be in [%s, %s], got %s", queue.MinInterval, queue.MaxInterval, c.LineInterval)
	}
	if err := (queue.Rate{N: c.LineRate, Interval: c.LineInterval}).Validate(); err != nil {
		return bad("-line-rate: %v", err)
	}
	if c.LineMax < 1 || c.LineMax > queue.MaxMaxLength {
		return bad("-line-max: must be in [1, %d], got %d", queue.MaxMaxLength, c.LineMax)
	}
	if c.LineGrace <= 0 || c.LineGrace > queue.MaxGrace {
		return bad("-line-grace: must be in (0, %s], got %s", queue.MaxGrace, c.LineGrace)
	}
	if c.LinePush < minLinePush || c.LinePush > maxLinePush {
		return bad("-line-push: must be in [%s, %s], got %s", minLinePush, maxLinePush, c.LinePush)
	}
	if c.LineRetryAfter <= 0 || c.LineRetryAfter > queue.MaxRetryAfter {
		return bad("-line-retry-after: must be in (0, %s], got %s", queue.MaxRetryAfter, c.LineRetryAfter)
	}
	if strings.ContainsAny(c.AdminToken, " \t\r\n") {
		return bad("-admin-token: must not contain white space")
	}
	if !(c.AutoMinRate > 0) || c.AutoMinRate > queue.MaxPerSecond {
		return bad("-auto-min-rate: must be in (0, %d], got %g", queue.MaxPerSecond, c.AutoMinRate)
	}
	if !(c.AutoMaxRate >= c.AutoMinRate) || c.AutoMaxRate > queue.MaxPerSecond {
		return bad("-auto-max-rate: must be in [-auto-min-rate (%g), %d], got %g", c.AutoMinRate, queue.MaxPerSecond, c.AutoMaxRate)
	}
	if c.AutoInterval < minAutoInterval || c.AutoInterval > maxAutoInterval {
		return bad("-auto-interval: must be in [%s, %s], got %s", minAutoInterval, maxAutoInterval, c.AutoInterval)
	}
	if !(c.AutoUp > 1) || c.AutoUp > maxAutoUp {
		return bad("-auto-up: must be in (1, %d], got %g", maxAutoUp, c.AutoUp)
	}
	if !(c.AutoDown > 0) || c.AutoDown >= 1 {
		return bad("-auto-down: must be in (0, 1), got %g", c.AutoDown)
	}
	for i, u := range c.AutoMetricsURLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return bad("-auto-metrics-urls: entry %d (%q) is not an http(s) URL", i, u)
		}
	}
	if c.AutoMaxQueueDepth < 1 {
		return bad("-auto-max-queue-depth: must be >= 1, got %d", c.AutoMaxQueueDepth)
	}
	if c.AutoBattleP99 <= 0 {
		return bad("-auto-battle-p99: must be > 0, got %s", c.AutoBattleP99)
	}
	if !(c.AutoMaxBackpressure > 0) || c.AutoMaxBackpressure > 1 {
		return bad("-auto-max-backpressure: must be in (0, 1], got %g", c.AutoMaxBackpressure)
	}
	return nil
}
