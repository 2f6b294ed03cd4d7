package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"levee/battle"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestRunRejectsBadConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad flag value", []string{"-max-in-flight", "lots"}, nil, "-max-in-flight"},
		{"bad env value", nil, map[string]string{"BATTLE_SHUTDOWN_GRACE": "soon"}, "BATTLE_SHUTDOWN_GRACE"},
		{"invalid config", []string{"-max-in-flight", "0"}, nil, "-max-in-flight: must be > 0"},
		{"bad log level", []string{"-log-level", "loud"}, nil, "-log-level"},
		{"stray argument", []string{"serve"}, nil, "unexpected arguments"},
	} {
		var out bytes.Buffer
		if code := run(c.args, env(c.env), &out); code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: exit %d, output %q; want 2 and %q", c.name, code, out.String(), c.want)
		}
	}
}

func TestUsageNamesEnv(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"-h"}, env(nil), &out); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, v := range []string{"BATTLE_GRPC_ADDR", "BATTLE_OPS_ADDR", "BATTLE_SHUTDOWN_GRACE", "BATTLE_DRAIN", "BATTLE_MAX_IN_FLIGHT", "BATTLE_LOG_LEVEL"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("usage does not name %s", v)
		}
	}
}

func TestHealthcheck(t *testing.T) {
	cfg := battle.DefaultConfig()
	cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	srv, err := battle.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	addr := srv.GRPCAddr().String()

	var out bytes.Buffer
	if code := run([]string{"healthcheck", "-addr", addr}, env(nil), &out); code != 0 {
		t.Fatalf("healthcheck -addr: exit %d, %s", code, out.String())
	}
	_, port, _ := net.SplitHostPort(addr)
	if code := run([]string{"healthcheck"}, env(map[string]string{"BATTLE_GRPC_ADDR": ":" + port}), &out); code != 0 {
		t.Fatalf("healthcheck from BATTLE_GRPC_ADDR: exit %d, %s", code, out.String())
	}

	// Nothing listens on a closed listener's port.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	if code := run([]string{"healthcheck", "-addr", dead, "-timeout", "2s"}, env(nil), &out); code != 1 {
		t.Fatalf("healthcheck of nothing: exit %d", code)
	}
}
