package logiccmd

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/examples/arena/arenapb"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/cli"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/logic"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// run is Run for arena.
func run(args []string, getenv func(string) string, stderr io.Writer) int {
	return Run(arena.Game(), args, getenv, stderr)
}

// A declaration that cannot work is refused at start-up, exit 2, with its
// message naming the action; so is no game at all.
func TestRunRefusesBadGame(t *testing.T) {
	args := []string{"-data-dir", t.TempDir(), "-battle-addrs", "127.0.0.1:1"}
	g := arena.Game()
	game.Query(g, arena.ActionGetProfile, game.Default, func(*game.Ctx, *arenapb.Player, *arenapb.GetProfileRequest) (*arenapb.ProfileReply, error) {
		return nil, nil
	})
	var out bytes.Buffer
	if code := Run(g, args, env(nil), &out); code != 2 || !strings.Contains(out.String(), `action "get_profile" is declared twice`) {
		t.Errorf("duplicate action: exit %d, output %q", code, out.String())
	}
	out.Reset()
	if code := Run(nil, args, env(nil), &out); code != 2 || !strings.Contains(out.String(), "no game") {
		t.Errorf("no game: exit %d, output %q", code, out.String())
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	base := []string{"-data-dir", dir, "-battle-addrs", "127.0.0.1:1"}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad flag value", append([]string{"-queue-size", "lots"}, base...), nil, "-queue-size"},
		{"negative queue", append([]string{"-queue-size", "-5"}, base...), nil, "-queue-size: must be > 0, got -5"},
		{"bad env value", base, map[string]string{"LOGIC_SHUTDOWN_GRACE": "soon"}, "LOGIC_SHUTDOWN_GRACE"},
		{"no data dir", []string{"-battle-addrs", "127.0.0.1:1"}, nil, "-data-dir"},
		{"no battle addrs", []string{"-data-dir", dir}, nil, "-battle-addrs"},
		{"empty battle list", []string{"-data-dir", dir, "-battle-addrs", " , "}, nil, "-battle-addrs"},
		{"instance out of range", append([]string{"-instance", "2", "-instances", "2"}, base...), nil, "-instance"},
		{"bad log level", append([]string{"-log-level", "loud"}, base...), nil, "-log-level"},
		{"stray argument", append(base, "serve"), nil, "unexpected arguments"},
		{"fill above 1", append([]string{"-reject-fill", "1.5"}, base...), nil, "-reject-fill: must be in (0, 1], got 1.5"},
		{"sheddable above default", append([]string{"-reject-fill", "0.8", "-reject-fill-sheddable", "0.9"}, base...), nil, "-reject-fill-sheddable: must be <= -reject-fill"},
		{"bad protection env", base, map[string]string{"LOGIC_PROTECTION": "maybe"}, "LOGIC_PROTECTION"},
		{"zero retry budget", append([]string{"-battle-retry-budget", "0"}, base...), nil, "-battle-retry-budget"},
		{"negative queue wait", append([]string{"-queue-max-wait", "-1ms"}, base...), nil, "-queue-max-wait: must be >= 0"},
		{"bad pushback env", base, map[string]string{"LOGIC_BATTLE_PUSHBACK": "maybe"}, "LOGIC_BATTLE_PUSHBACK"},
		{"zero idempotency window", append([]string{"-idempotency-window", "0s"}, base...), nil, "-idempotency-window: must be in [1s, "},
		{"bad idempotency window env", base, map[string]string{"LOGIC_IDEMPOTENCY_WINDOW": "a day"}, "LOGIC_IDEMPOTENCY_WINDOW"},
		{"unknown store", append([]string{"-store", "sqlite"}, base...), nil, `-store: must be "bolt" or "postgres", got "sqlite"`},
		{"postgres without a url", []string{"-store", "postgres", "-battle-addrs", "127.0.0.1:1"}, nil, "-postgres-url: must be set with -store postgres"},
		{"postgres without conns", []string{"-store", "postgres", "-battle-addrs", "127.0.0.1:1", "-postgres-max-conns", "0"},
			map[string]string{"LOGIC_POSTGRES_URL": "postgres://127.0.0.1:1/x"}, "-postgres-max-conns: must be in 1..1000, got 0"},
		{"postgres with -instances", append([]string{"-store", "postgres", "-postgres-url", "postgres://127.0.0.1:1/x", "-battle-addrs", "127.0.0.1:1"}, "-instances", "3"), nil, "-instances: not used with -store postgres"},
		{"postgres with -instance", append([]string{"-store", "postgres", "-postgres-url", "postgres://127.0.0.1:1/x", "-battle-addrs", "127.0.0.1:1"}, "-instances", "1", "-instance", "2"), nil, "-instance: not used with -store postgres"},
		{"postgres with -instance-from-hostname", append([]string{"-store", "postgres", "-postgres-url", "postgres://127.0.0.1:1/x", "-battle-addrs", "127.0.0.1:1"}, "-instance-from-hostname"), nil, "-instance-from-hostname: not used with -store postgres"},
		{"lease ttl too short", append([]string{"-store", "postgres", "-postgres-url", "postgres://127.0.0.1:1/x", "-battle-addrs", "127.0.0.1:1"}, "-lease-ttl", "2s", "-lease-renew", "1s"), nil, "-lease-ttl: must be more than twice -lease-renew (1s), got 2s"},
		{"bad lease renew env", []string{"-store", "postgres", "-postgres-url", "postgres://127.0.0.1:1/x", "-battle-addrs", "127.0.0.1:1"}, map[string]string{"LOGIC_LEASE_RENEW": "often"}, "LOGIC_LEASE_RENEW"},
		{"advertise without host", append([]string{"-store", "postgres", "-postgres-url", "postgres://127.0.0.1:1/x", "-battle-addrs", "127.0.0.1:1"}, "-advertise-addr", ":9000"), nil, "-advertise-addr"},
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
	for _, v := range []string{"LOGIC_GRPC_ADDR", "LOGIC_OPS_ADDR", "LOGIC_DATA_DIR", "LOGIC_SHARDS", "LOGIC_INSTANCE", "LOGIC_INSTANCES",
		"LOGIC_QUEUE_SIZE", "LOGIC_BATTLE_ADDRS", "LOGIC_BATTLE_TIMEOUT", "LOGIC_MAX_BATCH", "LOGIC_MAX_BATTLES",
		"LOGIC_SHUTDOWN_GRACE", "LOGIC_DRAIN", "LOGIC_LOG_LEVEL", "LOGIC_REJECT_FILL", "LOGIC_REJECT_FILL_SHEDDABLE",
		"LOGIC_BATTLE_RETRY_BUDGET", "LOGIC_PROTECTION", "LOGIC_REJECT_EARLY", "LOGIC_DROP_EXPIRED", "LOGIC_BATTLE_RETRY",
		"LOGIC_QUEUE_MAX_WAIT", "LOGIC_BATTLE_PUSHBACK", "LOGIC_IDEMPOTENCY_WINDOW",
		"LOGIC_STORE", "LOGIC_POSTGRES_URL", "LOGIC_POSTGRES_MAX_CONNS", "PGPASSWORD",
		"LOGIC_ADVERTISE_ADDR", "LOGIC_NODE_ID", "LOGIC_LEASE_TTL", "LOGIC_LEASE_RENEW"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("usage does not name %s", v)
		}
	}
}

