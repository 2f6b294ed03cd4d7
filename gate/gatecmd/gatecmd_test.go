package gatecmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/gate"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
	"github.com/leveehq/levee/internal/token"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestBadConfigExits2NamingTheFlag(t *testing.T) {
	var errOut bytes.Buffer
	if code := run(arena.Game(), []string{"-shards", "0", "-logic-addrs", "a:1"}, env(nil), &errOut); code != 2 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(errOut.String(), "-shards:") {
		t.Fatalf("stderr %q", errOut.String())
	}
	errOut.Reset()
	if code := run(arena.Game(), nil, env(nil), &errOut); code != 2 || !strings.Contains(errOut.String(), "-logic-addrs:") {
		t.Fatalf("missing -logic-addrs: exit %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(arena.Game(), nil, env(map[string]string{"GATE_MAX_INFLIGHT": "lots"}), &errOut); code != 2 || !strings.Contains(errOut.String(), "GATE_MAX_INFLIGHT") {
		t.Fatalf("bad env: exit %d, stderr %q", code, errOut.String())
	}
}

func TestProtectionFlags(t *testing.T) {
	var errOut bytes.Buffer
	for _, tc := range []struct {
		args []string
		env  map[string]string
		flag string
	}{
		{[]string{"-max-conns", "0"}, nil, "-max-conns:"},
		{[]string{"-conn-rate", "-1"}, nil, "-conn-rate:"},
		{[]string{"-conn-burst", "0"}, nil, "-conn-burst:"},
		{[]string{"-max-handshakes", "0"}, nil, "-max-handshakes:"},
		{nil, map[string]string{"GATE_FULL_RETRY_AFTER": "0s"}, "-full-retry-after:"},
		{nil, map[string]string{"GATE_PROTECTION": "maybe"}, "GATE_PROTECTION"},
		{nil, map[string]string{"GATE_LOGIC_PUSHBACK": "maybe"}, "GATE_LOGIC_PUSHBACK"},
	} {
		errOut.Reset()
		args := append([]string{"-logic-addrs", "a:1"}, tc.args...)
		if code := run(arena.Game(), args, env(tc.env), &errOut); code != 2 || !strings.Contains(errOut.String(), tc.flag) {
			t.Errorf("%v %v: exit %d, stderr %q", tc.args, tc.env, code, errOut.String())
		}
	}
	errOut.Reset()
	run(arena.Game(), []string{"-h"}, env(nil), &errOut)
	for _, f := range []string{"-protection", "-conn-cap", "-max-conns", "-full-retry-after", "-full-card-file",
		"-handshake-cap", "-max-handshakes", "-conn-rate-limit", "-conn-rate", "-conn-burst", "-inflight-limit", "-max-inflight", "-logic-pushback"} {
		if !strings.Contains(errOut.String(), f+" ") && !strings.Contains(errOut.String(), f+"\n") {
			t.Errorf("usage lacks %s", f)
		}
	}
}

func TestTokenSubcommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := mintToken([]string{"-player", "alice", "-ttl", "1h"}, env(map[string]string{"GATE_TOKEN_SECRET": "s3cret"}), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	id, err := token.Verify([]byte("s3cret"), strings.TrimSpace(out.String()), time.Now())
	if err != nil || id != "alice" {
		t.Fatalf("token %q: %v %v", out.String(), id, err)
	}
	out.Reset()
	if code := mintToken([]string{"-player", "bob"}, env(nil), &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "development token secret") {
		t.Fatalf("dev secret: exit %d, stderr %q", code, errOut.String())
	}
	if _, err := token.Verify([]byte(gate.DevTokenSecret), strings.TrimSpace(out.String()), time.Now()); err != nil {
		t.Fatal(err)
	}
	if code := mintToken([]string{"-player", "no spaces"}, env(nil), &out, &errOut); code != 2 {
		t.Fatalf("bad player id: exit %d", code)
	}
}

func TestHealthcheckFailsWithNothingListening(t *testing.T) {
	var errOut bytes.Buffer
	if code := run(arena.Game(), []string{"healthcheck", "-addr", "127.0.0.1:1", "-timeout", "200ms"}, env(nil), &errOut); code != 1 {
		t.Fatalf("exit %d", code)
	}
}

func TestLineFlags(t *testing.T) {
	var errOut bytes.Buffer
	for _, tc := range []struct {
		args []string
		env  map[string]string
		flag string
	}{
		{[]string{"-line-mode", "sometimes"}, nil, "-line-mode:"},
		{[]string{"-line-rate", "0"}, nil, "-line-rate:"},
		{[]string{"-line-interval", "0s"}, nil, "-line-interval:"},
		{[]string{"-line-max", "-1"}, nil, "-line-max:"},
		{[]string{"-line-grace", "0s"}, nil, "-line-grace:"},
		{[]string{"-line-push", "1ms"}, nil, "-line-push:"},
		{[]string{"-line-retry-after", "0s"}, nil, "-line-retry-after:"},
		{[]string{"-auto-min-rate", "0"}, nil, "-auto-min-rate:"},
		{[]string{"-auto-max-rate", "1"}, nil, "-auto-max-rate:"},
		{[]string{"-auto-interval", "0s"}, nil, "-auto-interval:"},
		{[]string{"-auto-up", "0.9"}, nil, "-auto-up:"},
		{[]string{"-auto-down", "2"}, nil, "-auto-down:"},
		{[]string{"-auto-metrics-urls", "logic:9090"}, nil, "-auto-metrics-urls:"},
		{[]string{"-auto-max-queue-depth", "0"}, nil, "-auto-max-queue-depth:"},
		{[]string{"-auto-battle-p99", "0s"}, nil, "-auto-battle-p99:"},
		{[]string{"-auto-max-backpressure", "0"}, nil, "-auto-max-backpressure:"},
		{nil, map[string]string{"GATE_LINE_MODE": "later"}, "-line-mode:"},
		{nil, map[string]string{"GATE_ADMIN_TOKEN": "has space"}, "-admin-token:"},
		{nil, map[string]string{"GATE_LINE_RATE": "many"}, "GATE_LINE_RATE"},
	} {
		errOut.Reset()
		args := append([]string{"-logic-addrs", "a:1"}, tc.args...)
		if code := run(arena.Game(), args, env(tc.env), &errOut); code != 2 || !strings.Contains(errOut.String(), tc.flag) {
			t.Errorf("%v %v: exit %d, stderr %q", tc.args, tc.env, code, errOut.String())
		}
	}
	errOut.Reset()
	run(arena.Game(), []string{"-h"}, env(nil), &errOut)
	for _, f := range []string{"-line-mode", "-line-rate", "-line-interval", "-line-max", "-line-grace", "-line-push",
		"-line-retry-after", "-admin-token", "-auto-min-rate", "-auto-max-rate", "-auto-interval", "-auto-up", "-auto-down",
		"-auto-metrics-urls", "-auto-max-queue-depth", "-auto-battle-p99", "-auto-max-backpressure"} {
		if !strings.Contains(errOut.String(), f+" ") && !strings.Contains(errOut.String(), f+"\n") {
			t.Errorf("usage lacks %s", f)
		}
	}
	if !strings.Contains(errOut.String(), "GATE_ADMIN_TOKEN") {
		t.Error("usage does not name GATE_ADMIN_TOKEN")
	}
}

// A declaration that cannot work stops the gate at start, exit 2, with a
// message naming the action.
func TestBadDeclarationExits2NamingTheAction(t *testing.T) {
	g := game.New("broken", func(id string) *wrapperspb.StringValue { return wrapperspb.String(id) })
	game.Query(g, "peek", 0, func(c *game.Ctx, s *wrapperspb.StringValue, r *emptypb.Empty) (*emptypb.Empty, error) {
		return r, nil
	})
	var errOut bytes.Buffer
	if code := run(g, []string{"-logic-addrs", "a:1"}, env(nil), &errOut); code != 2 || !strings.Contains(errOut.String(), `action "peek" has no class`) {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(nil, []string{"-logic-addrs", "a:1"}, env(nil), &errOut); code != 2 || !strings.Contains(errOut.String(), "no game") {
		t.Fatalf("no game: exit %d, stderr %q", code, errOut.String())
	}
}

func TestKeyFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, []byte(`{"keys":[{"id":"k2","secret":"0123456789abcdef","current":true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := mintToken([]string{"-player", "alice", "-token-keys", path}, env(nil), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	ring, _ := token.NewRing([]token.Key{{ID: "k2", Secret: []byte("0123456789abcdef"), Current: true}})
	tok := strings.TrimSpace(out.String())
	if id, err := ring.Verify(tok, time.Now(), 0); err != nil || id != "alice" || !strings.HasPrefix(tok, "v2.k2.") {
		t.Fatalf("token %q: %q, %v", tok, id, err)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-token-keys", path, "-token-secret", "s"}, nil, "-token-keys and -token-secret"},
		{nil, map[string]string{"GATE_TOKEN_KEYS": path, "GATE_TOKEN_SECRET": "s"}, "-token-keys and -token-secret"},
		{[]string{"-jwks", "jwks.json"}, nil, "-jwt-issuer"},
		{[]string{"-jwks", "jwks.json", "-jwt-issuer", "i", "-jwt-audience", "a", "-jwt-leeway", "1h"}, nil, "-jwt-leeway"},
	} {
		errOut.Reset()
		args := append([]string{"-logic-addrs", "a:1"}, tc.args...)
		if code := run(arena.Game(), args, env(tc.env), &errOut); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q", tc.args, tc.env, code, errOut.String())
		}
	}
	if code := mintToken([]string{"-player", "a", "-token-keys", filepath.Join(t.TempDir(), "none")}, env(nil), &out, &errOut); code != 2 {
		t.Fatalf("missing ring: exit %d", code)
	}
	errOut.Reset()
	run(arena.Game(), []string{"-h"}, env(nil), &errOut)
	for _, f := range []string{"-token-keys", "-jwks", "-jwt-issuer", "-jwt-audience", "-jwt-player-claim", "-jwt-leeway"} {
		if !strings.Contains(errOut.String(), f+" ") && !strings.Contains(errOut.String(), f+"\n") {
			t.Errorf("usage lacks %s", f)
		}
	}
}

func TestTLSFlags(t *testing.T) {
	ca := tlstest.NewCA(t)
	f := ca.Issue(t, "edge", tlstest.Localhost())
	other := ca.Issue(t, "other", tlstest.Localhost())
	var errOut bytes.Buffer
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-tls-cert", f.Cert}, nil, "-tls-key"},
		{nil, map[string]string{"GATE_TLS_KEY": f.Key}, "-tls-cert"},
		{[]string{"-tls-cert", f.Cert, "-tls-key", other.Key}, nil, "-tls-cert/-tls-key:"},
		{[]string{"-tls-cert", f.Cert + ".gone", "-tls-key", f.Key}, nil, ".gone"},
	} {
		errOut.Reset()
		args := append([]string{"-insecure", "-logic-addrs", "a:1"}, tc.args...)
		if code := run(arena.Game(), args, env(tc.env), &errOut); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want 2 naming %q", tc.args, tc.env, code, errOut.String(), tc.want)
		}
	}
}
