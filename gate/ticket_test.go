package gate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/queue"
)

func TestTicketRoundTripAndRefusals(t *testing.T) {
	secret := []byte("k")
	now := t0
	joined := now.Add(-90*time.Second - 123*time.Millisecond)
	tok := signTicket(keyOf(secret), 0xabc, 42, "alice", joined, now.Add(time.Hour))
	c, err := verifyTicket(token.NewSecretRing(secret), tok, "alice", now)
	if err != nil || c.Line != 0xabc || c.ID != 42 || c.Player != "alice" || !c.Joined.Equal(joined) || !c.Expiry.Equal(now.Add(time.Hour)) || c.foreign {
		t.Fatalf("verify: %+v %v", c, err)
	}
	old := signTicketV1(secret, 0xabc, 42, "alice", now.Add(time.Hour))
	if c, err := verifyTicket(token.NewSecretRing(secret), old, "alice", now); err != nil || c.ID != 42 || !c.Joined.IsZero() {
		t.Fatalf("a t1 ticket: %+v %v", c, err)
	}
	admitted := now.Add(-30*time.Second - 7*time.Millisecond)
	pass := signPass(keyOf(secret), 0xabc, 42, "alice", admitted, now.Add(time.Hour))
	if c, err := verifyTicket(token.NewSecretRing(secret), pass, "alice", now); err != nil || !c.Pass || c.Line != 0xabc || c.ID != 42 || !c.Admitted.Equal(admitted) || !c.Joined.IsZero() {
		t.Fatalf("a pass: %+v %v", c, err)
	}
	oldParts := strings.Split(old, ".")
	parts := strings.Split(tok, ".")
	swapIn := func(parts []string, i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, ".")
	}
	swap := func(i int, v string) string { return swapIn(parts, i, v) }
	passParts := strings.Split(pass, ".")
	swapPass := func(i int, v string) string { return swapIn(passParts, i, v) }
	playerTok, _ := token.Sign(secret, "alice", now.Add(time.Hour))
	for _, tc := range []struct {
		name, tok, player string
		at                time.Time
		want              error
	}{
		{"other player", tok, "bob", now, ErrTicketPlayer},
		{"expired", tok, "alice", now.Add(time.Hour), ErrTicketExpired},
		{"other secret", signTicket(keyOf([]byte("x")), 0xabc, 42, "alice", joined, now.Add(time.Hour)), "alice", now, ErrTicketSignature},
		{"id changed", swap(2, "2b"), "alice", now, ErrTicketSignature},
		{"line changed", swap(1, "abd"), "alice", now, ErrTicketSignature},
		{"join time moved earlier", swap(4, "1"), "alice", now, ErrTicketSignature},
		{"expiry extended", swap(5, "9999999999"), "alice", now, ErrTicketSignature},
		{"player swapped", swap(3, "Ym9i"), "bob", now, ErrTicketSignature},
		{"version", swap(0, "t3"), "alice", now, ErrTicketMalformed},
		{"t2 tag on a t1 ticket", "t2" + old[2:], "alice", now, ErrTicketMalformed},
		{"t1 tag on a t2 ticket", "t1" + tok[2:], "alice", now, ErrTicketMalformed},
		{"t1 join time dropped", strings.Join(append(parts[:4:4], parts[5:]...), "."), "alice", now, ErrTicketMalformed},
		{"t1 other player", old, "bob", now, ErrTicketPlayer},
		{"t1 expired", old, "alice", now.Add(time.Hour), ErrTicketExpired},
		{"t1 expiry extended", strings.Join(append(oldParts[:4:4], "9999999999", oldParts[5]), "."), "alice", now, ErrTicketSignature},
		{"a player token", playerTok, "alice", now, ErrTicketMalformed},
		{"empty", "", "alice", now, ErrTicketMalformed},
		{"space", tok + " ", "alice", now, ErrTicketMalformed},
		{"too long", strings.Repeat("a", 300), "alice", now, ErrTicketMalformed},
		{"bad signature encoding", swap(6, "!!"), "alice", now, ErrTicketMalformed},
		{"pass: other player", pass, "bob", now, ErrTicketPlayer},
		{"pass: expired", pass, "alice", now.Add(time.Hour), ErrTicketExpired},
		{"pass: other secret", signPass(keyOf([]byte("x")), 0xabc, 42, "alice", admitted, now.Add(time.Hour)), "alice", now, ErrTicketSignature},
		{"pass: id changed", swapPass(2, "2b"), "alice", now, ErrTicketSignature},
		{"pass: line changed", swapPass(1, "abd"), "alice", now, ErrTicketSignature},
		{"pass: admission time moved", swapPass(4, "1"), "alice", now, ErrTicketSignature},
		{"pass: expiry extended", swapPass(5, "9999999999"), "alice", now, ErrTicketSignature},
		{"pass: player swapped", swapPass(3, "Ym9i"), "bob", now, ErrTicketSignature},
		{"pass tag on a ticket", passVersion + tok[2:], "alice", now, ErrTicketSignature},
		{"ticket tag on a pass", ticketVersion + pass[2:], "alice", now, ErrTicketSignature},
		{"pass: a field dropped", strings.Join(append(passParts[:4:4], passParts[5:]...), "."), "alice", now, ErrTicketMalformed},
		{"pass: version", swapPass(0, "a2"), "alice", now, ErrTicketMalformed},
		{"pass: bad signature encoding", swapPass(6, "!!"), "alice", now, ErrTicketMalformed},
		{"pass: too long", pass + strings.Repeat("A", 200), "alice", now, ErrTicketMalformed},
	} {
		if _, err := verifyTicket(token.NewSecretRing(secret), tc.tok, tc.player, tc.at); !errors.Is(err, tc.want) {
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
	f.Add(signTicket(keyOf(secret), 1, 2, "alice", t0.Add(-time.Minute), t0.Add(time.Hour)))
	f.Add(signTicketV1(secret, 1, 2, "alice", t0.Add(time.Hour)))
	f.Add("t1.....")
	f.Add("t2......")
	f.Add(signPass(keyOf(secret), 1, 2, "alice", t0.Add(-time.Second), t0.Add(time.Hour)))
	f.Add("a1......")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := verifyTicket(token.NewSecretRing(secret), tok, "alice", t0)
		if err != nil {
			return
		}
		want := signTicket(keyOf(secret), c.Line, c.ID, c.Player, c.Joined, c.Expiry)
		switch {
		case c.Pass:
			want = signPass(keyOf(secret), c.Line, c.ID, c.Player, c.Admitted, c.Expiry)
		case c.Joined.IsZero():
			want = signTicketV1(secret, c.Line, c.ID, c.Player, c.Expiry)
		}
		if c.Player != "alice" || tok != want {
			t.Fatalf("%q verified as %+v but is not what signTicket makes", tok, c)
		}
	})
}

// signTicketV1 makes a ticket of the older format, without a join time, as
// gates before the t2 format signed them.
func signTicketV1(secret []byte, line uint64, id queue.TicketID, player string, exp time.Time) string {
	payload := fmt.Sprintf("t1.%x.%x.%s.%d", line, uint64(id), ticketB64.EncodeToString([]byte(player)), exp.Unix())
	return payload + "." + ticketB64.EncodeToString(keyOf(secret).MAC(payload))
}

// keyOf is the ticket key of -token-secret secret (no key id: t2, a1).
func keyOf(secret []byte) *token.Key {
	k := token.NewSecretRing(secret).Current()
	return &k
}
