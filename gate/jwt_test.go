package gate

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/token"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

const (
	studioIssuer   = "https://auth.studio.example"
	studioAudience = "arena-gate"
)

// studioGate is a gate that accepts the studio's JWTs from a JWKS file
// holding an RSA and an Ed25519 key (kids "rsa", "ed"), next to its own
// tokens.
func studioGate(t *testing.T) (*testGate, *fakeLogic, *rsa.PrivateKey, ed25519.PrivateKey) {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: rk.Public(), KeyID: "rsa", Use: "sig"}, {Key: ed.Public(), KeyID: "ed"}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, set, 0o600); err != nil {
		t.Fatal(err)
	}
	logic := startFakeLogic(t)
	g := startGate(t, func(c *Config) { c.JWKS, c.JWTIssuer, c.JWTAudience = path, studioIssuer, studioAudience }, logic)
	return g, logic, rk, ed
}

func studioClaims(player string) jwt.MapClaims {
	return jwt.MapClaims{"iss": studioIssuer, "aud": studioAudience, "sub": player, "exp": t0.Add(time.Hour).Unix()}
}

func studioJWT(t *testing.T, m jwt.SigningMethod, kid string, key any, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The gate accepts a studio JWT as it accepts its own token: the player
// is the sub claim.
func TestGateAcceptsStudioJWT(t *testing.T) {
	g, _, rk, ed := studioGate(t)
	for _, tok := range []string{
		studioJWT(t, jwt.SigningMethodRS256, "rsa", rk, studioClaims("alice")),
		studioJWT(t, jwt.SigningMethodEdDSA, "ed", ed, studioClaims("bob")),
	} {
		c := dialRaw(t, g.wsURL(tok), "", nil)
		f := c.recv()
		if w := f.GetWelcome(); w == nil || (w.GetPlayerId() != "alice" && w.GetPlayerId() != "bob") {
			t.Fatalf("want a welcome for the JWT's sub, got %v", f)
		}
	}
	g.welcomed(t, g.tokenFor(t, "carol")) // Levee tokens still work
}

// The attacks on the token path: each is refused UNAUTHORIZED with a 1008
// close, counted under its reason, and reaches nothing behind the gate.
func TestTokenAttacksAreRefused(t *testing.T) {
	g, logic, rk, ed := studioGate(t)
	der, err := x509.MarshalPKIXPublicKey(rk.Public())
	if err != nil {
		t.Fatal(err)
	}
	other := studioClaims("mallory")
	other["aud"] = "another-game"
	evil := studioClaims("mallory")
	evil["iss"] = "https://evil.example"
	expired := studioClaims("mallory")
	expired["exp"] = t0.Add(-time.Minute).Unix()
	badID := studioClaims("mallory!")
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)
	forgedLevee, _ := token.Sign([]byte("not-the-secret"), "mallory", t0.Add(time.Hour))
	for _, c := range []struct {
		name, tok, reason, msg string
	}{
		{"alg none", studioJWT(t, jwt.SigningMethodNone, "rsa", jwt.UnsafeAllowNoneSignatureType, studioClaims("mallory")), tokenAlg, "algorithm not accepted"},
		{"HMAC JWT checked against the RSA key", studioJWT(t, jwt.SigningMethodHS256, "rsa", der, studioClaims("mallory")), tokenAlg, `"HS256"`},
		{"JWT for another audience", studioJWT(t, jwt.SigningMethodRS256, "rsa", rk, other), tokenBadAudience, "wrong audience"},
		{"JWT of another issuer", studioJWT(t, jwt.SigningMethodRS256, "rsa", rk, evil), tokenBadIssuer, "wrong issuer"},
		{"expired JWT", studioJWT(t, jwt.SigningMethodEdDSA, "ed", ed, expired), tokenExpired, "expired"},
		{"JWT signed by another key", studioJWT(t, jwt.SigningMethodEdDSA, "ed", otherEd, studioClaims("mallory")), tokenBadSig, "bad signature"},
		{"JWT of an unknown kid", studioJWT(t, jwt.SigningMethodEdDSA, "gone", ed, studioClaims("mallory")), tokenUnknownKey, "unknown key"},
		{"JWT with a bad player id", studioJWT(t, jwt.SigningMethodEdDSA, "ed", ed, badID), tokenPlayerID, "player id"},
		{"EdDSA token under the RSA kid", studioJWT(t, jwt.SigningMethodEdDSA, "rsa", ed, studioClaims("mallory")), tokenAlg, "RS256 key"},
		{"forged Levee token", forgedLevee, tokenBadSig, "bad signature"},
		{"garbage", "v9.nothing", tokenMalformed, "malformed"},
	} {
		before := g.tokenRefusals(c.reason)
		if msg := g.unauthorized(t, c.tok); !strings.Contains(msg, c.msg) {
			t.Errorf("%s: message %q lacks %q", c.name, msg, c.msg)
		}
		if got := g.tokenRefusals(c.reason); got != before+1 {
			t.Errorf("%s: gate_token_refusals_total{%s} went %v -> %v", c.name, c.reason, before, got)
		}
	}
	if n := len(logic.requests()); n != 0 {
		t.Fatalf("logic saw %d requests from refused players", n)
	}
	if got := testutil.ToFloat64(g.m.connections.WithLabelValues(resultUnauthorized)); got != 11 {
		t.Fatalf("gate_connections_total{unauthorized} = %v, want 11", got)
	}
	if got := testutil.ToFloat64(g.m.active); got != 0 {
		t.Fatalf("gate_active_connections = %v after the refusals", got)
	}
}

