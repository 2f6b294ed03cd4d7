// Package token signs and verifies player tokens: HMAC-SHA256 over the player
// id and an expiry. Format: "v1.<base64url(player id)>.<expiry unix>.<base64url(mac)>".
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
	payload := "v1." + b64.EncodeToString([]byte(playerID)) + "." + strconv.FormatInt(exp.Unix(), 10)
	return payload + "." + b64.EncodeToString(mac(secret, payload)), nil
}

// Verify checks tok against secret at time now and returns its player id.
func Verify(secret []byte, tok string, now time.Time) (string, error) {
	if len(tok) > MaxLen {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLen)
	}
	// Only the base64url alphabet, digits and dots: the decoder would
	// otherwise skip newlines, letting one token have many spellings.
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "", fmt.Errorf("%w: unexpected character at %d", ErrMalformed, i)
		}
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		return "", ErrMalformed
	}
	sig, err := b64.DecodeString(parts[3])
	if err != nil {
		return "", ErrMalformed
	}
	payload := tok[:len(tok)-len(parts[3])-1]
	if !hmac.Equal(sig, mac(secret, payload)) {
		return "", ErrSignature
	}
	id, err := b64.DecodeString(parts[1])
	if err != nil || !ValidPlayerID(string(id)) {
		return "", ErrPlayerID
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return "", ErrMalformed
	}
	if !now.Before(time.Unix(exp, 0)) {
		return "", ErrExpired
	}
	return string(id), nil
}
