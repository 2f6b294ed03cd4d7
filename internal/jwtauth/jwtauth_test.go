package jwtauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

const (
	issuer   = "https://auth.studio.example"
	audience = "levee-gate"
)

// testKeys are one key of each accepted kind, made once.
type testKeys struct {
	ed  ed25519.PrivateKey
	ec  *ecdsa.PrivateKey
	rsa *rsa.PrivateKey
}

var (
	keysOnce sync.Once
	keys     testKeys
)

func getKeys(t testing.TB) testKeys {
	t.Helper()
	keysOnce.Do(func() {
		_, ed, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		rk, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		keys = testKeys{ed: ed, ec: ec, rsa: rk}
	})
	return keys
}

// jwks is the public JWKS of the keys, under kids "ed", "ec", "rsa" (or
// the kids given, in that order).
func (k testKeys) jwks(t testing.TB, kids ...string) []byte {
	t.Helper()
	if len(kids) == 0 {
		kids = []string{"ed", "ec", "rsa"}
	}
	pubs := []any{k.ed.Public(), k.ec.Public(), k.rsa.Public()}
	var set jose.JSONWebKeySet
	for i, kid := range kids {
		if kid != "" {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: pubs[i], KeyID: kid, Use: "sig"})
		}
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func claims(player string) jwt.MapClaims {
	return jwt.MapClaims{"iss": issuer, "aud": audience, "sub": player, "exp": t0.Add(time.Hour).Unix(), "iat": t0.Unix()}
}

func sign(t testing.TB, m jwt.SigningMethod, kid string, key any, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fileVerifier is a Verifier of a JWKS file holding data, on a fake clock.
func fileVerifier(t testing.TB, data []byte, mod func(*Config)) (*Verifier, *clock.Fake, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fc := clock.NewFake(t0)
	cfg := Config{JWKS: path, Issuer: issuer, Audience: audience, Clock: fc}
	if mod != nil {
		mod(&cfg)
	}
	v, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v, fc, path
}

func TestVerifyAcceptsEachAlgorithm(t *testing.T) {
	k := getKeys(t)
	v, _, _ := fileVerifier(t, k.jwks(t), nil)
	for _, c := range []struct {
		m   jwt.SigningMethod
		kid string
		key any
	}{{jwt.SigningMethodEdDSA, "ed", k.ed}, {jwt.SigningMethodES256, "ec", k.ec}, {jwt.SigningMethodRS256, "rsa", k.rsa}} {
		id, err := v.Verify(sign(t, c.m, c.kid, c.key, claims("alice")))
		if err != nil || id != "alice" {
			t.Errorf("%s: %q, %v", c.m.Alg(), id, err)
		}
	}
	// The player id from another claim; aud as a list.
	v2, _, _ := fileVerifier(t, k.jwks(t), func(c *Config) { c.PlayerClaim = "player_id" })
	c := claims("not-this")
	c["player_id"] = "bob"
	c["aud"] = []string{"other", audience}
	if id, err := v2.Verify(sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, c)); err != nil || id != "bob" {
		t.Errorf("player_id claim: %q, %v", id, err)
	}
}

