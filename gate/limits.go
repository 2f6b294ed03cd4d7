package gate

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/apperr"
)

// Limits per source address and per player (issue 22, part 5).
//
// Per source address, before anything else of a connection is looked at
// (the token check included, which costs an HMAC or a signature check):
// a handshake rate (a token bucket per address bucket) and a cap on open
// connections per address bucket. An address bucket is the /24 of an IPv4
// address and the /64 of an IPv6 one, so a host cannot dodge the limit by
// rotating through its addresses, and the defaults are generous enough for
// a carrier NAT that puts thousands of players behind a few addresses.
// Addresses in -addr-limit-exempt (loopback and private ranges by
// default: load tests, and a load balancer that hides the players'
// addresses when -trusted-proxies is not set) are not limited.
//
// The source address is the TCP peer's, unless the peer is one of
// -trusted-proxies: then it is the rightmost X-Forwarded-For hop that is
// not a trusted proxy (sourceAddr).
//
// Per player, across all of the player's connections on this gate: a
// request rate (a token bucket per player id, kept after the connection
// ends until it would be full again, so reconnecting does not refill it).
//
// Both tables are bounded in size and swept of entries that hold nothing
// (a full bucket and, for addresses, no open connection); the time is
// passed in.

// Defaults of the limits.
const (
	defaultAddrHandshakeRate  = 50
	defaultAddrHandshakeBurst = 200
	defaultAddrMaxConns       = 500
	defaultPlayerRate         = 30
	defaultPlayerBurst        = 60
)

// defaultAddrLimitExempt are the ranges not limited per address by
// default: loopback, RFC 1918, IPv6 unique local.
var defaultAddrLimitExempt = []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"}

// Table bounds: at most this many address buckets and player buckets are
// kept; sweeps run at most every sweepEvery unless a table is full.
const (
	maxAddrEntries   = 1 << 17
	maxPlayerEntries = 1 << 20
	sweepEvery       = 10 * time.Second
	playerShards     = 32
)

// parsePrefixes reads a CIDR list (an address alone is its /32 or /128);
// "none" is the empty list.
func parsePrefixes(flag string, list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" || strings.EqualFold(s, "none") {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("-%s: %q is not a CIDR or an address", flag, s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func inPrefixes(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ErrBadSourceAddr is returned by sourceAddr when the peer's address
// cannot be read.
var ErrBadSourceAddr = errors.New("gate: unreadable source address")

// sourceAddr is the player's address: the TCP peer (remoteAddr, as
// net/http gives it: "host:port") or, when that peer is a trusted proxy,
// the rightmost hop of the X-Forwarded-For headers (xff, in order; each a
// comma-separated list) that is not a trusted proxy. If every hop is
// trusted, it is the leftmost one; if the hop to take cannot be read, it
// is the last trusted one before it (the proxy that appended it), so a
// client cannot pick its own address by sending garbage.
func sourceAddr(remoteAddr string, xff []string, trusted []netip.Prefix) (netip.Addr, error) {
	peer, err := parseHostAddr(remoteAddr)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(trusted) == 0 || len(xff) == 0 || !inPrefixes(peer, trusted) {
		return peer, nil
	}
	cur := peer
	for i := len(xff) - 1; i >= 0; i-- {
		h := xff[i]
		for h != "" {
			var hop string
			if j := strings.LastIndexByte(h, ','); j >= 0 {
				hop, h = h[j+1:], h[:j]
			} else {
				hop, h = h, ""
			}
			hop = strings.TrimSpace(hop)
			if hop == "" {
				continue
			}
			a, err := parseHostAddr(hop)
			if err != nil {
				return cur, nil
			}
			if !inPrefixes(a, trusted) {
				return a, nil
			}
			cur = a
		}
	}
	return cur, nil
}

// parseHostAddr reads an address with or without a port ("1.2.3.4",
// "1.2.3.4:80", "[::1]:80", "::1"); IPv4-mapped IPv6 addresses are
// unmapped and zones dropped.
func parseHostAddr(s string) (netip.Addr, error) {
	// The usual forms first, each with the one parse that takes it, so
	// the common case does not build errors: "a.b.c.d:port" and
	// "[v6]:port" (a peer), "a.b.c.d" and "v6" (a forwarded hop).
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			return ap.Addr().Unmap().WithZone(""), nil
		}
	} else if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), nil
	}
	host := s
	if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: %q", ErrBadSourceAddr, s)
	}
	return a.Unmap().WithZone(""), nil
}

