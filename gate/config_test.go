package gate

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/examples/arena"
)

func TestValidateNamesTheFlag(t *testing.T) {
	ok := DefaultConfig()
	ok.LogicAddrs = []string{"127.0.0.1:9000"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for flag, mod := range map[string]func(*Config){
		"-logic-addrs":      func(c *Config) { c.LogicAddrs = nil },
		"-shards":           func(c *Config) { c.Shards = 0 },
		"-max-inflight":     func(c *Config) { c.MaxInFlight = -3 },
		"-ping-interval":    func(c *Config) { c.PingInterval = 0 },
		"-pong-timeout":     func(c *Config) { c.PongTimeout = -time.Second },
		"-write-timeout":    func(c *Config) { c.WriteTimeout = 0 },
		"-request-timeout":  func(c *Config) { c.RequestTimeout = 0 },
		"-shutdown-grace":   func(c *Config) { c.ShutdownGrace = 0 },
		"-drain":            func(c *Config) { c.Drain = -time.Second },
		"-addr":             func(c *Config) { c.Addr = "" },
		"-max-conns":        func(c *Config) { c.MaxConns = 0 },
		"-full-retry-after": func(c *Config) { c.FullRetryAfter = 0 },
		"-max-handshakes":   func(c *Config) { c.MaxHandshakes = -1 },
		"-conn-rate":        func(c *Config) { c.ConnRate = 0 },
		"-conn-burst":       func(c *Config) { c.ConnBurst = 0 },

		"-line-mode":             func(c *Config) { c.LineMode = "sometimes" },
		"-line-rate":             func(c *Config) { c.LineRate = 0 },
		"-line-interval":         func(c *Config) { c.LineInterval = 0 },
		"-line-max":              func(c *Config) { c.LineMax = 0 },
		"-line-grace":            func(c *Config) { c.LineGrace = -time.Second },
		"-line-push":             func(c *Config) { c.LinePush = time.Millisecond },
		"-line-retry-after":      func(c *Config) { c.LineRetryAfter = 0 },
		"-admin-token":           func(c *Config) { c.AdminToken = "two words" },
		"-auto-min-rate":         func(c *Config) { c.AutoMinRate = 0 },
		"-auto-max-rate":         func(c *Config) { c.AutoMaxRate = 5 },
		"-auto-interval":         func(c *Config) { c.AutoInterval = 0 },
		"-auto-up":               func(c *Config) { c.AutoUp = 1 },
		"-auto-down":             func(c *Config) { c.AutoDown = 1 },
		"-auto-metrics-urls":     func(c *Config) { c.AutoMetricsURLs = []string{"logic:9090/metrics"} },
		"-auto-max-queue-depth":  func(c *Config) { c.AutoMaxQueueDepth = 0 },
		"-auto-battle-p99":       func(c *Config) { c.AutoBattleP99 = 0 },
		"-auto-max-backpressure": func(c *Config) { c.AutoMaxBackpressure = 1.5 },
	} {
		c := ok
		mod(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), flag+":") {
			t.Errorf("%s: got %v", flag, err)
		}
	}
	c := ok
	c.FullRetryAfter = 25 * time.Hour
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "-full-retry-after:") {
		t.Errorf("a day-long retry: %v", err)
	}
	c = ok
	c.ConnRate = math.NaN()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "-conn-rate:") {
		t.Errorf("NaN rate: %v", err)
	}
	// Off switches do not excuse bad values.
	c = ok
	c.Protection, c.MaxConns = false, 0
	if err := c.Validate(); err == nil {
		t.Error("-max-conns 0 with -protection=false was accepted")
	}
	c = ok
	c.LineRate, c.LineInterval = 10_000_000, time.Second // 10 M per second
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "-line-rate:") {
		t.Errorf("an absurd rate: %v", err)
	}
	c = ok
	c.LogicAddrs = []string{"a:1", "b:1", "c:1"}
	c.Shards = 2
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "-shards:") {
		t.Errorf("more instances than shards: %v", err)
	}
}

func TestDefaultsTurnProtectionOn(t *testing.T) {
	c := DefaultConfig()
	if !c.connCapOn() || !c.handshakeCapOn() || !c.connRateLimitOn() || !c.inflightLimitOn() {
		t.Fatalf("defaults: %+v", c)
	}
	if c.MaxConns != 250_000 || c.FullRetryAfter != 30*time.Second || c.MaxHandshakes != 1024 || c.ConnRate != 20 || c.ConnBurst != 40 {
		t.Fatalf("defaults: %+v", c)
	}
	if c.LineMode != "open" || c.LineRate != 1000 || c.LineInterval != 10*time.Second || c.LineMax != 200_000 ||
		c.LineGrace != time.Minute || c.LinePush != 2*time.Second || c.AdminToken != "" ||
		c.AutoInterval != 5*time.Second || c.AutoMaxQueueDepth != 500 || c.AutoBattleP99 != 500*time.Millisecond {
		t.Fatalf("line defaults: %+v", c)
	}
	c.Protection = false
	if c.connCapOn() || c.handshakeCapOn() || c.connRateLimitOn() || c.inflightLimitOn() {
		t.Fatal("-protection=false left a mechanism on")
	}
}

func TestNewWarnsAboutTheDevSecret(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.LogicAddrs = []string{"127.0.0.1:1"}
	cfg.Game = arena.Game()
	var logs strings.Builder
	s, err := New(cfg, newTextLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	if string(s.signingKey().Secret) != DevTokenSecret || !strings.Contains(logs.String(), "development token secret") {
		t.Fatalf("secret %q, logs %q", s.signingKey().Secret, logs.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// A keepalive flag past an hour is refused: ping interval + pong timeout
// must not overflow into a negative deadline that drops everyone.
func TestKeepaliveFlagsBounded(t *testing.T) {
	for flag, mod := range map[string]func(*Config){
		"-ping-interval": func(c *Config) { c.PingInterval = 2 * time.Hour },
		"-pong-timeout":  func(c *Config) { c.PongTimeout = time.Duration(1<<63 - 1) },
	} {
		c := DefaultConfig()
		c.LogicAddrs = []string{"127.0.0.1:9000"}
		mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s out of bounds: %v, want an error naming it", flag, err)
		}
	}
}
