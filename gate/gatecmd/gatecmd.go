// Package gatecmd is the gate binary for a game: Levee's gate tier
// (players' WebSocket connections, authentication, the admission line, and
// routing to the logic shards) serving the game's declaration. A game's own
// gate binary is
//
//	func main() { os.Exit(gatecmd.Main(mygame.Game(), os.Args[1:])) }
//
// and takes
//
//	gate -logic-addrs logic-0:9000,logic-1:9000 [flags]
//	gate healthcheck [-addr 127.0.0.1:8081]
//	gate token -player alice [-ttl 24h] [-token-secret ... | -token-keys FILE]
//
// Every flag can also be set from the environment as GATE_<FLAG>, e.g.
// GATE_TOKEN_SECRET for -token-secret.
package gatecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/gate"
	"github.com/leveehq/levee/internal/cli"
	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/token"
)

const envPrefix = "GATE"

// Main runs the gate for g with the command line args (without the
// program's name) and returns the exit status: 2 for a bad flag or a
// declaration that cannot work (g.Validate's message), 1 when the gate
// fails.
func Main(g *game.Game, args []string) int {
	shallowStacks()
	return run(g, args, os.Getenv, os.Stderr)
}

// stackSetting turns off the runtime's adaptive initial goroutine stack.
// A gate's players wait in shallow reader goroutines, one each, but the
// runtime starts every new goroutine with the average stack size it saw at
// the last GC, which gRPC's deep goroutines push to 4 KiB: twice what a
// waiting player needs, about 30 MiB more per 15,000 waiting players
// (measured with make hold-memory). The setting is read only at start, so
// the gate re-executes itself with it once.
const stackSetting = "adaptivestackstart=0"

// shallowStacks re-executes the gate with GODEBUG=adaptivestackstart=0
// unless GODEBUG already says something about adaptivestackstart (so an
// operator can still choose). If the re-exec fails the gate runs as it is.
func shallowStacks() {
	cur := os.Getenv("GODEBUG")
	if strings.Contains(cur, "adaptivestackstart=") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	val := stackSetting
	if cur != "" {
		val = cur + "," + stackSetting
	}
	env := []string{"GODEBUG=" + val}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure
}