// The attacks and mistakes each get their own error, and verify nothing.
func TestVerifyRefuses(t *testing.T) {
	k := getKeys(t)
	v, _, _ := fileVerifier(t, k.jwks(t), nil)
	with := func(f func(jwt.MapClaims)) jwt.MapClaims {
		c := claims("alice")
		f(c)
		return c
	}
	good := sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, claims("alice"))
	p := strings.Split(good, ".")
	otherPayload := strings.Split(sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, claims("mallory")), ".")[1]
	none := sign(t, jwt.SigningMethodNone, "ed", jwt.UnsafeAllowNoneSignatureType, claims("alice"))
	// Algorithm confusion: HS256 "signed" with the RSA public key, in the
	// forms a verifier might use as an HMAC secret.
	der, _ := x509.MarshalPKIXPublicKey(k.rsa.Public())
	hsDER := sign(t, jwt.SigningMethodHS256, "rsa", der, claims("alice"))
	jwkJSON, _ := json.Marshal(jose.JSONWebKey{Key: k.rsa.Public(), KeyID: "rsa"})
	hsJWK := sign(t, jwt.SigningMethodHS256, "rsa", jwkJSON, claims("alice"))
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)
	cases := []struct {
		name string
		tok  string
		want error
	}{
		{"alg none", none, ErrAlg},
		{"alg none, no signature", p[0][:0] + strings.Split(none, ".")[0] + "." + p[1] + ".", ErrAlg},
		{"HS256 with the RSA key (DER)", hsDER, ErrAlg},
		{"HS256 with the RSA key (JWK)", hsJWK, ErrAlg},
		{"HS384", sign(t, jwt.SigningMethodHS384, "rsa", []byte("x"), claims("alice")), ErrAlg},
		{"ES384", sign(t, jwt.SigningMethodPS256, "rsa", k.rsa, claims("alice")), ErrAlg},
		{"ES256 under the RSA kid", sign(t, jwt.SigningMethodES256, "rsa", k.ec, claims("alice")), ErrAlg},
		{"RS256 under the EdDSA kid", sign(t, jwt.SigningMethodRS256, "ed", k.rsa, claims("alice")), ErrAlg},
		{"unknown kid", sign(t, jwt.SigningMethodEdDSA, "nope", k.ed, claims("alice")), ErrUnknownKey},
		{"no kid, several keys", sign(t, jwt.SigningMethodEdDSA, "", k.ed, claims("alice")), ErrUnknownKey},
		{"another key, same kid", sign(t, jwt.SigningMethodEdDSA, "ed", otherEd, claims("alice")), ErrSignature},
		{"payload swapped", p[0] + "." + otherPayload + "." + p[2], ErrSignature},
		{"another audience", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, with(func(c jwt.MapClaims) { c["aud"] = "another-game" })), ErrAudience},
		{"no audience", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, with(func(c jwt.MapClaims) { delete(c, "aud") })), ErrAudience},
		{"another issuer", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })), ErrIssuer},
		{"no issuer", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, with(func(c jwt.MapClaims) { delete(c, "iss") })), ErrIssuer},
		{"expired past the leeway", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, with(func(c jwt.MapClaims) { c["exp"] = t0.Add(-31 * time.Second).Unix() })), ErrExpired},
		{"nbf past the leeway", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, with(func(c jwt.MapClaims) { c["nbf"] = t0.Add(31 * time.Second).Unix() })), ErrNotYetValid},
		{"iat in the future", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, with(func(c jwt.MapClaims) { c["iat"] = t0.Add(time.Hour).Unix() })), ErrNotYetValid},
		{"no exp", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, with(func(c jwt.MapClaims) { delete(c, "exp") })), ErrMalformed},
		{"bad player id", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, claims("bad id!")), ErrPlayerID},
		{"no sub", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, with(func(c jwt.MapClaims) { delete(c, "sub") })), ErrPlayerID},
		{"garbage", "eyJ.x.y", ErrMalformed},
		{"empty", "", ErrMalformed},
		{"huge", "eyJ" + strings.Repeat("a", MaxLen), ErrMalformed},
	}
	for _, c := range cases {
		id, err := v.Verify(c.tok)
		if !errors.Is(err, c.want) || id != "" {
			t.Errorf("%s: %q, %v; want %v", c.name, id, err, c.want)
		}
	}
	// Within the leeway: accepted.
	for name, f := range map[string]func(jwt.MapClaims){
		"expired 29 s ago": func(c jwt.MapClaims) { c["exp"] = t0.Add(-29 * time.Second).Unix() },
		"nbf in 29 s":      func(c jwt.MapClaims) { c["nbf"] = t0.Add(29 * time.Second).Unix() },
	} {
		if _, err := v.Verify(sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, with(f))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no jwks":            {Issuer: issuer, Audience: audience},
		"no issuer":          {JWKS: "x.json", Audience: audience},
		"no audience":        {JWKS: "x.json", Issuer: issuer},
		"http to a far host": {JWKS: "http://auth.example/jwks.json", Issuer: issuer, Audience: audience},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if _, err := New(Config{JWKS: filepath.Join(t.TempDir(), "none.json"), Issuer: issuer, Audience: audience}); !errors.Is(err, ErrJWKS) {
		t.Errorf("missing file: %v, want ErrJWKS", err)
	}
}

