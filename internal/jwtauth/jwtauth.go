// Package jwtauth verifies a studio's JWTs (JWS compact form) against the
// public keys of its JWKS, so that the gate accepts the tokens players
// already hold from the studio's auth service.
//
// Parsing and signature checks are github.com/golang-jwt/jwt/v5's; the JWKS
// is read by github.com/go-jose/go-jose/v4. Only EdDSA (Ed25519), ES256
// and RS256 are accepted: "alg": "none", HMAC algorithms (an HS256 token
// "signed" with an RSA public key as its secret: algorithm confusion) and
// every other algorithm are refused with ErrAlg before any key is looked
// at, and a key verifies only the algorithm of its own type. The issuer
// and the audience must match, exp is required, exp/nbf/iat apply with a
// leeway, and the player id is read from a configured claim (sub by
// default) and must be a valid Levee player id.
//
// The JWKS is a file, read again when it changes (looked at at most once a
// second, when a token is verified), or a URL, fetched at start, every
// Refresh (5 minutes) and, when a token names a kid the set does not hold,
// at once but at most every MinRefetch (30 s). A fetch or a file that
// fails keeps the last good set (and is reported to OnError); the URL's
// fetcher runs in Run, which its owner stops with its context.
package jwtauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/token"
)

// Errors of Verify and New. Verify's errors each name one refusal reason.
var (
	ErrMalformed   = errors.New("jwt: malformed")
	ErrAlg         = errors.New("jwt: algorithm not accepted")
	ErrUnknownKey  = errors.New("jwt: unknown key")
	ErrSignature   = errors.New("jwt: bad signature")
	ErrExpired     = errors.New("jwt: expired")
	ErrNotYetValid = errors.New("jwt: not valid yet")
	ErrIssuer      = errors.New("jwt: wrong issuer")
	ErrAudience    = errors.New("jwt: wrong audience")
	ErrPlayerID    = errors.New("jwt: invalid player id")
	// ErrJWKS: a JWKS (document, file or URL) that cannot be used.
	ErrJWKS = errors.New("jwt: bad JWKS")
	// ErrConfig: a Config that cannot work.
	ErrConfig = errors.New("jwt: bad config")
)

// Algorithms are the accepted "alg" values.
var Algorithms = []string{"EdDSA", "ES256", "RS256"}

// MaxLen bounds the tokens Verify reads.
const MaxLen = 8 << 10

// Defaults of Config.
const (
	DefaultPlayerClaim = "sub"
	DefaultLeeway      = 30 * time.Second
	DefaultRefresh     = 5 * time.Minute
	DefaultMinRefetch  = 30 * time.Second
	DefaultTimeout     = 10 * time.Second
)

// Config configures a Verifier. JWKS, Issuer and Audience are required.
type Config struct {
	// JWKS is a file path, or an https:// URL (http:// only to a loopback
	// host, for tests and local development).
	JWKS        string
	Issuer      string        // the "iss" every token must carry
	Audience    string        // one of the token's "aud" must be this
	PlayerClaim string        // the claim holding the player id; "" means DefaultPlayerClaim
	Leeway      time.Duration // allowed clock skew on exp, nbf and iat; 0 means DefaultLeeway, < 0 none
	Clock       clock.Clock   // nil: the wall clock
	// Client fetches a URL JWKS; nil is a client with DefaultTimeout.
	Client     *http.Client
	Refresh    time.Duration // 0 means DefaultRefresh
	MinRefetch time.Duration // 0 means DefaultMinRefetch
	// OnError is told of each fetch or file change that could not be
	// used (nil: ignored).
	OnError func(error)
}

// Verifier verifies JWTs against a JWKS. Its methods are safe for
// concurrent use.
type Verifier struct {
	cfg    Config
	parser *jwt.Parser
	url    string // "" for a file

	set atomic.Pointer[KeySet]

	// file: the next stat and the last file seen.
	nextCheck atomic.Int64
	fileMu    sync.Mutex
	seen      os.FileInfo

	// URL: fetches are serialised; lastTry is when the last one started.
	fetchMu sync.Mutex
	lastTry time.Time
}

