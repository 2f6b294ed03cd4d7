package token

import (
	"errors"
	"os"
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

// exampleToken is ExampleSign's output.
const exampleToken = "v1.YWxpY2U.1767225600.-RW-b-OTZTbRELzzDo3jy1n9Kwra2B_XqaL_lEbKjWk"

// TestREADMEExample keeps the manual's description of the format (the
// Tokens section of docs/protocol.md) from rotting: it shows the example
// token, with the secret, player and expiry it is made of, and the token
// verifies.
func TestREADMEExample(t *testing.T) {
	readme, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{exampleToken, `"example-secret"`, `"alice"`, "1767225600"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("docs/protocol.md does not show %s", want)
		}
	}
	id, err := Verify([]byte("example-secret"), exampleToken, time.Unix(1767225600-1, 0))
	if err != nil || id != "alice" {
		t.Fatalf("the example does not verify: %q, %v", id, err)
	}
}

// TestExpiryHasOneSpelling: an expiry with a sign or a leading zero is
// malformed even when correctly signed, so a minter in another language
// cannot drift into a spelling only some verifiers take.
func TestExpiryHasOneSpelling(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, exp := range []string{"+2000000", "02000000", "-1", "", "99999999999999999999"} {
		payload := "v1." + b64.EncodeToString([]byte("alice")) + "." + exp
		tok := payload + "." + b64.EncodeToString(mac(secret, payload))
		if _, err := Verify(secret, tok, now); !errors.Is(err, ErrMalformed) {
			t.Errorf("expiry %q: err = %v, want ErrMalformed", exp, err)
		}
	}
	if _, err := Sign(secret, "alice", time.Unix(-1, 0)); !errors.Is(err, ErrMalformed) {
		t.Errorf("Sign before 1970: %v", err)
	}
}

func TestVerifyWithinMaxLifetime(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	const max = 24 * time.Hour
	atMax, _ := Sign(secret, "alice", now.Add(max))
	if id, err := VerifyWithin(secret, atMax, now, max); err != nil || id != "alice" {
		t.Fatalf("expiry exactly the lifetime ahead: %q, %v", id, err)
	}
	tooLong, _ := Sign(secret, "alice", now.Add(max+time.Second))
	if id, err := VerifyWithin(secret, tooLong, now, max); !errors.Is(err, ErrLifetime) || id != "" {
		t.Fatalf("expiry past the lifetime: %q, %v; want ErrLifetime", id, err)
	}
	// Only a valid token's lifetime is looked at: a forged one is forged.
	forged, _ := Sign([]byte("other"), "alice", now.Add(100*max))
	if _, err := VerifyWithin(secret, forged, now, max); !errors.Is(err, ErrSignature) {
		t.Fatalf("forged: %v", err)
	}
	// 0 means no bound, as Verify.
	if _, err := VerifyWithin(secret, tooLong, now, 0); err != nil {
		t.Fatalf("no bound: %v", err)
	}
	// Later, the same token is within the lifetime.
	if _, err := VerifyWithin(secret, tooLong, now.Add(time.Minute), max); err != nil {
		t.Fatalf("a minute later: %v", err)
	}
}