// addrBucket is the address bucket limits are counted by: the /24 of an
// IPv4 address, the /64 of an IPv6 one.
func addrBucket(a netip.Addr) netip.Addr {
	bits := 64
	if a.Is4() {
		bits = 24
	}
	p, _ := a.Prefix(bits)
	return p.Addr()
}

// Why an address limit refused a connection.
const (
	addrOK        = iota
	addrRateLimit // the handshake rate
	addrConnLimit // the open connections
	addrTableFull // no room to count a new address bucket
)

// addrLimits counts handshakes and open connections per address bucket.
type addrLimits struct {
	rate     float64 // handshakes per second; 0: no rate limit
	burst    int
	maxConns int // 0: no cap
	exempt   []netip.Prefix

	mu        sync.Mutex
	m         map[netip.Addr]*addrEntry
	lastSweep time.Time
}

type addrEntry struct {
	b    tokenBucket
	open int
}

func newAddrLimits(rate float64, burst, maxConns int, exempt []netip.Prefix) *addrLimits {
	return &addrLimits{rate: rate, burst: burst, maxConns: maxConns, exempt: exempt, m: map[netip.Addr]*addrEntry{}}
}

// on reports whether any address limit is set.
func (l *addrLimits) on() bool { return l != nil && (l.rate > 0 || l.maxConns > 0) }

