package gate

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/queue"
)

// A ticket token names a place in one gate's admission line, so that a
// player who drops can come back to it. Its format, like the player token's
// but with its own version tag so neither passes for the other:
//
//	"t2.<line id, hex>.<ticket id, hex>.<base64url(player id)>.<joined unix ms>.<expiry unix>.<base64url(mac)>"
//
// mac is HMAC-SHA256, keyed with the gate's token secret, over everything
// before the last dot. The line id is drawn at random when a gate starts, so
// a ticket from another gate (or an earlier run of this one) is recognised
// as such. joined is when the player first joined a line (kept across
// rejoins), so that a line that never saw the ticket can put it back in
// its place (queue.Rejoin). The token only proves who the place was given
// to, since when and until when; whether the place still exists is the
// line's business.
//
// The older "t1.<line>.<id>.<player>.<expiry>.<mac>" (no join time) still
// verifies; its place can only be taken back in the line that issued it.
//
// An admission pass (Admitted.ticket) is a sibling with its own tag, given
// when the line lets a player in:
//
//	"a1.<line id, hex>.<ticket id, hex>.<base64url(player id)>.<admitted unix ms>.<expiry unix>.<base64url(mac)>"
//
// It says that the player was let in (playing) at admitted, so that a gate
// that never saw them (a restart, another gate) need not put them back in
// line (see line.enterPass). It is signed and verified exactly as a ticket,
// by verifyTicket, and refused for the same reasons.

// Errors of ticket verification. A player who presents a bad ticket is
// refused (see the package doc) and nothing about the line changes.
var (
	ErrTicketMalformed = errors.New("gate: malformed ticket")
	ErrTicketSignature = errors.New("gate: bad ticket signature")
	ErrTicketExpired   = errors.New("gate: ticket expired")
	ErrTicketPlayer    = errors.New("gate: ticket belongs to another player")
)

// ticketVersion tags ticket tokens; player tokens start with "v1.".
// ticketVersionV1 is the older format, without a join time.
// passVersion tags admission passes.
const (
	ticketVersion   = "t2"
	ticketVersionV1 = "t1"
	passVersion     = "a1"
)

// ticketTTL is how long a ticket token is valid: longer than any line is
// expected to last, as the line itself decides (by its grace period) how
// long an away player keeps their place.
const ticketTTL = 24 * time.Hour

// maxTicketLen bounds what verifyTicket reads (a 64-character player id
// makes a token of about 160 bytes).
const maxTicketLen = 256

// ticketClaims is what a verified ticket token says.
type ticketClaims struct {
	Line   uint64
	ID     queue.TicketID
	Player string
	// Joined is when the player joined the line (ms precision); zero for a
	// t1 ticket and a pass.
	Joined time.Time
	// Pass: an admission pass (a1); Admitted is when the player was let in
	// (ms precision).
	Pass     bool
	Admitted time.Time
	Expiry   time.Time
	// foreign: the ticket names another line than this gate's (set by
	// Server.ticketOf, not signed).
	foreign bool
}

var ticketB64 = base64.RawURLEncoding.Strict()

func ticketMAC(secret []byte, payload string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(payload))
	return h.Sum(nil)
}

// signTicket returns the token of ticket id in line for player, who joined
// at joined (kept in ms), valid until exp (whole seconds).
func signTicket(secret []byte, line uint64, id queue.TicketID, player string, joined, exp time.Time) string {
	return signPlace(secret, ticketVersion, line, id, player, joined, exp)
}

// signPass returns the admission pass of ticket id in line for player, let
// in at admitted (kept in ms), valid until exp (whole seconds).
func signPass(secret []byte, line uint64, id queue.TicketID, player string, admitted, exp time.Time) string {
	return signPlace(secret, passVersion, line, id, player, admitted, exp)
}

// signPlace signs a t2 ticket or an a1 pass: at is the join or admission
// time.
func signPlace(secret []byte, version string, line uint64, id queue.TicketID, player string, at, exp time.Time) string {
	var b strings.Builder
	b.Grow(120)
	b.WriteString(version)
	b.WriteByte('.')
	b.WriteString(strconv.FormatUint(line, 16))
	b.WriteByte('.')
	b.WriteString(strconv.FormatUint(uint64(id), 16))
	b.WriteByte('.')
	b.WriteString(ticketB64.EncodeToString([]byte(player)))
	b.WriteByte('.')
	b.WriteString(strconv.FormatInt(max(at.UnixMilli(), 0), 10))
	b.WriteByte('.')
	b.WriteString(strconv.FormatInt(exp.Unix(), 10))
	payload := b.String()
	return payload + "." + ticketB64.EncodeToString(ticketMAC(secret, payload))
}

// verifyTicket checks tok's signature (in constant time), its expiry at now
// and that it was given to player, for a ticket (t2, t1) or a pass (a1,
// claims.Pass). The errors are the ErrTicket* ones.
func verifyTicket(secret []byte, tok, player string, now time.Time) (ticketClaims, error) {
	if len(tok) > maxTicketLen {
		return ticketClaims{}, fmt.Errorf("%w: longer than %d bytes", ErrTicketMalformed, maxTicketLen)
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return ticketClaims{}, fmt.Errorf("%w: unexpected character at %d", ErrTicketMalformed, i)
		}
	}
	parts := strings.Split(tok, ".")
	switch {
	case len(parts) == 7 && (parts[0] == ticketVersion || parts[0] == passVersion):
	case len(parts) == 6 && parts[0] == ticketVersionV1:
	default:
		return ticketClaims{}, ErrTicketMalformed
	}
	last := parts[len(parts)-1]
	sig, err := ticketB64.DecodeString(last)
	if err != nil {
		return ticketClaims{}, ErrTicketMalformed
	}
	payload := tok[:len(tok)-len(last)-1]
	if !hmac.Equal(sig, ticketMAC(secret, payload)) {
		return ticketClaims{}, ErrTicketSignature
	}
	// Signed by this secret, so the fields are ours; parse them anyway.
	line, err1 := strconv.ParseUint(parts[1], 16, 64)
	id, err2 := strconv.ParseUint(parts[2], 16, 64)
	p, err3 := ticketB64.DecodeString(parts[3])
	exp, err4 := strconv.ParseInt(parts[len(parts)-2], 10, 64)
	var at time.Time
	var err5 error
	if len(parts) == 7 {
		var ms int64
		ms, err5 = strconv.ParseInt(parts[4], 10, 64)
		at = time.UnixMilli(ms)
	}
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || !token.ValidPlayerID(string(p)) {
		return ticketClaims{}, ErrTicketMalformed
	}
	c := ticketClaims{Line: line, ID: queue.TicketID(id), Player: string(p), Expiry: time.Unix(exp, 0)}
	if parts[0] == passVersion {
		c.Pass, c.Admitted = true, at
	} else {
		c.Joined = at
	}
	if !now.Before(c.Expiry) {
		return ticketClaims{}, ErrTicketExpired
	}
	if c.Player != player {
		return ticketClaims{}, ErrTicketPlayer
	}
	return c, nil
}
