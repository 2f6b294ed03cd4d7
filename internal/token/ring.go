package token

import (
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Errors of the key ring, besides those of Verify.
var (
	// ErrUnknownKey: the token names a key id the ring does not hold (or
	// it is a v1 token and no key of the ring verifies v1 tokens).
	ErrUnknownKey = errors.New("token: unknown key")
	// ErrRetiredKey: the token's key is past its retire_at.
	ErrRetiredKey = errors.New("token: key retired")
	// ErrKeys: a key ring (file) that cannot be used; the message says why.
	ErrKeys = errors.New("token: bad key ring")
)

// MinSecretLen is the shortest secret a ring accepts, in bytes.
const MinSecretLen = 16

// MaxKeys bounds the keys of one ring.
const MaxKeys = 64

// MaxKeysFile bounds a key ring file, in bytes.
const MaxKeysFile = 64 << 10

// Key is one signing key of a Ring.
type Key struct {
	// ID is the key id carried by v2 tokens: 1 to 32 characters of
	// [A-Za-z0-9_-]. Empty only in the one-key ring of NewSecretRing,
	// whose key signs v1 tokens.
	ID     string
	Secret []byte
	// Current: this key signs. A ring has exactly one current key.
	Current bool
	// RetireAt: tokens under this key are refused (ErrRetiredKey) from
	// this instant on. Zero: never.
	RetireAt time.Time
	// V1: this key also verifies v1 tokens and the gate's older tickets,
	// which carry no key id (migration from -token-secret). At most one
	// key per ring.
	V1 bool
}

// ValidKeyID reports whether id is 1..32 characters of [A-Za-z0-9_-].
func ValidKeyID(id string) bool {
	return len(id) <= 32 && ValidPlayerID(id)
}

// usable reports the key's retirement at now: nil or ErrRetiredKey.
func (k *Key) usable(now time.Time) error {
	if !k.RetireAt.IsZero() && !now.Before(k.RetireAt) {
		return fmt.Errorf("%w: key %q retired at %s", ErrRetiredKey, k.ID, k.RetireAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// MAC is HMAC-SHA256 of payload keyed with the key's secret.
func (k *Key) MAC(payload string) []byte { return mac(k.Secret, payload) }

// Sign returns a token for playerID that expires at exp: a v2 token with
// the key's id, or a v1 token when the key has no id.
func (k *Key) Sign(playerID string, exp time.Time) (string, error) {
	return SignKey(k.ID, k.Secret, playerID, exp)
}

// SignKey returns a v2 token "v2.<kid>.<id>.<exp>.<mac>" for playerID,
// signed with secret under key id kid; an empty kid gives a v1 token, as
// Sign.
func SignKey(kid string, secret []byte, playerID string, exp time.Time) (string, error) {
	if kid == "" {
		return Sign(secret, playerID, exp)
	}
	if !ValidKeyID(kid) {
		return "", fmt.Errorf("%w: invalid key id %q", ErrMalformed, kid)
	}
	if !ValidPlayerID(playerID) {
		return "", ErrPlayerID
	}
	if exp.Unix() < 0 {
		return "", fmt.Errorf("%w: expiry before 1970", ErrMalformed)
	}
	payload := "v2." + kid + "." + b64.EncodeToString([]byte(playerID)) + "." + strconv.FormatInt(exp.Unix(), 10)
	return payload + "." + b64.EncodeToString(mac(secret, payload)), nil
}

// Ring is an immutable set of keys: one current key that signs, and older
// (or newer, not yet current) keys that still verify until their
// retire_at. Build one with NewRing, NewSecretRing or ParseKeys.
type Ring struct {
	keys    []Key
	current int
	v1      int // index of the V1 key, -1 if none
}

// NewSecretRing is the ring of -token-secret: one current key without an
// id, which signs and verifies v1 tokens and never retires.
func NewSecretRing(secret []byte) *Ring {
	return &Ring{keys: []Key{{Secret: secret, Current: true, V1: true}}, current: 0, v1: 0}
}

// NewRing checks keys and returns their ring: ids valid and distinct,
// exactly one current key and it not retiring, at most one V1 key,
// secrets at least MinSecretLen bytes.
func NewRing(keys []Key) (*Ring, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrKeys)
	}
	if len(keys) > MaxKeys {
		return nil, fmt.Errorf("%w: %d keys, at most %d", ErrKeys, len(keys), MaxKeys)
	}
	r := &Ring{keys: make([]Key, len(keys)), current: -1, v1: -1}
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		if !ValidKeyID(k.ID) {
			return nil, fmt.Errorf("%w: key %d: id %q is not 1..32 characters of [A-Za-z0-9_-]", ErrKeys, i, k.ID)
		}
		if seen[k.ID] {
			return nil, fmt.Errorf("%w: key id %q appears twice", ErrKeys, k.ID)
		}
		seen[k.ID] = true
		if len(k.Secret) < MinSecretLen {
			return nil, fmt.Errorf("%w: key %q: secret is %d bytes, at least %d needed", ErrKeys, k.ID, len(k.Secret), MinSecretLen)
		}
		if k.Current {
			if r.current >= 0 {
				return nil, fmt.Errorf("%w: keys %q and %q are both current; exactly one must be", ErrKeys, keys[r.current].ID, k.ID)
			}
			if !k.RetireAt.IsZero() {
				return nil, fmt.Errorf("%w: current key %q has a retire_at; make another key current before retiring it", ErrKeys, k.ID)
			}
			r.current = i
		}
		if k.V1 {
			if r.v1 >= 0 {
				return nil, fmt.Errorf("%w: keys %q and %q both verify v1 tokens; at most one may", ErrKeys, keys[r.v1].ID, k.ID)
			}
			r.v1 = i
		}
		k.Secret = bytes.Clone(k.Secret)
		r.keys[i] = k
	}
	if r.current < 0 {
		return nil, fmt.Errorf("%w: no current key; exactly one must be", ErrKeys)
	}
	return r, nil
}

// Current returns the signing key.
func (r *Ring) Current() Key { return r.keys[r.current] }

// Keys returns a copy of the ring's keys, in file order.
func (r *Ring) Keys() []Key { return append([]Key(nil), r.keys...) }

// Sign returns a token for playerID that expires at exp, signed with the
// current key.
func (r *Ring) Sign(playerID string, exp time.Time) (string, error) {
	k := r.Current()
	return k.Sign(playerID, exp)
}

// Lookup returns the key with id kid if it is usable at now: ErrUnknownKey
// when the ring has none, ErrRetiredKey when it is past its retire_at. An
// empty kid names the key that verifies v1 tokens.
func (r *Ring) Lookup(kid string, now time.Time) (*Key, error) {
	var k *Key
	if kid == "" {
		if r.v1 < 0 {
			return nil, fmt.Errorf("%w: v1 tokens are not accepted (no key of the ring has \"v1\": true)", ErrUnknownKey)
		}
		k = &r.keys[r.v1]
	} else {
		for i := range r.keys {
			if r.keys[i].ID == kid {
				k = &r.keys[i]
				break
			}
		}
		if k == nil {
			return nil, fmt.Errorf("%w: key id %q", ErrUnknownKey, kid)
		}
	}
	if err := k.usable(now); err != nil {
		return nil, err
	}
	return k, nil
}

// Verify checks a v1 or v2 token at now and returns its player id: a v2
// token against the key it names, a v1 token against the ring's V1 key.
// maxLifetime > 0 also refuses, with ErrLifetime, an expiry more than
// maxLifetime after now.
func (r *Ring) Verify(tok string, now time.Time, maxLifetime time.Duration) (string, error) {
	if len(tok) > MaxLen {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLen)
	}
	var (
		id  string
		exp time.Time
		err error
	)
	switch {
	case strings.HasPrefix(tok, "v1."):
		var k *Key
		if k, err = r.Lookup("", now); err != nil {
			return "", err
		}
		id, exp, err = verify(k.Secret, tok, now)
	case strings.HasPrefix(tok, "v2."):
		id, exp, err = r.verifyV2(tok, now)
	default:
		return "", fmt.Errorf("%w: not a v1 or v2 token", ErrMalformed)
	}
	if err != nil {
		return "", err
	}
	if left := exp.Sub(now); maxLifetime > 0 && left > maxLifetime {
		return "", fmt.Errorf("%w: expires in %s, the limit is %s", ErrLifetime, left.Round(time.Second), maxLifetime)
	}
	return id, nil
}

