package gate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"levee/internal/token"
)

func TestTicketRoundTripAndRefusals(t *testing.T) {
	secret := []byte("k")
	now := t0
	tok := signTicket(secret, 0xabc, 42, "alice", now.Add(time.Hour))
	c, err := verifyTicket(secret, tok, "alice", now)
	if err != nil || c.Line != 0xabc || c.ID != 42 || c.Player != "alice" || !c.Expiry.Equal(now.Add(time.Hour)) {
		t.Fatalf("verify: %+v %v", c, err)
	}
	parts := strings.Split(tok, ".")
	swap := func(i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, ".")
	}
	playerTok, _ := token.Sign(secret, "alice", now.Add(time.Hour))
	for _, tc := range []struct {
		name, tok, player string
		at                time.Time
		want              error
	}{
		{"other player", tok, "bob", now, ErrTicketPlayer},
		{"expired", tok, "alice", now.Add(time.Hour), ErrTicketExpired},
		{"other secret", signTicket([]byte("x"), 0xabc, 42, "alice", now.Add(time.Hour)), "alice", now, ErrTicketSignature},
		{"id changed", swap(2, "2b"), "alice", now, ErrTicketSignature},
		{"line changed", swap(1, "abd"), "alice", now, ErrTicketSignature},
		{"expiry extended", swap(4, "9999999999"), "alice", now, ErrTicketSignature},
		{"player swapped", swap(3, "Ym9i"), "bob", now, ErrTicketSignature},
		{"version", swap(0, "t2"), "alice", now, ErrTicketMalformed},
		{"a player token", playerTok, "alice", now, ErrTicketMalformed},
		{"empty", "", "alice", now, ErrTicketMalformed},
		{"space", tok + " ", "alice", now, ErrTicketMalformed},
		{"too long", strings.Repeat("a", 300), "alice", now, ErrTicketMalformed},
		{"bad signature encoding", swap(5, "!!"), "alice", now, ErrTicketMalformed},
	} {
		if _, err := verifyTicket(secret, tc.tok, tc.player, tc.at); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// A ticket is not a player token either.
	if _, err := token.Verify(secret, tok, now); err == nil {
		t.Fatal("a ticket passed as a player token")
	}
}

func FuzzVerifyTicket(f *testing.F) {
	secret := []byte("k")
	f.Add(signTicket(secret, 1, 2, "alice", t0.Add(time.Hour)))
	f.Add("t1.....")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := verifyTicket(secret, tok, "alice", t0)
		if err == nil && (c.Player != "alice" || tok != signTicket(secret, c.Line, c.ID, c.Player, c.Expiry)) {
			t.Fatalf("%q verified as %+v but is not what signTicket makes", tok, c)
		}
	})
}
