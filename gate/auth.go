package gate

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/jwtauth"
	"github.com/leveehq/levee/internal/token"
)

// keySource gives the key ring in use: fixed (-token-secret) or a
// token.FileRing (-token-keys), which reads its file again on change.
type keySource interface{ Ring() *token.Ring }

type fixedRing struct{ r *token.Ring }

func (f fixedRing) Ring() *token.Ring { return f.r }

// jwtVerifier verifies a studio's JWT and returns its player id
// (*jwtauth.Verifier).
type jwtVerifier interface {
	Verify(tok string) (string, error)
}

// ring is the key ring player tokens and tickets are verified against, and
// whose current key signs tickets and passes.
func (s *Server) ring() *token.Ring { return s.keys.Ring() }

// signingKey is the ring's current key.
func (s *Server) signingKey() *token.Key {
	k := s.ring().Current()
	return &k
}

// Reasons counted by gate_token_refusals_total: why a player's token (a
// Levee token or a studio JWT) was refused. Every such refusal is also an
// unauthorized connection in gate_connections_total.
const (
	tokenMissing     = "missing"       // no token, or Authorization not Bearer
	tokenMalformed   = "malformed"     // not a token of a known shape, or its fields are invalid
	tokenExpired     = "expired"       // past its expiry (JWT: exp, with the leeway)
	tokenNotYet      = "not_yet"       // JWT: before its nbf/iat, with the leeway
	tokenLifetime    = "lifetime"      // expiry further ahead than -token-max-lifetime
	tokenRetired     = "retired_key"   // signed with a key past its retire_at
	tokenUnknownKey  = "unknown_key"   // names a key id the ring or JWKS does not hold
	tokenBadSig      = "bad_signature" // the signature does not verify
	tokenBadAudience = "bad_audience"  // JWT: aud is not -jwt-audience
	tokenBadIssuer   = "bad_issuer"    // JWT: iss is not -jwt-issuer
	tokenAlg         = "alg"           // JWT: an algorithm other than EdDSA, ES256, RS256 (none and HS256 included)
	tokenPlayerID    = "player_id"     // the player id (claim) is missing or not 1..64 of [A-Za-z0-9_-]
	tokenNoJWT       = "jwt_disabled"  // a JWT, but the gate has no -jwks
)

var tokenReasons = []string{tokenMissing, tokenMalformed, tokenExpired, tokenNotYet, tokenLifetime, tokenRetired,
	tokenUnknownKey, tokenBadSig, tokenBadAudience, tokenBadIssuer, tokenAlg, tokenPlayerID, tokenNoJWT}

// authMetrics count token refusals by reason and key files that could not
// be used.
type authMetrics struct {
	refusals   map[string]prometheus.Counter
	keysErrors prometheus.Counter
}

func newAuthMetrics(reg prometheus.Registerer) *authMetrics {
	f := promauto.With(reg)
	vec := f.NewCounterVec(prometheus.CounterOpts{
		Name: "gate_token_refusals_total",
		Help: "Player connections refused for their token, by reason (missing, malformed, expired, not_yet, lifetime, retired_key, " +
			"unknown_key, bad_signature, bad_audience, bad_issuer, alg, player_id, jwt_disabled); each is also counted in " +
			"gate_connections_total{result=\"unauthorized\"}.",
	}, []string{"reason"})
	m := &authMetrics{refusals: make(map[string]prometheus.Counter, len(tokenReasons))}
	for _, r := range tokenReasons {
		m.refusals[r] = vec.WithLabelValues(r)
	}
	m.keysErrors = f.NewCounter(prometheus.CounterOpts{
		Name: "gate_token_keys_errors_total",
		Help: "Changes of the -token-keys file or the -jwks key set that could not be used (unreadable, invalid, fetch failed); " +
			"the gate keeps the last good keys.",
	})
	return m
}

// newKeySource builds the key ring of cfg: -token-keys read as a FileRing,
// else -token-secret (or DevTokenSecret, with a warning) as a one-key ring.
func newKeySource(cfg Config, logger *slog.Logger, m *authMetrics) (keySource, error) {
	if cfg.TokenKeys != "" {
		fr, err := token.LoadFileRing(cfg.TokenKeys, cfg.Clock, func(err error) {
			m.keysErrors.Inc()
			logger.Error("token keys: the changed -token-keys file cannot be used", "err", err)
		})
		if err != nil {
			return nil, fmt.Errorf("%w: -token-keys: %w", ErrInvalidConfig, err)
		}
		cur := fr.Ring().Current()
		logger.Info("token keys loaded", "file", cfg.TokenKeys, "current", cur.ID, "keys", len(fr.Ring().Keys()))
		return fr, nil
	}
	secret := cfg.TokenSecret
	if secret == "" {
		logger.Warn("using the development token secret; set -token-secret or -token-keys in production")
		secret = DevTokenSecret
	}
	return fixedRing{token.NewSecretRing([]byte(secret))}, nil
}