// admit decides a connection from a at now. When admitted and counted
// (key valid), the caller gives the connection back with release(key).
// Refused, it says why and, for the rate, when a handshake is allowed
// again.
func (l *addrLimits) admit(a netip.Addr, now time.Time) (key netip.Addr, why int, wait time.Duration) {
	if !l.on() || inPrefixes(a, l.exempt) {
		return netip.Addr{}, addrOK, 0
	}
	key = addrBucket(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil {
		if len(l.m) >= maxAddrEntries || now.Sub(l.lastSweep) >= sweepEvery {
			l.sweep(now)
		}
		if len(l.m) >= maxAddrEntries {
			return netip.Addr{}, addrTableFull, 0
		}
		e = &addrEntry{}
		if l.rate > 0 {
			e.b = newTokenBucket(l.rate, l.burst, now)
		}
		l.m[key] = e
	}
	if l.maxConns > 0 && e.open >= l.maxConns {
		return netip.Addr{}, addrConnLimit, 0
	}
	if l.rate > 0 {
		if w, ok := e.b.allow(now); !ok {
			return netip.Addr{}, addrRateLimit, w
		}
	}
	e.open++
	return key, addrOK, 0
}

// release gives back a connection admit counted; the zero key does nothing.
func (l *addrLimits) release(key netip.Addr) {
	if l == nil || !key.IsValid() {
		return
	}
	l.mu.Lock()
	if e := l.m[key]; e != nil && e.open > 0 {
		e.open--
	}
	l.mu.Unlock()
}

// sweep drops the buckets that hold nothing at now: no open connection
// and a full bucket (l.mu held).
func (l *addrLimits) sweep(now time.Time) {
	l.lastSweep = now
	for k, e := range l.m {
		if e.open == 0 && (l.rate <= 0 || e.b.tokens(now) >= float64(l.burst)) {
			delete(l.m, k)
		}
	}
}

// size is the number of address buckets kept (for tests).
func (l *addrLimits) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// playerLimits is the request rate per player id, across the player's
// connections on this gate.
type playerLimits struct {
	rate   float64 // 0: off
	burst  int
	seed   maphash.Seed
	shards [playerShards]playerShard
}

type playerShard struct {
	mu        sync.Mutex
	m         map[string]*tokenBucket
	lastSweep time.Time
}

func newPlayerLimits(rate float64, burst int) *playerLimits {
	l := &playerLimits{rate: rate, burst: burst, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = map[string]*tokenBucket{}
	}
	return l
}

func (l *playerLimits) on() bool { return l != nil && l.rate > 0 }

// allow takes one of player's tokens at now, or says how long until there
// is one. When its shard is full of players who all hold tokens, a new
// player is let through uncounted: the table cannot grow past its bound,
// and the per-connection limit still applies.
func (l *playerLimits) allow(player string, now time.Time) (time.Duration, bool) {
	sh := &l.shards[maphash.String(l.seed, player)%playerShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.m[player]
	if b == nil {
		if len(sh.m) >= maxPlayerEntries/playerShards || now.Sub(sh.lastSweep) >= sweepEvery {
			sh.lastSweep = now
			for k, v := range sh.m {
				if v.tokens(now) >= float64(l.burst) {
					delete(sh.m, k)
				}
			}
		}
		if len(sh.m) >= maxPlayerEntries/playerShards {
			return 0, true
		}
		nb := newTokenBucket(l.rate, l.burst, now)
		b = &nb
		sh.m[player] = b
	}
	w, ok := b.allow(now)
	return w, ok
}

// size is the number of player buckets kept (for tests).
func (l *playerLimits) size() int {
	n := 0
	for i := range l.shards {
		l.shards[i].mu.Lock()
		n += len(l.shards[i].m)
		l.shards[i].mu.Unlock()
	}
	return n
}

// newLimits builds the limits cfg turns on (Validate has checked it).
func (s *Server) newLimits() error {
	exempt, err := parsePrefixes("addr-limit-exempt", s.cfg.AddrLimitExempt)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if s.trusted, err = parsePrefixes("trusted-proxies", s.cfg.TrustedProxies); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if s.cfg.addrLimitOn() {
		s.addrs = newAddrLimits(s.cfg.AddrHandshakeRate, s.cfg.AddrHandshakeBurst, s.cfg.AddrMaxConns, exempt)
	}
	if s.cfg.playerLimitOn() {
		s.pLimits = newPlayerLimits(s.cfg.PlayerRate, s.cfg.PlayerBurst)
	}
	return nil
}

// Player-facing refusals of the limits.
var (
	errAddrRate   = fmt.Errorf("%w: too many connections are starting from your network, try again shortly", apperr.ErrRateLimited)
	errAddrConns  = fmt.Errorf("%w: too many players are connected from your network right now", apperr.ErrServerFull)
	errPlayerRate = fmt.Errorf("%w: too many requests from this player, slow down", apperr.ErrRateLimited)
)

// addrConnsRetryAfter is the retry_after of a refusal at the per-address
// connection cap, and of a full address table: connections end at the
// players' pace, so a while.
const addrConnsRetryAfter = 10 * time.Second

// admitAddr applies the address limits to r before anything else of it is
// looked at. Admitted, it returns the key to give back with
// s.addrs.release once the connection is over (the zero key for none);
// refused, it has answered r (a RATE_LIMITED or SERVER_FULL frame with its
// retry_after, then close 1013), counted the refusal and returns false.
func (s *Server) admitAddr(w http.ResponseWriter, r *http.Request) (netip.Addr, bool) {
	if !s.addrs.on() {
		return netip.Addr{}, true
	}
	a, err := sourceAddr(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), s.trusted)
	if err != nil {
		return netip.Addr{}, true // not an IP peer (a test's pipe): nothing to count by
	}
	key, why, wait := s.addrs.admit(a, s.clock.Now())
	switch why {
	case addrOK:
		return key, true
	case addrRateLimit:
		s.m.rejectAddrRate.Inc()
		retry := max(ceilMillis(wait), time.Millisecond)
		s.refuseUpgraded(w, r, s.errorFrames(apperr.Reply(errAddrRate, retry), websocket.CloseTryAgainLater, "rate limited"))
	default:
		s.m.rejectAddrConns.Inc()
		s.refuseUpgraded(w, r, s.errorFrames(apperr.Reply(errAddrConns, jitter(addrConnsRetryAfter)), websocket.CloseTryAgainLater, fullCloseReason))
	}
	return netip.Addr{}, false
}