func TestHealthcheck(t *testing.T) {
	cfg := logic.DefaultConfig()
	cfg.Game = arena.Game()
	cfg.GRPCAddr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DataDir, cfg.BattleAddrs = t.TempDir(), []string{"127.0.0.1:1"}
	srv, err := logic.New(cfg, nil)
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
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for cli.Healthcheck(addr, grpcdial.Insecure(), tlsconf.RoleLogic, time.Second, &out) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("never SERVING: %s", out.String())
		}
		<-tick.C
	}
	if code := run([]string{"healthcheck", "-addr", addr}, env(nil), &out); code != 0 {
		t.Fatalf("healthcheck -addr: exit %d, %s", code, out.String())
	}
	_, port, _ := net.SplitHostPort(addr)
	if code := run([]string{"healthcheck"}, env(map[string]string{"LOGIC_GRPC_ADDR": ":" + port}), &out); code != 0 {
		t.Fatalf("healthcheck from LOGIC_GRPC_ADDR: exit %d, %s", code, out.String())
	}
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

// The Kubernetes flags: -instance-from-hostname does not combine with
// -instance, -battle-addrs takes one well-formed dns:/// entry, and the
// usage names their variables.
func TestKubernetesFlags(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"hostname and instance", []string{"-data-dir", dir, "-battle-addrs", "127.0.0.1:1", "-instances", "2", "-instance", "1", "-instance-from-hostname"},
			"-instance-from-hostname: cannot be combined with -instance 1"},
		{"dns with others", []string{"-data-dir", dir, "-battle-addrs", "dns:///battle:9100,127.0.0.1:1"}, "-battle-addrs: a dns:/// entry must be the only one"},
		{"dns authority", []string{"-data-dir", dir, "-battle-addrs", "dns://10.0.0.10/battle:9100"}, "no DNS server authority"},
		{"short resolve interval", []string{"-data-dir", dir, "-battle-addrs", "dns:///battle:9100", "-battle-resolve-interval", "10ms"}, "-battle-resolve-interval: must be >= 1s"},
	} {
		var out bytes.Buffer
		if code := run(c.args, env(nil), &out); code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: exit %d, output %q; want 2 and %q", c.name, code, out.String(), c.want)
		}
	}
	var out bytes.Buffer
	if code := run([]string{"-h"}, env(nil), &out); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, v := range []string{"LOGIC_INSTANCE_FROM_HOSTNAME", "LOGIC_BATTLE_RESOLVE_INTERVAL", "dns:///HOST:PORT"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("usage does not name %s", v)
		}
	}
}