func TestParseJWKS(t *testing.T) {
	k := getKeys(t)
	set, err := ParseJWKS(k.jwks(t))
	if err != nil || set.Len() != 3 {
		t.Fatalf("ParseJWKS = %v, %v", set, err)
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	mixed, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: k.ed.Public(), KeyID: "ed"},
		{Key: small.Public(), KeyID: "small"},
		{Key: p384.Public(), KeyID: "p384"},
		{Key: k.ec.Public(), KeyID: "enc", Use: "enc"},
		{Key: k.ec.Public(), KeyID: "wrongalg", Algorithm: "RS256"},
	}})
	set, err = ParseJWKS(mixed)
	if err != nil || set.Len() != 1 || set.Skipped != 4 {
		t.Fatalf("mixed: %v, %v", set, err)
	}
	private, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.ed, KeyID: "ed"}}})
	oct, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: []byte("0123456789abcdef"), KeyID: "h"}}})
	dup, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.ed.Public(), KeyID: "a"}, {Key: k.ec.Public(), KeyID: "a"}}})
	for name, data := range map[string][]byte{
		"private key": private, "symmetric key": oct, "duplicate kid": dup,
		"not json": []byte("{"), "no keys": []byte(`{"keys":[]}`), "only skipped": []byte(`{"keys":[{"kty":"XYZ"}]}`),
		"no kid next to others": k.jwks(t, "", "ec", "rsa")[:0], // replaced below
	} {
		if name == "no kid next to others" {
			b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.ed.Public()}, {Key: k.ec.Public(), KeyID: "ec"}}})
			data = b
		}
		if _, err := ParseJWKS(data); !errors.Is(err, ErrJWKS) {
			t.Errorf("%s: %v, want ErrJWKS", name, err)
		}
	}
}

func TestNoKidWithOneKey(t *testing.T) {
	k := getKeys(t)
	v, _, _ := fileVerifier(t, k.jwks(t, "only"), nil)
	if id, err := v.Verify(sign(t, jwt.SigningMethodEdDSA, "", k.ed, claims("alice"))); err != nil || id != "alice" {
		t.Fatalf("no kid, one key: %q, %v", id, err)
	}
}

func TestFileReloads(t *testing.T) {
	k := getKeys(t)
	var errs atomic.Int32
	v, fc, path := fileVerifier(t, k.jwks(t, "ed1"), func(c *Config) { c.OnError = func(error) { errs.Add(1) } })
	tok := sign(t, jwt.SigningMethodEdDSA, "ed2", k.ed, claims("alice"))
	if _, err := v.Verify(tok); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("ed2 before: %v", err)
	}
	write := func(data []byte) {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(k.jwks(t, "ed2"))
	fc.Advance(time.Second)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("ed2 after the file changed: %v", err)
	}
	write([]byte("{oops"))
	fc.Advance(time.Second)
	if _, err := v.Verify(tok); err != nil || errs.Load() != 1 {
		t.Fatalf("bad file: %v, %d errors; want the last good set and one error", err, errs.Load())
	}
}

// jwksServer serves the JWKS in *body (or fails while down), counting GETs.
type jwksServer struct {
	*httptest.Server
	mu   sync.Mutex
	body []byte
	down bool
	gets atomic.Int32
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	s := &jwksServer{body: body}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.gets.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(body []byte, down bool) {
	s.mu.Lock()
	s.body, s.down = body, down
	s.mu.Unlock()
}

func TestURLFetchRefetchAndOutage(t *testing.T) {
	k := getKeys(t)
	srv := newJWKSServer(t, k.jwks(t, "ed1"))
	fc := clock.NewFake(t0)
	var errs atomic.Int32
	v, err := New(Config{JWKS: srv.URL + "/jwks.json", Issuer: issuer, Audience: audience, Clock: fc,
		OnError: func(error) { errs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if srv.gets.Load() != 1 {
		t.Fatalf("%d fetches at start, want 1", srv.gets.Load())
	}
	if _, err := v.Verify(sign(t, jwt.SigningMethodEdDSA, "ed1", k.ed, claims("alice"))); err != nil {
		t.Fatal(err)
	}
	// A new kid: one refetch at once (30 s after the start).
	srv.set(k.jwks(t, "ed2"), false)
	fc.Advance(30 * time.Second)
	tok2 := sign(t, jwt.SigningMethodEdDSA, "ed2", k.ed, claims("alice"))
	if _, err := v.Verify(tok2); err != nil || srv.gets.Load() != 2 {
		t.Fatalf("new kid: %v after %d fetches, want accepted after 2", err, srv.gets.Load())
	}
	// Unknown kids within 30 s of that fetch: no more fetches.
	for range 5 {
		if _, err := v.Verify(sign(t, jwt.SigningMethodEdDSA, "nope", k.ed, claims("alice"))); !errors.Is(err, ErrUnknownKey) {
			t.Fatal(err)
		}
	}
	if srv.gets.Load() != 2 {
		t.Fatalf("%d fetches for unknown kids within 30 s, want none more", srv.gets.Load()-2)
	}
	// The URL goes down: the last good set stays.
	srv.set(nil, true)
	fc.Advance(30 * time.Second)
	v.Verify(sign(t, jwt.SigningMethodEdDSA, "nope", k.ed, claims("alice")))
	if _, err := v.Verify(tok2); err != nil || srv.gets.Load() != 3 || errs.Load() != 1 {
		t.Fatalf("outage: %v, %d fetches, %d errors; want accepted, 3, 1", err, srv.gets.Load(), errs.Load())
	}

	// Run refreshes every 5 minutes and stops with its context.
	srv.set(k.jwks(t, "ed3"), false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); v.Run(ctx) }()
	testwait.Until(t, "Run's timer", func() bool { return fc.Waiters() == 1 })
	fc.Advance(DefaultRefresh)
	testwait.Until(t, "the refresh", func() bool { return srv.gets.Load() == 4 })
	testwait.Until(t, "Run's next timer", func() bool { return fc.Waiters() == 1 })
	if _, err := v.Verify(sign(t, jwt.SigningMethodEdDSA, "ed3", k.ed, claims("alice"))); err != nil {
		t.Fatalf("after the refresh: %v", err)
	}
	cancel()
	<-done
}

// A URL down at start: JWTs are refused until a fetch succeeds.
func TestURLDownAtStart(t *testing.T) {
	k := getKeys(t)
	srv := newJWKSServer(t, nil)
	srv.set(nil, true)
	fc := clock.NewFake(t0)
	v, err := New(Config{JWKS: srv.URL, Issuer: issuer, Audience: audience, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, claims("alice"))
	if _, err := v.Verify(tok); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("no set yet: %v", err)
	}
	srv.set(k.jwks(t), false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go v.Run(ctx)
	testwait.Until(t, "Run's timer", func() bool { return fc.Waiters() == 1 })
	fc.Advance(DefaultMinRefetch) // retried at the short interval
	testwait.Until(t, "the set", func() bool { return v.Keys() != nil })
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
}

// fuzzKeys are Ed25519 and P-256 keys only: an RSA key takes seconds to
// generate in a fuzzing worker's instrumented code.
func fuzzKeys(f *testing.F) (ed25519.PrivateKey, *ecdsa.PrivateKey, []byte) {
	ed := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: ed.Public(), KeyID: "ed"}, {Key: ec.Public(), KeyID: "ec"}}})
	if err != nil {
		f.Fatal(err)
	}
	return ed, ec, b
}

