package gate

import (
	"crypto/hmac"
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
// before the last dot. A gate with a key ring (-token-keys) signs with its
// current key and names it, "t3.<key id>.<line id>…" (and "a2.<key id>.…"
// for a pass), the rest as t2 (a1); such a ticket verifies while its key is
// in the ring and not retired, so a rotation keeps the line's places. A
// t2, t1 or a1 ticket verifies with the key that verifies v1 player tokens
// (-token-secret, or the ring's "v1" key). The line id is drawn at random when a gate starts, so
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
	// ErrTicketKey wraps token.ErrUnknownKey or token.ErrRetiredKey: the
	// ticket names a key the ring does not hold or that has retired.
	ErrTicketKey = errors.New("gate: ticket key not accepted")
)

// ticketVersion tags ticket tokens; player tokens start with "v1.".
// ticketVersionV1 is the older format, without a join time.
// passVersion tags admission passes.
// ticketVersionKeyed and passVersionKeyed are t2 and a1 with a key id.
const (
	ticketVersion      = "t2"
	ticketVersionV1    = "t1"
	passVersion        = "a1"
	ticketVersionKeyed = "t3"
	passVersionKeyed   = "a2"
)

var (
	keyedVersion   = map[string]string{ticketVersion: ticketVersionKeyed, passVersion: passVersionKeyed}
	unkeyedVersion = map[string]string{ticketVersionKeyed: ticketVersion, passVersionKeyed: passVersion}
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

// signTicket returns the token of ticket id in line for player, who joined
// at joined (kept in ms), valid until exp (whole seconds), signed with k.
func signTicket(k *token.Key, line uint64, id queue.TicketID, player string, joined, exp time.Time) string {
	return signPlace(k, ticketVersion, line, id, player, joined, exp)
}

// signPass returns the admission pass of ticket id in line for player, let
// in at admitted (kept in ms), valid until exp (whole seconds), signed
// with k.
func signPass(k *token.Key, line uint64, id queue.TicketID, player string, admitted, exp time.Time) string {
	return signPlace(k, passVersion, line, id, player, admitted, exp)
}

// signPlace signs a ticket or a pass: at is the join or admission time. A
// key with an id (a -token-keys ring) gives the t3/a2 form that names it; the
// key of -token-secret, which has none, gives t2/a1 as before.
func signPlace(k *token.Key, version string, line uint64, id queue.TicketID, player string, at, exp time.Time) string {
	var b strings.Builder
	b.Grow(160)
	if k.ID != "" {
		version = keyedVersion[version]
	}
	b.WriteString(version)
	b.WriteByte('.')
	if k.ID != "" {
		b.WriteString(k.ID)
		b.WriteByte('.')
	}
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
	return payload + "." + ticketB64.EncodeToString(k.MAC(payload))
}

// verifyTicket checks tok's signature (in constant time), its expiry at now
// and that it was given to player, for a ticket (t2, t1) or a pass (a1,
// claims.Pass). The errors are the ErrTicket* ones.
func verifyTicket(ring *token.Ring, tok, player string, now time.Time) (ticketClaims, error) {
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
	kid := ""
	switch {
	case len(parts) == 8 && (parts[0] == ticketVersionKeyed || parts[0] == passVersionKeyed) && token.ValidKeyID(parts[1]):
		// t3/a2: as t2/a1 with the key id after the tag.
		kid = parts[1]
		parts = append(parts[:1:1], parts[2:]...)
		parts[0] = unkeyedVersion[parts[0]]
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
	k, err := ring.Lookup(kid, now)
	if err != nil {
		return ticketClaims{}, fmt.Errorf("%w: %w", ErrTicketKey, err)
	}
	payload := tok[:len(tok)-len(last)-1]
	if !hmac.Equal(sig, k.MAC(payload)) {
		return ticketClaims{}, ErrTicketSignature
	}
	// Signed by a key of ours, so the fields are ours; parse them anyway.
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