func run(g *game.Game, args []string, getenv func(string) string, stderr io.Writer) int {
	cfg := gate.DefaultConfig()
	cfg.Game = g
	return cli.Main(cli.Tier{
		Name:      "gate",
		Security:  &cfg.Security,
		EnvPrefix: envPrefix,
		GRPCAddr:  cfg.GRPCAddr,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "WebSocket (/ws) and HTTP (/) listen address")
			fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC health listen address")
			fs.StringVar(&cfg.OpsAddr, "ops-addr", cfg.OpsAddr, "ops listen address (/metrics /healthz /readyz)")
			fs.Var((*cli.List)(&cfg.LogicAddrs), "logic-addrs", "comma-separated logic gRPC addresses, in instance order (required); with logic on PostgreSQL (-store=postgres) only entry points (e.g. one Service): the gate follows logic's redirects to each shard's owner and caches them")
			fs.IntVar(&cfg.Shards, "shards", cfg.Shards, "number of logic shards; must match the logic tier")
			fs.StringVar(&cfg.TLSCert, "tls-cert", cfg.TLSCert, "PEM certificate (chain) of the gate's public name: with -tls-key, the player port serves wss:// and https:// and the ops port https:// (TLS 1.2+, session resumption on); re-read when the file changes, without a restart. Neither: plain ws://")
			fs.StringVar(&cfg.TLSKey, "tls-key", cfg.TLSKey, "PEM private key of -tls-cert")
			fs.StringVar(&cfg.TokenSecret, "token-secret", cfg.TokenSecret, "HMAC secret for player tokens and tickets, a one-key ring that signs and verifies v1 tokens (empty, without -token-keys: the public development secret)")
			fs.StringVar(&cfg.TokenKeys, "token-keys", cfg.TokenKeys, "key ring file (JSON, see docs/keys.md): the current key signs tickets, every key not past its retire_at verifies v2 tokens; read again within a second of a change; replaces -token-secret")
			fs.StringVar(&cfg.JWKS, "jwks", cfg.JWKS, "accept the studio's JWTs (EdDSA, ES256, RS256) verified against this JWKS: a file (read again on change) or an https URL (refreshed every 5m, and on an unknown kid at most every 30s; the last good set is kept while it is down); empty: Levee tokens only")
			fs.StringVar(&cfg.JWTIssuer, "jwt-issuer", cfg.JWTIssuer, "with -jwks: the iss every JWT must carry (required)")
			fs.StringVar(&cfg.JWTAudience, "jwt-audience", cfg.JWTAudience, "with -jwks: the aud every JWT must carry (required)")
			fs.StringVar(&cfg.JWTPlayerClaim, "jwt-player-claim", cfg.JWTPlayerClaim, "with -jwks: the claim holding the player id (1..64 characters of [A-Za-z0-9_-])")
			fs.DurationVar(&cfg.JWTLeeway, "jwt-leeway", cfg.JWTLeeway, "with -jwks: clock skew allowed on exp, nbf and iat (0..5m)")
			fs.DurationVar(&cfg.TokenMaxLifetime, "token-max-lifetime", cfg.TokenMaxLifetime, "refuse a player token (UNAUTHORIZED, close 1008) whose expiry lies further ahead than this")
			fs.DurationVar(&cfg.PingInterval, "ping-interval", cfg.PingInterval, "how often every connection is pinged")
			fs.DurationVar(&cfg.PongTimeout, "pong-timeout", cfg.PongTimeout, "how long past -ping-interval a player may stay silent after a ping before it is dropped")
			fs.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "deadline of each write to a player")
			fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "longest budget a request gets (the client's timeout_ms may shorten it)")
			fs.IntVar(&cfg.MaxFrame, "max-frame", cfg.MaxFrame, "largest frame read from a player, in bytes (a larger one closes the connection, 1009); an action's declared MaxRequestBytes caps its request further")
			fs.IntVar(&cfg.MaxInFlight, "max-inflight", cfg.MaxInFlight, "concurrent requests per connection; more are refused RATE_LIMITED (see -inflight-limit)")

			// Overload protection: a mechanism is active when -protection
			// and its own switch are both true; off means unlimited.
			fs.BoolVar(&cfg.Protection, "protection", cfg.Protection, "overload protection; false turns all of -conn-cap, -handshake-cap, -conn-rate-limit, -inflight-limit, -logic-pushback and the per-address and per-player limits off at once (unlimited connections, handshakes, request rate and in-flight requests; every request goes to logic)")
			fs.BoolVar(&cfg.ConnCap, "conn-cap", cfg.ConnCap, "refuse players past -max-conns with SERVER_FULL and close 1013; false: no connection limit")
			fs.IntVar(&cfg.MaxConns, "max-conns", cfg.MaxConns, "open player connections per gate")
			fs.DurationVar(&cfg.FullRetryAfter, "full-retry-after", cfg.FullRetryAfter, "retry_after of a SERVER_FULL refusal, jittered ±20 %")
			fs.StringVar(&cfg.FullCardFile, "full-card-file", cfg.FullCardFile, "optional \"while you wait\" card (UTF-8 text or JSON, at most 2 KiB), read once at start and appended to the SERVER_FULL message after a blank line")
			fs.BoolVar(&cfg.HandshakeCap, "handshake-cap", cfg.HandshakeCap, "answer HTTP 503 with Retry-After while -max-handshakes connections are starting; false: no limit")
			fs.IntVar(&cfg.MaxHandshakes, "max-handshakes", cfg.MaxHandshakes, "connections starting at once (upgrade request until welcome or refusal)")
			fs.BoolVar(&cfg.ConnRateLimit, "conn-rate-limit", cfg.ConnRateLimit, "per-connection token bucket; frames over it are answered RATE_LIMITED with the time until a token; false: no rate limit")
			fs.Float64Var(&cfg.ConnRate, "conn-rate", cfg.ConnRate, "requests per second per connection (token refill rate)")
			fs.IntVar(&cfg.ConnBurst, "conn-burst", cfg.ConnBurst, "token bucket size per connection")
			fs.BoolVar(&cfg.InflightLimit, "inflight-limit", cfg.InflightLimit, "refuse requests past -max-inflight on one connection with RATE_LIMITED; false: no limit")
			fs.BoolVar(&cfg.LogicPushback, "logic-pushback", cfg.LogicPushback, "honour logic's pushback: after logic refuses a shard's request with RESOURCE_EXHAUSTED and a pushback, answer that shard's requests of the same or a lower criticality BUSY at the gate until it has passed (at most 2 s; critical requests always go to logic); false: every request goes to logic")
			// Limits per source address and per player (docs/operations.md).
			fs.Float64Var(&cfg.AddrHandshakeRate, "addr-handshake-rate", cfg.AddrHandshakeRate, "handshakes per second per source /24 (IPv4) or /64 (IPv6), checked before the token; over it RATE_LIMITED with retry_after and close 1013; 0: off")
			fs.IntVar(&cfg.AddrHandshakeBurst, "addr-handshake-burst", cfg.AddrHandshakeBurst, "handshake bucket size per source /24 or /64")
			fs.IntVar(&cfg.AddrMaxConns, "addr-max-conns", cfg.AddrMaxConns, "open connections per source /24 or /64, checked before the token; over it SERVER_FULL with retry_after and close 1013; 0: off")
			fs.Var((*cli.List)(&cfg.AddrLimitExempt), "addr-limit-exempt", "comma-separated CIDRs not limited per address (default loopback and private ranges); none: limit every address")
			fs.Var((*cli.List)(&cfg.TrustedProxies), "trusted-proxies", "comma-separated CIDRs of load balancers whose X-Forwarded-For is honoured: the source address is the rightmost hop not in this list; empty: the TCP peer")
			fs.Float64Var(&cfg.PlayerRate, "player-rate", cfg.PlayerRate, "requests per second per player across all its connections on this gate; over it RATE_LIMITED with retry_after; 0: off")
			fs.IntVar(&cfg.PlayerBurst, "player-burst", cfg.PlayerBurst, "token bucket size per player")
			fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "how long in-flight requests may take at shutdown")
			fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "how long to report NOT_SERVING before refusing new connections at shutdown")

			// The admission line and its admin API.
			fs.StringVar(&cfg.LineMode, "line-mode", cfg.LineMode, "admission line mode: open (let players in at once while there is room), queueing (accept and hold everyone, forward nothing), paced (release -line-rate per -line-interval, smoothly), closed (maintenance: refuse newcomers with -line-retry-after), auto (paced at a rate that follows the tiers' health between -auto-min-rate and -auto-max-rate); change it live with POST /admin/line")
			fs.IntVar(&cfg.LineRate, "line-rate", cfg.LineRate, "players released per -line-interval when paced")
			fs.DurationVar(&cfg.LineInterval, "line-interval", cfg.LineInterval, "the interval of -line-rate")
			fs.IntVar(&cfg.LineMax, "line-max", cfg.LineMax, "the longest the line may be; newcomers past it get SERVER_FULL")
			fs.DurationVar(&cfg.LineGrace, "line-grace", cfg.LineGrace, "how long a player who dropped out of the line keeps their place (reconnect with ?ticket=)")
			fs.DurationVar(&cfg.LinePush, "line-push", cfg.LinePush, "how often the waiting players are looked at: each is sent a status when its place or ETA moved by 10 % or the mode or rate changed, else at a heartbeat of this near the front, up to 30 times this far back")
			fs.DurationVar(&cfg.LineRetryAfter, "line-retry-after", cfg.LineRetryAfter, "retry_after told to newcomers while the line is closed")
			fs.StringVar(&cfg.AdminToken, "admin-token", cfg.AdminToken, "bearer token of the admin API (/admin/line on -ops-addr); empty: the API is off (404). Prefer GATE_ADMIN_TOKEN to keep it out of ps")
			fs.Float64Var(&cfg.AutoMinRate, "auto-min-rate", cfg.AutoMinRate, "auto mode: the lowest release rate, players per second")
			fs.Float64Var(&cfg.AutoMaxRate, "auto-max-rate", cfg.AutoMaxRate, "auto mode: the highest release rate, players per second")
			fs.DurationVar(&cfg.AutoInterval, "auto-interval", cfg.AutoInterval, "auto mode: how often the tiers' health is read and the rate adjusted")
			fs.Float64Var(&cfg.AutoUp, "auto-up", cfg.AutoUp, "auto mode: rate factor per healthy interval (> 1)")
			fs.Float64Var(&cfg.AutoDown, "auto-down", cfg.AutoDown, "auto mode: rate factor per unhealthy interval (< 1)")
			fs.Var((*cli.List)(&cfg.AutoMetricsURLs), "auto-metrics-urls", "auto mode: comma-separated /metrics URLs of the logic and battle tiers (logic_queue_depth, battle_latency_seconds)")
			fs.IntVar(&cfg.AutoMaxQueueDepth, "auto-max-queue-depth", cfg.AutoMaxQueueDepth, "auto mode: unhealthy when the sum of logic_queue_depth reaches this")
			fs.DurationVar(&cfg.AutoBattleP99, "auto-battle-p99", cfg.AutoBattleP99, "auto mode: unhealthy when the battle p99 of the last interval (max over instances) reaches this")
			fs.Float64Var(&cfg.AutoMaxBackpressure, "auto-max-backpressure", cfg.AutoMaxBackpressure, "auto mode: unhealthy when the average backpressure ratio on logic's replies (EWMA) is above this")
		},
		Validate: func() error {
			if g == nil {
				return errors.New("no game to serve")
			}
			if err := g.Validate(); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			if cfg.TLSCert != "" {
				// A pair that does not load is a configuration error
				// (exit 2), not a failure of the running gate.
				if _, err := tlsconf.LoadKeyPair(cfg.TLSCert, cfg.TLSKey); err != nil {
					return fmt.Errorf("-tls-cert/-tls-key: %w", err)
				}
			}
			return nil
		},
		Run: func(ctx context.Context, logger *slog.Logger) error {
			s, err := gate.New(cfg, logger)
			if err != nil {
				return err
			}
			return s.Run(ctx)
		},
		Commands: map[string]func([]string) int{
			"token": func(args []string) int { return mintToken(args, getenv, os.Stdout, stderr) },
		},
	}, args, getenv, stderr)
}

