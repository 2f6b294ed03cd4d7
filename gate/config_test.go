package gate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateNamesTheFlag(t *testing.T) {
	ok := DefaultConfig()
	ok.LogicAddrs = []string{"127.0.0.1:9000"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for flag, mod := range map[string]func(*Config){
		"-logic-addrs":     func(c *Config) { c.LogicAddrs = nil },
		"-shards":          func(c *Config) { c.Shards = 0 },
		"-max-inflight":    func(c *Config) { c.MaxInFlight = -3 },
		"-ping-interval":   func(c *Config) { c.PingInterval = 0 },
		"-pong-timeout":    func(c *Config) { c.PongTimeout = -time.Second },
		"-write-timeout":   func(c *Config) { c.WriteTimeout = 0 },
		"-request-timeout": func(c *Config) { c.RequestTimeout = 0 },
		"-shutdown-grace":  func(c *Config) { c.ShutdownGrace = 0 },
		"-drain":           func(c *Config) { c.Drain = -time.Second },
		"-addr":            func(c *Config) { c.Addr = "" },
	} {
		c := ok
		mod(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), flag+":") {
			t.Errorf("%s: got %v", flag, err)
		}
	}
	c := ok
	c.LogicAddrs = []string{"a:1", "b:1", "c:1"}
	c.Shards = 2
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "-shards:") {
		t.Errorf("more instances than shards: %v", err)
	}
}

func TestNewWarnsAboutTheDevSecret(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.LogicAddrs = []string{"127.0.0.1:1"}
	var logs strings.Builder
	s, err := New(cfg, newTextLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	if string(s.secret) != DevTokenSecret || !strings.Contains(logs.String(), "development token secret") {
		t.Fatalf("secret %q, logs %q", s.secret, logs.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
