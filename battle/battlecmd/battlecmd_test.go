package battlecmd

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/leveehq/levee/battle"
	"github.com/leveehq/levee/examples/arena"
	arenapb "github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/game"
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
		{"bad switch", []string{"-protection=maybe"}, nil, "-protection"},
		{"bad switch from env", nil, map[string]string{"BATTLE_ADAPTIVE_SHED": "sometimes"}, "BATTLE_ADAPTIVE_SHED"},
		{"cpu interval", []string{"-cpu-interval", "0s"}, nil, "-cpu-interval: must be > 0"},
		{"throttle cpu", []string{"-throttle-cpu", "1.5"}, nil, "-throttle-cpu: must be in [0, 1], got 1.5"},
		{"throttle delay from env", nil, map[string]string{"BATTLE_THROTTLE_MAX_DELAY": "-1ms"}, "-throttle-max-delay: must be >= 0"},
		{"shed window", []string{"-shed-window", "0s"}, nil, "-shed-window: must be > 0"},
		{"shed buckets", []string{"-shed-buckets", "-1"}, nil, "-shed-buckets: must be > 0"},
		{"shed cpu from env", nil, map[string]string{"BATTLE_SHED_CPU": "-0.1"}, "-shed-cpu: must be in [0, 1]"},
		{"shed cooloff", []string{"-shed-cooloff", "-1s"}, nil, "-shed-cooloff: must be >= 0"},
		// The switches parse (into the Config that is then validated).
		{"switches off", []string{"-protection=false", "-throttle=false", "-adaptive-shed=false", "-in-flight-cap=false", "-max-in-flight", "0"}, nil, "-max-in-flight: must be > 0"},
	} {
		var out bytes.Buffer
		if code := run(arena.Game(), c.args, env(c.env), &out); code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: exit %d, output %q; want 2 and %q", c.name, code, out.String(), c.want)
		}
	}
}

// A declaration that cannot work is refused at start-up, exit 2, with a
// message naming the job; so is no game at all.
func TestRunRefusesABadGame(t *testing.T) {
	g := game.New("broken", arena.NewPlayer)
	game.Query(g, "peek", game.Default, func(*game.Ctx, *arenapb.Player, *arenapb.GetProfileRequest) (*arenapb.ProfileReply, error) {
		return nil, nil
	})
	game.Job(g, "crunch", (func(context.Context, *arenapb.SimulateRequest) (*arenapb.SimulateReply, error))(nil))
	for _, c := range []struct {
		name string
		g    *game.Game
		want string
	}{
		{"bad declaration", g, `job "crunch" has no Run`},
		{"no game", nil, "no game"},
	} {
		var out bytes.Buffer
		if code := run(c.g, []string{"-grpc-addr", "127.0.0.1:0", "-ops-addr", "127.0.0.1:0"}, env(nil), &out); code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: exit %d, output %q; want 2 and %q", c.name, code, out.String(), c.want)
		}
	}
}

func TestUsageNamesEnv(t *testing.T) {
	var out bytes.Buffer
	if code := run(arena.Game(), []string{"-h"}, env(nil), &out); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, v := range []string{"BATTLE_GRPC_ADDR", "BATTLE_OPS_ADDR", "BATTLE_SHUTDOWN_GRACE", "BATTLE_DRAIN", "BATTLE_MAX_IN_FLIGHT", "BATTLE_LOG_LEVEL",
		"BATTLE_PROTECTION", "BATTLE_THROTTLE", "BATTLE_ADAPTIVE_SHED", "BATTLE_IN_FLIGHT_CAP", "BATTLE_CPU_INTERVAL",
		"BATTLE_THROTTLE_CPU", "BATTLE_THROTTLE_MAX_DELAY", "BATTLE_SHED_WINDOW", "BATTLE_SHED_BUCKETS", "BATTLE_SHED_CPU", "BATTLE_SHED_COOLOFF"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("usage does not name %s", v)
		}
	}
}

func TestHealthcheck(t *testing.T) {
	cfg := battle.DefaultConfig()
	cfg.Game = arena.Game()
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
	if code := run(arena.Game(), []string{"healthcheck", "-addr", addr}, env(nil), &out); code != 0 {
		t.Fatalf("healthcheck -addr: exit %d, %s", code, out.String())
	}
	_, port, _ := net.SplitHostPort(addr)
	if code := run(arena.Game(), []string{"healthcheck"}, env(map[string]string{"BATTLE_GRPC_ADDR": ":" + port}), &out); code != 0 {
		t.Fatalf("healthcheck from BATTLE_GRPC_ADDR: exit %d, %s", code, out.String())
	}

	// Nothing listens on a closed listener's port.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	if code := run(arena.Game(), []string{"healthcheck", "-addr", dead, "-timeout", "2s"}, env(nil), &out); code != 1 {
		t.Fatalf("healthcheck of nothing: exit %d", code)
	}
}