// New checks cfg and reads the JWKS once. A file must hold a good set. A
// URL that cannot be fetched at start is not fatal: the Verifier refuses
// every JWT (ErrUnknownKey) until a fetch succeeds, which Run retries
// every MinRefetch.
func New(cfg Config) (*Verifier, error) {
	if cfg.JWKS == "" {
		return nil, fmt.Errorf("%w: no JWKS", ErrConfig)
	}
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, fmt.Errorf("%w: the issuer and the audience are required", ErrConfig)
	}
	if cfg.PlayerClaim == "" {
		cfg.PlayerClaim = DefaultPlayerClaim
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = DefaultLeeway
	case cfg.Leeway < 0:
		cfg.Leeway = 0
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: DefaultTimeout}
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.MinRefetch <= 0 {
		cfg.MinRefetch = DefaultMinRefetch
	}
	if cfg.OnError == nil {
		cfg.OnError = func(error) {}
	}
	v := &Verifier{cfg: cfg}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(Algorithms),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(cfg.Clock.Now),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithStrictDecoding(),
	)
	if u, ok, err := parseURL(cfg.JWKS); err != nil {
		return nil, err
	} else if ok {
		v.url = u
		if err := v.fetch(context.Background()); err != nil {
			cfg.OnError(err)
		}
		return v, nil
	}
	info, set, err := readFile(cfg.JWKS)
	if err != nil {
		return nil, err
	}
	v.seen = info
	v.set.Store(set)
	v.nextCheck.Store(cfg.Clock.Now().Add(time.Second).UnixNano())
	return v, nil
}

// parseURL tells a URL from a file path: ok for http(s)://, an error for
// plain http to a host that is not loopback.
func parseURL(s string) (string, bool, error) {
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
		return "", false, nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", false, fmt.Errorf("%w: JWKS URL %q: %v", ErrConfig, s, err)
	}
	if u.Scheme == "http" {
		h := u.Hostname()
		ip := net.ParseIP(h)
		if h != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "", false, fmt.Errorf("%w: JWKS URL %q: plain http only to a loopback host; use https", ErrConfig, s)
		}
	}
	return u.String(), true, nil
}

func readFile(path string) (os.FileInfo, *KeySet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrJWKS, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrJWKS, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxJWKS+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrJWKS, path, err)
	}
	set, err := ParseJWKS(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return info, set, nil
}

// Run keeps a URL JWKS fresh until ctx ends: every Refresh after a good
// fetch, every MinRefetch while none has succeeded. For a file it returns
// at once (the file is looked at by Verify).
func (v *Verifier) Run(ctx context.Context) {
	if v.url == "" {
		return
	}
	for {
		d := v.cfg.Refresh
		if v.set.Load() == nil {
			d = v.cfg.MinRefetch
		}
		if clock.Sleep(ctx, v.cfg.Clock, d) != nil {
			return
		}
		if err := v.fetch(ctx); err != nil {
			v.cfg.OnError(err)
		}
	}
}

// Keys returns the key set in use (nil before a URL was first fetched).
func (v *Verifier) Keys() *KeySet { return v.keys() }

func (v *Verifier) keys() *KeySet {
	if v.url != "" {
		return v.set.Load()
	}
	now := v.cfg.Clock.Now()
	if now.UnixNano() < v.nextCheck.Load() || !v.fileMu.TryLock() {
		return v.set.Load()
	}
	defer v.fileMu.Unlock()
	v.nextCheck.Store(now.Add(time.Second).UnixNano())
	info, err := os.Stat(v.cfg.JWKS)
	if err != nil {
		if v.seen != nil {
			v.seen = nil
			v.cfg.OnError(fmt.Errorf("%w: %v; keeping the last good set", ErrJWKS, err))
		}
		return v.set.Load()
	}
	if v.seen != nil && os.SameFile(v.seen, info) && info.ModTime().Equal(v.seen.ModTime()) && info.Size() == v.seen.Size() {
		return v.set.Load()
	}
	v.seen = info
	_, set, err := readFile(v.cfg.JWKS)
	if err != nil {
		v.cfg.OnError(fmt.Errorf("%w; keeping the last good set", err))
		return v.set.Load()
	}
	v.set.Store(set)
	return set
}

// fetch GETs the URL and, if it gives a good set, uses it.
func (v *Verifier) fetch(ctx context.Context) error {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	v.lastTry = v.cfg.Clock.Now()
	return v.fetchLocked(ctx)
}

func (v *Verifier) fetchLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, v.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.url, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrJWKS, err)
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	resp, err := v.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: fetch: %v; keeping the last good set", ErrJWKS, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: fetch %s: HTTP %d; keeping the last good set", ErrJWKS, v.url, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKS+1))
	if err != nil {
		return fmt.Errorf("%w: fetch %s: %v; keeping the last good set", ErrJWKS, v.url, err)
	}
	set, err := ParseJWKS(data)
	if err != nil {
		return fmt.Errorf("%s: %w; keeping the last good set", v.url, err)
	}
	v.set.Store(set)
	return nil
}