// mintToken prints a signed player token, for curl, wscat and the README.
func mintToken(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gate token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	player := fs.String("player", "", "player id: 1..64 characters of [A-Za-z0-9_-] (required)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	secret := fs.String("token-secret", "", "HMAC secret; must match the gate's (empty, without -token-keys: the development secret); gives a v1 token")
	keys := fs.String("token-keys", "", "key ring file, as the gate's -token-keys: sign a v2 token with its current key")
	cli.UsageWithEnv(fs, envPrefix)
	if err := cli.Parse(fs, envPrefix, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *ttl <= 0 {
		fmt.Fprintf(stderr, "-ttl: must be > 0, got %s\n", *ttl)
		return 2
	}
	ring := token.NewSecretRing([]byte(*secret))
	switch {
	case *keys != "" && *secret != "":
		fmt.Fprintln(stderr, "-token-keys and -token-secret: give one")
		return 2
	case *keys != "":
		r, err := token.LoadFileRing(*keys, nil, nil)
		if err != nil {
			fmt.Fprintf(stderr, "-token-keys: %v\n", err)
			return 2
		}
		ring = r.Ring()
	case *secret == "":
		fmt.Fprintln(stderr, "warning: signing with the development token secret; set -token-secret or -token-keys in production")
		ring = token.NewSecretRing([]byte(gate.DevTokenSecret))
	}
	tok, err := ring.Sign(*player, time.Now().Add(*ttl))
	if err != nil {
		fmt.Fprintf(stderr, "-player: %q: %v\n", *player, err)
		return 2
	}
	fmt.Fprintln(stdout, tok)
	return 0
}