func FuzzJWTVerify(f *testing.F) {
	ed, ec, set := fuzzKeys(f)
	path := filepath.Join(f.TempDir(), "jwks.json")
	if err := os.WriteFile(path, set, 0o600); err != nil {
		f.Fatal(err)
	}
	v, err := New(Config{JWKS: path, Issuer: issuer, Audience: audience, Clock: clock.NewFake(t0)})
	if err != nil {
		f.Fatal(err)
	}
	good := sign(f, jwt.SigningMethodEdDSA, "ed", ed, claims("alice"))
	f.Add(good)
	f.Add(sign(f, jwt.SigningMethodES256, "ec", ec, claims("bob")))
	f.Add(sign(f, jwt.SigningMethodNone, "ed", jwt.UnsafeAllowNoneSignatureType, claims("alice")))
	f.Add(sign(f, jwt.SigningMethodHS256, "rsa", []byte("secret"), claims("alice")))
	f.Add("eyJhbGciOiJFZERTQSJ9.e30.")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := v.Verify(tok)
		if err != nil {
			if id != "" {
				t.Fatalf("error %v with id %q", err, id)
			}
			return
		}
		// Anything accepted is one of the seeds' signed tokens: the fuzzer
		// cannot forge a signature, so the player is one of theirs.
		if id != "alice" && id != "bob" {
			t.Fatalf("accepted %q for player %q", tok, id)
		}
		h, _, _ := strings.Cut(tok, ".")
		if !strings.HasPrefix(h, "eyJ") {
			t.Fatalf("accepted a token whose header is not JSON: %q", tok)
		}
	})
}

func FuzzParseJWKS(f *testing.F) {
	_, _, set := fuzzKeys(f)
	f.Add(set)
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"r","e":"AQAB","n":"` + strings.Repeat("u", 342) + `w"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"a"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"AAAA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := ParseJWKS(data)
		if err != nil {
			if !errors.Is(err, ErrJWKS) {
				t.Fatalf("error not ErrJWKS: %v", err)
			}
			return
		}
		if set.Len() == 0 {
			t.Fatal("a set without usable keys accepted")
		}
		for kid, key := range set.keys {
			if a, ok := algOf(key.pub); !ok || a != key.alg {
				t.Fatalf("kid %q: key of alg %q kept as %q", kid, a, key.alg)
			}
			if _, ok := key.pub.(crypto.Signer); ok {
				t.Fatalf("kid %q: a private key kept", kid)
			}
		}
	})
}
