package gate

import (
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

var (
	keyA = token.Key{ID: "a", Secret: []byte("gate-key-a-0123456789")}
	keyB = token.Key{ID: "b", Secret: []byte("gate-key-b-0123456789")}
)

// ringJSON is a ring file: cur is current, old retires at retire (zero:
// never), neither if nil.
func ringJSON(cur token.Key, old *token.Key, retire time.Time) string {
	s := `{"keys":[{"id":"` + cur.ID + `","secret":"` + string(cur.Secret) + `","current":true}`
	if old != nil {
		s += `,{"id":"` + old.ID + `","secret":"` + string(old.Secret) + `"`
		if !retire.IsZero() {
			s += `,"retire_at":"` + retire.UTC().Format(time.RFC3339) + `"`
		}
		s += `}`
	}
	return s + `]}`
}

// writeFileAtomic writes data to path by a rename, as an operator (or a
// Kubernetes Secret volume) replaces a file.
func writeFileAtomic(t testing.TB, path, data string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// ringGate starts a gate with -token-keys in a temporary file holding
// data; it returns the gate and the file's path.
func ringGate(t *testing.T, data string, mod func(*Config)) (*testGate, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.json")
	writeFileAtomic(t, path, data)
	g := startGate(t, func(c *Config) {
		c.TokenSecret, c.TokenKeys = "", path
		if mod != nil {
			mod(c)
		}
	}, startFakeLogic(t))
	return g, path
}

func signWith(t testing.TB, k token.Key, player string, exp time.Time) string {
	t.Helper()
	tok, err := k.Sign(player, exp)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// welcomed dials with tok and wants the welcome.
func (g *testGate) welcomed(t *testing.T, tok string) *client {
	t.Helper()
	c := dialRaw(t, g.wsURL(tok), wire.ProtoSubprotocol, nil)
	if f := c.recv(); f.GetWelcome() == nil {
		t.Fatalf("want a welcome, got %v", f)
	}
	return c
}

// unauthorized dials with tok and wants UNAUTHORIZED then 1008; it
// returns the error's message.
func (g *testGate) unauthorized(t *testing.T, tok string) string {
	t.Helper()
	return g.refused(t, g.wsURL(tok), leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED, websocket.ClosePolicyViolation).GetMessage()
}

func (g *testGate) tokenRefusals(reason string) float64 {
	return testutil.ToFloat64(g.m.auth.refusals[reason])
}

// A rotation through the -token-keys file: no restart, nobody logged out,
// the old key's tokens accepted until its retire_at and refused after it
// with their own reason.
func TestKeyRingRotation(t *testing.T) {
	g, path := ringGate(t, ringJSON(keyA, nil, time.Time{}), nil)
	exp := t0.Add(3 * time.Hour)
	early := g.welcomed(t, signWith(t, keyA, "alice", exp))
	if msg := g.unauthorized(t, signWith(t, keyB, "bob", exp)); !strings.Contains(msg, `unknown key: key id "b"`) {
		t.Fatalf("b before the rotation: %q", msg)
	}

	// Rotate: b current, a retiring in two hours.
	retire := t0.Add(2 * time.Hour)
	writeFileAtomic(t, path, ringJSON(keyB, &keyA, retire))
	g.clock.Advance(token.ReloadEvery)
	g.welcomed(t, signWith(t, keyB, "bob", exp))
	g.welcomed(t, signWith(t, keyA, "carol", exp))
	// The session opened before the rotation is untouched.
	early.send(profileFrame(1))
	if f := early.recv(); f.GetRequestId() != 1 || f.GetError() != nil {
		t.Fatalf("early session after the rotation: %v", f)
	}

	g.clock.Advance(retire.Sub(g.clock.Now()))
	if msg := g.unauthorized(t, signWith(t, keyA, "dave", exp)); !strings.Contains(msg, `key "a" retired at`) {
		t.Fatalf("a after its retire_at: %q", msg)
	}
	g.welcomed(t, signWith(t, keyB, "erin", exp))
	if got := g.tokenRefusals(tokenRetired); got != 1 {
		t.Fatalf("refusals{retired_key} = %v, want 1", got)
	}
	if got := g.tokenRefusals(tokenUnknownKey); got != 1 {
		t.Fatalf("refusals{unknown_key} = %v, want 1", got)
	}
	// v1 tokens: the ring has no "v1" key.
	g.unauthorized(t, g.tokenFor(t, "frank"))
	if got := g.tokenRefusals(tokenUnknownKey); got != 2 {
		t.Fatalf("refusals{unknown_key} after a v1 token = %v, want 2", got)
	}
}

// A -token-keys file that turns bad keeps the last good ring, and is
// counted and logged.
func TestKeyRingBadFileKeepsLastGood(t *testing.T) {
	var logs syncBuffer
	path := filepath.Join(t.TempDir(), "keys.json")
	writeFileAtomic(t, path, ringJSON(keyA, nil, time.Time{}))
	g := startGateLog(t, func(c *Config) { c.TokenSecret, c.TokenKeys = "", path },
		slog.New(slog.NewTextHandler(&logs, nil)), startFakeLogic(t))
	writeFileAtomic(t, path, `{"keys":[{"id":"b","secret":"short","current":true}]}`)
	g.clock.Advance(token.ReloadEvery)
	g.welcomed(t, signWith(t, keyA, "alice", t0.Add(time.Hour)))
	if got := testutil.ToFloat64(g.m.auth.keysErrors); got != 1 {
		t.Fatalf("gate_token_keys_errors_total = %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "keeping the last good ring") {
		t.Fatalf("logs: %s", logs.String())
	}
}

// A ticket is signed with the ring's current key and names it, so a place
// in the line survives a rotation; once its key retires it is refused as a
// bad ticket.
func TestTicketSurvivesRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	writeFileAtomic(t, path, ringJSON(keyA, nil, time.Time{}))
	g := lineGate(t, "queueing", 1, time.Second, func(c *Config) { c.TokenSecret, c.TokenKeys = "", path })
	exp := t0.Add(3 * time.Hour)
	join := func(player, ticket string) (*client, *leveev2.QueueStatus) {
		t.Helper()
		q := url.Values{"token": {signWith(t, keyB, player, exp)}}
		if ticket != "" {
			q.Set("ticket", ticket)
		}
		u := url.URL{Scheme: "ws", Host: g.Addr().String(), Path: "/ws", RawQuery: q.Encode()}
		c := dialRaw(t, u.String(), wire.ProtoSubprotocol, nil)
		return c, c.recvStatus()
	}
	// alice joins under a (with an a token), then bob.
	q := url.Values{"token": {signWith(t, keyA, "alice", exp)}}
	ca := dialRaw(t, (&url.URL{Scheme: "ws", Host: g.Addr().String(), Path: "/ws", RawQuery: q.Encode()}).String(), wire.ProtoSubprotocol, nil)
	st := ca.recvStatus()
	if !strings.HasPrefix(st.GetTicket(), "t3.a.") {
		t.Fatalf("ticket %q does not name key a", st.GetTicket())
	}
	retire := t0.Add(2 * time.Hour)
	writeFileAtomic(t, path, ringJSON(keyB, &keyA, retire))
	g.clock.Advance(token.ReloadEvery)
	_, bst := join("bob", "")
	if bst.GetPosition() != 2 || !strings.HasPrefix(bst.GetTicket(), "t3.b.") {
		t.Fatalf("bob after the rotation: %v", bst)
	}
	g.closeClient(t, ca, 1)
	// alice comes back with her a ticket and a b token: same place.
	ca2, st2 := join("alice", st.GetTicket())
	if st2.GetPosition() != 1 {
		t.Fatalf("alice back after the rotation: position %d, want 1", st2.GetPosition())
	}
	if _, err := verifyTicket(g.ring(), st2.GetTicket(), "alice", g.clock.Now()); err != nil || !strings.HasPrefix(st2.GetTicket(), "t3.b.") {
		t.Fatalf("alice's new ticket %q: %v", st2.GetTicket(), err)
	}
	// After a retires, the old ticket is refused and the line is unchanged.
	g.closeClient(t, ca2, 1)
	g.clock.Advance(retire.Sub(g.clock.Now()))
	if _, err := verifyTicket(g.ring(), st.GetTicket(), "alice", g.clock.Now()); !errors.Is(err, ErrTicketKey) || !errors.Is(err, token.ErrRetiredKey) {
		t.Fatalf("a ticket after a retired: %v, want ErrTicketKey wrapping ErrRetiredKey", err)
	}
}

func TestTokenKeysAndSecretRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LogicAddrs = []string{"127.0.0.1:1"}
	cfg.TokenSecret, cfg.TokenKeys = "s", "keys.json"
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "-token-keys and -token-secret") {
		t.Fatalf("Validate = %v", err)
	}
	cfg.TokenSecret = ""
	cfg.TokenKeys = filepath.Join(t.TempDir(), "none.json")
	cfg.Game = startGate(t, nil, startFakeLogic(t)).cfg.Game
	if _, err := New(cfg, nil); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "-token-keys") {
		t.Fatalf("New with a missing ring file = %v", err)
	}
}
