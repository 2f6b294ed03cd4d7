package jwtauth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
)

// MaxJWKS bounds a JWKS document, in bytes.
const MaxJWKS = 1 << 20

// MaxKeys bounds the keys kept from one JWKS.
const MaxKeys = 100

// MinRSABits is the smallest RSA modulus accepted.
const MinRSABits = 2048

// KeySet is a parsed JWKS: the public signing keys Levee can use, by key
// id. It is immutable.
type KeySet struct {
	keys map[string]key
	// Skipped is how many entries were left out: not signing keys
	// (use "enc"), or of a type or size Levee does not verify (RSA under
	// 2048 bits, EC curves other than P-256, …).
	Skipped int
}

type key struct {
	alg string // the only algorithm this key verifies: EdDSA, ES256 or RS256
	pub any
}

// Len is the number of usable keys.
func (s *KeySet) Len() int { return len(s.keys) }

// lookup returns the key for kid; an empty kid is accepted when the set
// holds exactly one key.
func (s *KeySet) lookup(kid string) (key, bool) {
	if kid == "" && len(s.keys) == 1 {
		for _, k := range s.keys {
			return k, true
		}
	}
	k, ok := s.keys[kid]
	return k, ok
}

// ParseJWKS reads a JWK Set (RFC 7517 §5) with go-jose. It keeps the
// public keys usable for EdDSA (OKP Ed25519), ES256 (EC P-256) and RS256
// (RSA, at least MinRSABits), each under its "kid" and for one algorithm
// only (the key's "alg" if given must be that one). A set is refused
// (ErrJWKS) when it is not JSON, holds a private or symmetric key (a
// configuration mistake that must not go unnoticed), repeats a kid, has a
// key without a kid next to others, or has no usable key at all. Entries
// of other kinds are skipped and counted in Skipped.
func ParseJWKS(data []byte) (*KeySet, error) {
	if len(data) > MaxJWKS {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrJWKS, MaxJWKS)
	}
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrJWKS, err)
	}
	if len(raw.Keys) > MaxKeys {
		return nil, fmt.Errorf("%w: %d keys, at most %d", ErrJWKS, len(raw.Keys), MaxKeys)
	}
	s := &KeySet{keys: make(map[string]key, len(raw.Keys))}
	for i, r := range raw.Keys {
		var meta struct {
			Kty string `json:"kty"`
			D   any    `json:"d"`
			K   any    `json:"k"`
		}
		if err := json.Unmarshal(r, &meta); err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrJWKS, i, err)
		}
		if meta.D != nil || meta.K != nil || meta.Kty == "oct" {
			return nil, fmt.Errorf("%w: key %d is a private or symmetric key; a JWKS for verification holds public keys only", ErrJWKS, i)
		}
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(r); err != nil {
			s.Skipped++ // a kind go-jose does not read (or a broken one)
			continue
		}
		if !jwk.Valid() || !jwk.IsPublic() || jwk.Use != "" && jwk.Use != "sig" {
			s.Skipped++
			continue
		}
		alg, ok := algOf(jwk.Key)
		if !ok || jwk.Algorithm != "" && jwk.Algorithm != alg {
			s.Skipped++
			continue
		}
		if _, dup := s.keys[jwk.KeyID]; dup {
			return nil, fmt.Errorf("%w: kid %q appears twice", ErrJWKS, jwk.KeyID)
		}
		s.keys[jwk.KeyID] = key{alg: alg, pub: jwk.Key}
	}
	if len(s.keys) == 0 {
		return nil, fmt.Errorf("%w: no usable key (EdDSA Ed25519, ES256 P-256, RS256 of at least %d bits); %d skipped", ErrJWKS, MinRSABits, s.Skipped)
	}
	if _, ok := s.keys[""]; ok && len(s.keys) > 1 {
		return nil, fmt.Errorf("%w: a key without a kid next to others; give every key a kid", ErrJWKS)
	}
	return s, nil
}

// algOf is the one algorithm a public key verifies here.
func algOf(pub any) (string, bool) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return "EdDSA", len(k) == ed25519.PublicKeySize
	case *ecdsa.PublicKey:
		return "ES256", k.Curve == elliptic.P256()
	case *rsa.PublicKey:
		return "RS256", k.N.BitLen() >= MinRSABits
	}
	return "", false
}