func (v *Verifier) timeout() time.Duration {
	if t := v.cfg.Client.Timeout; t > 0 {
		return t
	}
	return DefaultTimeout
}

// refetch fetches a URL JWKS again for an unknown kid, unless a fetch
// started less than MinRefetch ago. It reports whether it fetched.
func (v *Verifier) refetch() bool {
	if v.url == "" {
		return false
	}
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	now := v.cfg.Clock.Now()
	if !v.lastTry.IsZero() && now.Sub(v.lastTry) < v.cfg.MinRefetch {
		return false
	}
	v.lastTry = now
	if err := v.fetchLocked(context.Background()); err != nil {
		v.cfg.OnError(err)
		return false
	}
	return true
}

// Verify checks tok and returns its player id. The error wraps one of the
// Err* values above (ErrMalformed, ErrAlg, ErrUnknownKey, ErrSignature,
// ErrExpired, ErrNotYetValid, ErrIssuer, ErrAudience, ErrPlayerID).
func (v *Verifier) Verify(tok string) (string, error) {
	if len(tok) > MaxLen {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLen)
	}
	// The algorithm first, from the header alone: "none", HMAC and
	// anything else are refused before a key is looked at.
	unverified, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
	if err != nil {
		if errors.Is(err, jwt.ErrTokenUnverifiable) {
			return "", fmt.Errorf("%w: %v", ErrAlg, err)
		}
		return "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	alg, _ := unverified.Header["alg"].(string)
	if !accepted(alg) {
		return "", fmt.Errorf("%w: %q (accepted: %s)", ErrAlg, alg, strings.Join(Algorithms, ", "))
	}
	claims := jwt.MapClaims{}
	_, err = v.parser.ParseWithClaims(tok, claims, v.keyFunc)
	if err != nil {
		if errors.Is(err, jwt.ErrTokenRequiredClaimMissing) {
			// A missing iss or aud is the wrong one, not a shape error.
			if _, ok := claims["aud"]; !ok {
				return "", fmt.Errorf("%w: no aud claim", ErrAudience)
			}
			if _, ok := claims["iss"]; !ok {
				return "", fmt.Errorf("%w: no iss claim", ErrIssuer)
			}
		}
		return "", mapError(err)
	}
	id, _ := claims[v.cfg.PlayerClaim].(string)
	if !token.ValidPlayerID(id) {
		return "", fmt.Errorf("%w: claim %q is not 1..64 characters of [A-Za-z0-9_-]", ErrPlayerID, v.cfg.PlayerClaim)
	}
	return id, nil
}

func accepted(alg string) bool {
	for _, a := range Algorithms {
		if alg == a {
			return true
		}
	}
	return false
}

// keyFunc gives the key the token's kid names, refetching a URL JWKS once
// (rate limited) for a kid it does not know, and only if that key is of
// the token's algorithm.
func (v *Verifier) keyFunc(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	set := v.keys()
	var (
		k  key
		ok bool
	)
	if set != nil {
		k, ok = set.lookup(kid)
	}
	if !ok && v.refetch() {
		if set = v.keys(); set != nil {
			k, ok = set.lookup(kid)
		}
	}
	if !ok {
		return nil, fmt.Errorf("%w: kid %q is not in the JWKS", ErrUnknownKey, kid)
	}
	if alg := t.Method.Alg(); alg != k.alg {
		return nil, fmt.Errorf("%w: kid %q is a %s key, the token says %s", ErrAlg, kid, k.alg, alg)
	}
	return k.pub, nil
}

// mapError turns jwt/v5's errors into this package's.
func mapError(err error) error {
	for _, mine := range []error{ErrUnknownKey, ErrAlg} {
		if errors.Is(err, mine) {
			return err
		}
	}
	for _, m := range []struct{ theirs, mine error }{
		{jwt.ErrTokenSignatureInvalid, ErrSignature},
		{jwt.ErrTokenExpired, ErrExpired},
		{jwt.ErrTokenNotValidYet, ErrNotYetValid},
		{jwt.ErrTokenUsedBeforeIssued, ErrNotYetValid},
		{jwt.ErrTokenInvalidIssuer, ErrIssuer},
		{jwt.ErrTokenInvalidAudience, ErrAudience},
	} {
		if errors.Is(err, m.theirs) {
			return fmt.Errorf("%w: %v", m.mine, err)
		}
	}
	return fmt.Errorf("%w: %v", ErrMalformed, err)
}
