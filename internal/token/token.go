// Package token signs and verifies player tokens. A studio's login service
// mints them (in any language) and the gate verifies them; this comment is
// the format's definition.
//
// A token is four parts joined by dots:
//
//		v1.<id>.<exp>.<mac>
//
//	  - "v1" is the format's version, as is.
//	  - <id> is the player id in base64url: the URL-safe alphabet of RFC 4648
//	    §5 (A-Z a-z 0-9 - _), without "=" padding and canonical (the unused
//	    low bits of the last character are zero, which every standard
//	    encoder gives). The player id itself is 1 to 64 characters of
//	    [A-Za-z0-9_-].
//	  - <exp> is the expiry in Unix seconds (UTC), in decimal: digits only,
//	    no sign, no leading zero. The token is valid while now < exp.
//	  - <mac> is HMAC-SHA256, keyed with the bytes of the secret as
//	    configured (-token-secret, used as is: not hashed, not decoded from
//	    base64), over the ASCII bytes of "v1.<id>.<exp>" (the token up to,
//	    not including, its last dot), in base64url as above: 43 characters.
//
// A v2 token names the key that signed it, so that the gate can hold a key
// ring (Ring, FileRing: -token-keys) and keys can rotate without logging
// anybody out:
//
//		v2.<kid>.<id>.<exp>.<mac>
//
//	  - <kid> is the key id as is: 1 to 32 characters of [A-Za-z0-9_-].
//	  - <id> and <exp> are as in v1.
//	  - <mac> is HMAC-SHA256 keyed with that key's secret over
//	    "v2.<kid>.<id>.<exp>", in base64url as above.
//
// A v2 token verifies while its key is in the ring and before the key's
// retire_at (ErrUnknownKey, ErrRetiredKey otherwise). A v1 token verifies
// against -token-secret, or the ring's key marked "v1" (migration). The
// ring file's format and the rotation steps are in docs/keys.md.
//
// A token is at most 256 bytes. The gate also refuses a token whose expiry
// lies further ahead than its -token-max-lifetime (24 hours by default), so
// that a leaked secret or a minting bug cannot hand out tokens that live
// for ever: mint with a lifetime comfortably below it, as the clocks of the
// login service and the gate may differ.
//
// With the secret "example-secret", player "alice" and expiry 1767225600
// (2026-01-01T00:00:00Z), the token is the one ExampleSign prints.
package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Errors returned by Verify.
var (
	ErrMalformed = errors.New("token: malformed")
	ErrSignature = errors.New("token: bad signature")
	ErrExpired   = errors.New("token: expired")
	ErrPlayerID  = errors.New("token: invalid player id")
	ErrLifetime  = errors.New("token: expiry too far ahead")
)

// MaxLen bounds what Verify reads.
const MaxLen = 256

// ValidPlayerID reports whether id is 1..64 characters of [A-Za-z0-9_-].
func ValidPlayerID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// b64 is strict so that a signature or id has exactly one encoding: a token
// cannot be altered in its unused trailing bits and still verify.
var b64 = base64.RawURLEncoding.Strict()

func mac(secret []byte, payload string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(payload))
	return h.Sum(nil)
}

// Sign returns a token for playerID that expires at exp.
func Sign(secret []byte, playerID string, exp time.Time) (string, error) {
	if !ValidPlayerID(playerID) {
		return "", ErrPlayerID
	}
	if exp.Unix() < 0 {
		return "", fmt.Errorf("%w: expiry before 1970", ErrMalformed)
	}
	payload := "v1." + b64.EncodeToString([]byte(playerID)) + "." + strconv.FormatInt(exp.Unix(), 10)
	return payload + "." + b64.EncodeToString(mac(secret, payload)), nil
}

// Verify checks tok against secret at time now and returns its player id.
func Verify(secret []byte, tok string, now time.Time) (string, error) {
	id, _, err := verify(secret, tok, now)
	return id, err
}

// VerifyWithin is Verify that also refuses, with ErrLifetime, a token whose
// expiry lies more than maxLifetime after now. maxLifetime <= 0 means no
// bound, as Verify.
func VerifyWithin(secret []byte, tok string, now time.Time, maxLifetime time.Duration) (string, error) {
	id, exp, err := verify(secret, tok, now)
	if err != nil {
		return "", err
	}
	if left := exp.Sub(now); maxLifetime > 0 && left > maxLifetime {
		return "", fmt.Errorf("%w: expires in %s, the limit is %s", ErrLifetime, left.Round(time.Second), maxLifetime)
	}
	return id, nil
}

func verify(secret []byte, tok string, now time.Time) (string, time.Time, error) {
	if len(tok) > MaxLen {
		return "", time.Time{}, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLen)
	}
	// Only the base64url alphabet, digits and dots: the decoder would
	// otherwise skip newlines, letting one token have many spellings.
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "", time.Time{}, fmt.Errorf("%w: unexpected character at %d", ErrMalformed, i)
		}
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		return "", time.Time{}, ErrMalformed
	}
	sig, err := b64.DecodeString(parts[3])
	if err != nil {
		return "", time.Time{}, ErrMalformed
	}
	payload := tok[:len(tok)-len(parts[3])-1]
	if !hmac.Equal(sig, mac(secret, payload)) {
		return "", time.Time{}, ErrSignature
	}
	id, err := b64.DecodeString(parts[1])
	if err != nil || !ValidPlayerID(string(id)) {
		return "", time.Time{}, ErrPlayerID
	}
	exp, err := parseExpiry(parts[2])
	if err != nil {
		return "", time.Time{}, err
	}
	if !now.Before(time.Unix(exp, 0)) {
		return "", time.Time{}, ErrExpired
	}
	return string(id), time.Unix(exp, 0), nil
}

// parseExpiry reads the expiry part: decimal digits, no sign, no leading
// zero, so that an expiry has one spelling only.
func parseExpiry(s string) (int64, error) {
	if s == "" || len(s) > 1 && s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w: expiry is not decimal unix seconds", ErrMalformed)
	}
	exp, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: expiry out of range", ErrMalformed)
	}
	return exp, nil
}