// Without -jwks a JWT is refused with its own reason.
func TestJWTWithoutJWKS(t *testing.T) {
	g := startGate(t, nil, startFakeLogic(t))
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	msg := g.refused(t, g.wsURL(studioJWT(t, jwt.SigningMethodEdDSA, "ed", ed, studioClaims("alice"))),
		leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED, 1008).GetMessage()
	if !strings.Contains(msg, "does not accept JWTs") || g.tokenRefusals(tokenNoJWT) != 1 {
		t.Fatalf("message %q, refusals{jwt_disabled} %v", msg, g.tokenRefusals(tokenNoJWT))
	}
}

func TestJWTConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LogicAddrs = []string{"127.0.0.1:1"}
	cfg.JWKS = "jwks.json"
	for name, mod := range map[string]func(*Config){
		"no issuer":     func(c *Config) { c.JWTAudience = "a" },
		"no audience":   func(c *Config) { c.JWTIssuer = "i" },
		"no claim":      func(c *Config) { c.JWTIssuer, c.JWTAudience, c.JWTPlayerClaim = "i", "a", "" },
		"leeway":        func(c *Config) { c.JWTIssuer, c.JWTAudience, c.JWTLeeway = "i", "a", time.Hour },
		"negative leew": func(c *Config) { c.JWTIssuer, c.JWTAudience, c.JWTLeeway = "i", "a", -time.Second },
	} {
		c := cfg
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate passed", name)
		}
	}
}

// A JWKS at a URL: fetched at start, refetched for a new kid, and its
// fetcher stops with the gate (goleak checks the package leaves none).
func TestGateJWKSFromURL(t *testing.T) {
	_, ed1, _ := ed25519.GenerateKey(rand.Reader)
	_, ed2, _ := ed25519.GenerateKey(rand.Reader)
	set := func(keys ...jose.JSONWebKey) []byte {
		b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var body atomic.Value
	body.Store(set(jose.JSONWebKey{Key: ed1.Public(), KeyID: "k1"}))
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		_, _ = w.Write(body.Load().([]byte))
	}))
	defer srv.Close()
	g := startGate(t, func(c *Config) {
		c.JWKS, c.JWTIssuer, c.JWTAudience = srv.URL+"/jwks.json", studioIssuer, studioAudience
	},
		startFakeLogic(t))
	g.welcomed(t, studioJWT(t, jwt.SigningMethodEdDSA, "k1", ed1, studioClaims("alice")))
	// The studio publishes k2: its first token makes the gate fetch again
	// (30 s after the last fetch at most).
	body.Store(set(jose.JSONWebKey{Key: ed1.Public(), KeyID: "k1"}, jose.JSONWebKey{Key: ed2.Public(), KeyID: "k2"}))
	g.clock.Advance(30 * time.Second)
	g.welcomed(t, studioJWT(t, jwt.SigningMethodEdDSA, "k2", ed2, studioClaims("bob")))
	if n := gets.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2 (start, new kid)", n)
	}
	g.stop(t) // the fetcher ends with Run
}