// verifyV2 checks "v2.<kid>.<id>.<exp>.<mac>": the shape, then the key,
// then the MAC (in constant time), then the fields, then the expiry.
func (r *Ring) verifyV2(tok string, now time.Time) (string, time.Time, error) {
	if err := checkAlphabet(tok); err != nil {
		return "", time.Time{}, err
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 5 || parts[0] != "v2" || !ValidKeyID(parts[1]) {
		return "", time.Time{}, ErrMalformed
	}
	sig, err := b64.DecodeString(parts[4])
	if err != nil {
		return "", time.Time{}, ErrMalformed
	}
	k, err := r.Lookup(parts[1], now)
	if err != nil {
		return "", time.Time{}, err
	}
	payload := tok[:len(tok)-len(parts[4])-1]
	if !hmac.Equal(sig, k.MAC(payload)) {
		return "", time.Time{}, ErrSignature
	}
	id, err := b64.DecodeString(parts[2])
	if err != nil || !ValidPlayerID(string(id)) {
		return "", time.Time{}, ErrPlayerID
	}
	exp, err := parseExpiry(parts[3])
	if err != nil {
		return "", time.Time{}, err
	}
	if !now.Before(time.Unix(exp, 0)) {
		return "", time.Time{}, ErrExpired
	}
	return string(id), time.Unix(exp, 0), nil
}

// checkAlphabet allows only the base64url alphabet, digits and dots: the
// decoder would otherwise skip newlines, letting one token have many
// spellings.
func checkAlphabet(tok string) error {
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("%w: unexpected character at %d", ErrMalformed, i)
		}
	}
	return nil
}

