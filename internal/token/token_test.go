package token

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var secret = []byte("test-secret")

func TestRoundTrip(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tok, err := Sign(secret, "player-42", now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	id, err := Verify(secret, tok, now)
	if err != nil || id != "player-42" {
		t.Fatalf("Verify = %q, %v", id, err)
	}
}

func TestRejects(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	good, _ := Sign(secret, "alice", now.Add(time.Hour))
	other, _ := Sign([]byte("other"), "alice", now.Add(time.Hour))
	parts := strings.Split(good, ".")
	forgedID := parts[0] + "." + b64.EncodeToString([]byte("bob")) + "." + parts[2] + "." + parts[3]
	extended := parts[0] + "." + parts[1] + ".9999999999." + parts[3]
	cases := []struct {
		name string
		tok  string
		now  time.Time
		want error
	}{
		{"expired", good, now.Add(2 * time.Hour), ErrExpired},
		{"other secret", other, now, ErrSignature},
		{"forged id", forgedID, now, ErrSignature},
		{"extended expiry", extended, now, ErrSignature},
		{"empty", "", now, ErrMalformed},
		{"garbage", "v1.a.b", now, ErrMalformed},
		{"huge", strings.Repeat("a", 10_000), now, ErrMalformed},
	}
	for _, c := range cases {
		if _, err := Verify(secret, c.tok, c.now); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := Sign(secret, "bad id!", now); !errors.Is(err, ErrPlayerID) {
		t.Errorf("Sign bad id: %v", err)
	}
}

func FuzzVerifyToken(f *testing.F) {
	now := time.Unix(1_000_000, 0)
	good, _ := Sign(secret, "alice", now.Add(time.Hour))
	f.Add(good)
	f.Add("v1..0.")
	f.Add("v1.YWxpY2U.1.AAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := Verify(secret, tok, now)
		if err != nil {
			return
		}
		// Anything accepted must be a token we could have signed.
		if !ValidPlayerID(id) {
			t.Fatalf("accepted invalid id %q", id)
		}
		re, _ := Sign(secret, id, time.Unix(mustExp(t, tok), 0))
		if re != tok {
			t.Fatalf("accepted %q, which is not the canonical token %q", tok, re)
		}
	})
}

func mustExp(t *testing.T, tok string) int64 {
	parts := strings.Split(tok, ".")
	var n int64
	for _, c := range parts[2] {
		n = n*10 + int64(c-'0')
	}
	return n
}