// verifyToken verifies a player's token, a Levee token (v1, v2) or a JWT
// (three base64url parts, "eyJ…"), at the clock's now. It returns the
// player id, or an error wrapping apperr.ErrUnauthorized and the reason
// counted.
func (s *Server) verifyToken(tok string) (string, string, error) {
	var (
		id  string
		err error
	)
	now := s.clock.Now()
	if isJWT(tok) {
		if s.jwt == nil {
			return "", tokenNoJWT, fmt.Errorf("%w: this gate does not accept JWTs (no -jwks)", apperr.ErrUnauthorized)
		}
		id, err = s.jwt.Verify(tok)
	} else {
		id, err = s.ring().Verify(tok, now, s.cfg.TokenMaxLifetime)
	}
	if err != nil {
		return "", tokenReason(err), fmt.Errorf("%w: %w", apperr.ErrUnauthorized, err)
	}
	return id, "", nil
}

// isJWT tells a JWT (JWS compact form: three parts, a JSON header, so
// "eyJ") from a Levee token ("v1." or "v2.").
func isJWT(tok string) bool {
	return strings.HasPrefix(tok, "eyJ") && strings.Count(tok, ".") == 2
}

// tokenReason maps a verification error to its gate_token_refusals_total
// reason.
func tokenReason(err error) string {
	for _, c := range reasonOf {
		if errors.Is(err, c.err) {
			return c.reason
		}
	}
	return tokenMalformed
}

var reasonOf = []struct {
	err    error
	reason string
}{
	{token.ErrExpired, tokenExpired},
	{token.ErrLifetime, tokenLifetime},
	{token.ErrRetiredKey, tokenRetired},
	{token.ErrUnknownKey, tokenUnknownKey},
	{token.ErrSignature, tokenBadSig},
	{token.ErrPlayerID, tokenPlayerID},
	{token.ErrMalformed, tokenMalformed},
	{jwtauth.ErrExpired, tokenExpired},
	{jwtauth.ErrNotYetValid, tokenNotYet},
	{jwtauth.ErrUnknownKey, tokenUnknownKey},
	{jwtauth.ErrSignature, tokenBadSig},
	{jwtauth.ErrAudience, tokenBadAudience},
	{jwtauth.ErrIssuer, tokenBadIssuer},
	{jwtauth.ErrAlg, tokenAlg},
	{jwtauth.ErrPlayerID, tokenPlayerID},
	{jwtauth.ErrMalformed, tokenMalformed},
}

// validateAuth checks the token and JWT settings (part of Validate).
func (c Config) validateAuth() error {
	if c.TokenKeys != "" && c.TokenSecret != "" {
		return fmt.Errorf("%w: -token-keys and -token-secret: give one (to keep v1 tokens valid while migrating, put the old secret in the ring as a key with \"v1\": true)", ErrInvalidConfig)
	}
	if c.JWKS == "" {
		return nil
	}
	if c.JWTIssuer == "" || c.JWTAudience == "" {
		return fmt.Errorf("%w: -jwks needs -jwt-issuer and -jwt-audience (the iss and aud every studio JWT must carry)", ErrInvalidConfig)
	}
	if c.JWTPlayerClaim == "" {
		return fmt.Errorf("%w: -jwt-player-claim: required with -jwks (the default is %q)", ErrInvalidConfig, jwtauth.DefaultPlayerClaim)
	}
	if c.JWTLeeway < 0 || c.JWTLeeway > 5*time.Minute {
		return fmt.Errorf("%w: -jwt-leeway: must be 0..5m, got %s", ErrInvalidConfig, c.JWTLeeway)
	}
	return nil
}

// newJWT builds the JWT verifier of cfg (nil without -jwks). A URL JWKS's
// fetcher runs in jwtRun, which Run starts and stops with its context.
func newJWT(cfg Config, logger *slog.Logger, m *authMetrics) (*jwtauth.Verifier, error) {
	if cfg.JWKS == "" {
		return nil, nil
	}
	leeway := cfg.JWTLeeway
	if leeway == 0 {
		leeway = -1 // jwtauth: 0 is its default, < 0 none
	}
	v, err := jwtauth.New(jwtauth.Config{
		JWKS: cfg.JWKS, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, PlayerClaim: cfg.JWTPlayerClaim,
		Leeway: leeway, Clock: cfg.Clock,
		OnError: func(err error) {
			m.keysErrors.Inc()
			logger.Error("jwks: the key set could not be read; keeping the last good one", "jwks", cfg.JWKS, "err", err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: -jwks: %w", ErrInvalidConfig, err)
	}
	n := 0
	if ks := v.Keys(); ks != nil {
		n = ks.Len()
	}
	logger.Info("studio JWTs accepted", "jwks", cfg.JWKS, "issuer", cfg.JWTIssuer, "audience", cfg.JWTAudience,
		"player_claim", cfg.JWTPlayerClaim, "keys", n)
	return v, nil
}