// keysFile is the JSON of a key ring file (see docs/keys.md).
type keysFile struct {
	Keys []keyJSON `json:"keys"`
}

type keyJSON struct {
	ID         string  `json:"id"`
	Secret     *string `json:"secret"`
	SecretFile *string `json:"secret_file"`
	Current    bool    `json:"current"`
	RetireAt   string  `json:"retire_at"`
	V1         bool    `json:"v1"`
}

// ParseKeys reads a key ring file's JSON:
//
//	{"keys": [
//	  {"id": "2026-12", "secret_file": "k2026-12.secret", "current": true},
//	  {"id": "2026-06", "secret": "…", "retire_at": "2026-12-05T00:00:00Z"}
//	]}
//
// Each key has exactly one of secret (the bytes of the string, used as is)
// and secret_file (a file holding the secret; one trailing newline is
// dropped; a relative path is relative to dir). Unknown fields are refused,
// so that a typo ("retire" for "retire_at") is not silently ignored.
// readFile reads secret files (os.ReadFile if nil). The ring is then
// checked as NewRing does.
func ParseKeys(data []byte, dir string, readFile func(string) ([]byte, error)) (*Ring, error) {
	if len(data) > MaxKeysFile {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrKeys, MaxKeysFile)
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f keysFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeys, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrKeys)
	}
	if len(f.Keys) > MaxKeys {
		return nil, fmt.Errorf("%w: %d keys, at most %d", ErrKeys, len(f.Keys), MaxKeys)
	}
	keys := make([]Key, 0, len(f.Keys))
	for i, kj := range f.Keys {
		k := Key{ID: kj.ID, Current: kj.Current, V1: kj.V1}
		name := fmt.Sprintf("key %d (%q)", i, kj.ID)
		switch {
		case kj.Secret != nil && kj.SecretFile != nil:
			return nil, fmt.Errorf("%w: %s has both secret and secret_file; give one", ErrKeys, name)
		case kj.Secret != nil:
			k.Secret = []byte(*kj.Secret)
		case kj.SecretFile != nil:
			p := *kj.SecretFile
			if p == "" {
				return nil, fmt.Errorf("%w: %s: empty secret_file", ErrKeys, name)
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			b, err := readFile(p)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: secret_file: %v", ErrKeys, name, err)
			}
			b = bytes.TrimSuffix(b, []byte("\n"))
			b = bytes.TrimSuffix(b, []byte("\r"))
			k.Secret = b
		default:
			return nil, fmt.Errorf("%w: %s has neither secret nor secret_file", ErrKeys, name)
		}
		if kj.RetireAt != "" {
			t, err := time.Parse(time.RFC3339, kj.RetireAt)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: retire_at is not RFC 3339 (2026-12-05T00:00:00Z): %v", ErrKeys, name, err)
			}
			k.RetireAt = t
		}
		keys = append(keys, k)
	}
	return NewRing(keys)
}
