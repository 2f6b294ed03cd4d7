package gate

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func mustPrefixes(t testing.TB, list ...string) []netip.Prefix {
	t.Helper()
	ps, err := parsePrefixes("test", list)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestSourceAddr(t *testing.T) {
	lb := mustPrefixes(t, "10.0.0.0/8", "192.0.2.7")
	for _, tc := range []struct {
		name, peer string
		xff        []string
		trusted    []netip.Prefix
		want       string
	}{
		{"no proxies: the peer", "203.0.113.1:5000", []string{"198.51.100.1"}, nil, "203.0.113.1"},
		{"untrusted peer: its XFF is ignored", "203.0.113.1:5000", []string{"198.51.100.1"}, lb, "203.0.113.1"},
		{"trusted peer, one hop", "10.1.2.3:5000", []string{"198.51.100.1"}, lb, "198.51.100.1"},
		{"the rightmost untrusted hop, not a spoofed left one", "10.1.2.3:5000", []string{"1.1.1.1, 198.51.100.1, 10.9.9.9"}, lb, "198.51.100.1"},
		{"several headers read as one list", "10.1.2.3:5000", []string{"1.1.1.1", "198.51.100.1", "192.0.2.7"}, lb, "198.51.100.1"},
		{"all hops trusted: the leftmost", "10.1.2.3:5000", []string{"10.0.0.1, 10.0.0.2"}, lb, "10.0.0.1"},
		{"garbage hop: the proxy that appended it", "10.1.2.3:5000", []string{"1.1.1.1, not-an-ip"}, lb, "10.1.2.3"},
		{"garbage behind a trusted hop", "10.1.2.3:5000", []string{"evil, 10.0.0.5"}, lb, "10.0.0.5"},
		{"hop with a port", "10.1.2.3:5000", []string{"198.51.100.1:1234"}, lb, "198.51.100.1"},
		{"IPv6 hop", "10.1.2.3:5000", []string{"[2001:db8::1]:443"}, lb, "2001:db8::1"},
		{"IPv6 peer", "[2001:db8::2]:5000", nil, lb, "2001:db8::2"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.9]:5000", nil, nil, "203.0.113.9"},
		{"empty hops skipped", "10.1.2.3:5000", []string{" , 198.51.100.1 ,"}, lb, "198.51.100.1"},
	} {
		got, err := sourceAddr(tc.peer, tc.xff, tc.trusted)
		if err != nil || got.String() != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.name, got, err, tc.want)
		}
	}
	if _, err := sourceAddr("pipe", nil, nil); !errors.Is(err, ErrBadSourceAddr) {
		t.Fatalf("unreadable peer: %v", err)
	}
}

// FuzzSourceAddr: any peer and X-Forwarded-For give an address or an
// error, never a panic; an untrusted peer is always the answer; and the
// answer is the peer, a hop of the header, or an error.
func FuzzSourceAddr(f *testing.F) {
	f.Add("10.1.2.3:5000", "1.1.1.1, 198.51.100.1, 10.9.9.9")
	f.Add("203.0.113.1:80", "198.51.100.1")
	f.Add("[2001:db8::2]:5000", "[2001:db8::1]:443,,garbage")
	f.Add("10.0.0.1:1", "")
	f.Add("nonsense", "::ffff:1.2.3.4%eth0")
	trusted := mustPrefixes(f, "10.0.0.0/8", "2001:db8::/32")
	f.Fuzz(func(t *testing.T, peer, xff string) {
		got, err := sourceAddr(peer, []string{xff}, trusted)
		p, perr := parseHostAddr(peer)
		if perr != nil {
			if err == nil {
				t.Fatalf("unreadable peer %q gave %v", peer, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("readable peer %q: %v", peer, err)
		}
		if !inPrefixes(p, trusted) && got != p {
			t.Fatalf("untrusted peer %q: got %v", peer, got)
		}
		if got != p && !strings.Contains(xff, strings.TrimSuffix(strings.TrimPrefix(got.String(), "::ffff:"), "]")) {
			// An unmapped IPv4 may be written mapped in the header.
			if q, e := parseHostAddr(got.String()); e != nil || q != got {
				t.Fatalf("%v is neither the peer %q nor a hop of %q", got, peer, xff)
			}
		}
		if got.Zone() != "" || got.Is4In6() {
			t.Fatalf("%v: zone or mapped address", got)
		}
	})
}

func TestAddrBucket(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.77":             "203.0.113.0",
		"2001:db8:1:2:aaaa::1":     "2001:db8:1:2::",
		"2001:db8:1:2:ffff:ffff::": "2001:db8:1:2::",
	} {
		if got := addrBucket(netip.MustParseAddr(in)); got.String() != want {
			t.Errorf("addrBucket(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestAddrLimitsRateConnsExemptAndSweep(t *testing.T) {
	now := t0
	l := newAddrLimits(2, 3, 4, mustPrefixes(t, "127.0.0.0/8"))
	a := netip.MustParseAddr("203.0.113.1")
	b := netip.MustParseAddr("203.0.113.200") // the same /24
	var keys []netip.Addr
	for i := range 3 {
		k, why, _ := l.admit([]netip.Addr{a, b}[i%2], now)
		if why != addrOK {
			t.Fatalf("handshake %d refused (%d) within the burst", i, why)
		}
		keys = append(keys, k)
	}
	if _, why, wait := l.admit(a, now); why != addrRateLimit || wait != 500*time.Millisecond {
		t.Fatalf("past the burst: %d wait %v, want the rate limit and 500 ms", why, wait)
	}
	now = now.Add(500 * time.Millisecond)
	k, why, _ := l.admit(b, now)
	if why != addrOK {
		t.Fatalf("after a token's time: %d", why)
	}
	keys = append(keys, k)
	now = now.Add(time.Hour) // tokens plenty; 4 open
	if _, why, _ := l.admit(a, now); why != addrConnLimit {
		t.Fatalf("at 4 open: %d, want the connection cap", why)
	}
	l.release(keys[0])
	if _, why, _ := l.admit(a, now); why != addrOK {
		t.Fatalf("after a release: %d", why)
	}
	// Exempt and other buckets are not affected.
	for range 10 {
		if k, why, _ := l.admit(netip.MustParseAddr("127.0.0.9"), now); why != addrOK || k.IsValid() {
			t.Fatalf("exempt address: %d %v", why, k)
		}
	}
	if _, why, _ := l.admit(netip.MustParseAddr("198.51.100.1"), now); why != addrOK {
		t.Fatalf("another /24: %d", why)
	}
	// Buckets with open connections stay; an idle full one is swept.
	if n := l.size(); n != 2 {
		t.Fatalf("%d buckets, want 2", n)
	}
	l.mu.Lock()
	l.sweep(now.Add(time.Hour))
	l.mu.Unlock()
	if n := l.size(); n != 2 {
		t.Fatalf("after a sweep with connections open: %d buckets, want 2", n)
	}
	for _, k := range keys[1:] {
		l.release(k)
	}
	l.release(addrBucket(a)) // the one admitted after the release
	l.mu.Lock()
	l.sweep(now.Add(time.Hour))
	l.mu.Unlock()
	if n := l.size(); n != 1 {
		t.Fatalf("after the /24's connections ended: %d buckets, want 1 (198.51.100.0)", n)
	}
}

// The address table never grows past its bound: a flood of distinct
// networks, each holding a connection, is refused once it is full.
func TestAddrLimitsTableBounded(t *testing.T) {
	l := newAddrLimits(1, 1, 10, nil)
	for i := range maxAddrEntries {
		a := netip.AddrFrom4([4]byte{byte(i >> 16), byte(i >> 8), byte(i), 1})
		if _, why, _ := l.admit(a, t0); why != addrOK {
			t.Fatalf("entry %d refused: %d", i, why)
		}
	}
	if _, why, _ := l.admit(netip.MustParseAddr("2001:db8::1"), t0.Add(time.Hour)); why != addrTableFull {
		t.Fatalf("a full table: %d, want addrTableFull", why)
	}
	if n := l.size(); n != maxAddrEntries {
		t.Fatalf("%d entries", n)
	}
}

func TestPlayerLimits(t *testing.T) {
	l := newPlayerLimits(1, 2)
	now := t0
	for i := range 2 {
		if _, ok := l.allow("alice", now); !ok {
			t.Fatalf("request %d refused within the burst", i)
		}
	}
	if wait, ok := l.allow("alice", now); ok || wait != time.Second {
		t.Fatalf("past the burst: %v %v, want refused for 1 s", wait, ok)
	}
	if _, ok := l.allow("bob", now); !ok {
		t.Fatal("bob pays for alice")
	}
	now = now.Add(time.Second)
	if _, ok := l.allow("alice", now); !ok {
		t.Fatal("alice after a token's time")
	}
	// Idle players' full buckets are swept when a new player comes to
	// their shard.
	now = now.Add(time.Hour)
	added := map[string]bool{}
	for _, p := range []string{"alice", "bob"} {
		shard := maphash.String(l.seed, p) % playerShards
		for i := 0; ; i++ {
			if q := fmt.Sprint("new", i); maphash.String(l.seed, q)%playerShards == shard {
				l.allow(q, now)
				added[q] = true
				break
			}
		}
	}
	if n := l.size(); n != len(added) {
		t.Fatalf("%d player buckets after the sweeps, want %d (the new ones)", n, len(added))
	}
}

// limitGate is a gate with the address limits on for loopback (no
// exemption): the tests' connections all come from 127.0.0.1.
func limitGate(t *testing.T, mod func(*Config)) *testGate {
	t.Helper()
	return startGate(t, func(c *Config) {
		c.AddrLimitExempt = []string{"none"}
		if mod != nil {
			mod(c)
		}
	}, startFakeLogic(t))
}

// dialStatus dials and returns the handshake's HTTP status on failure
// (0 when upgraded) and the socket.
func dialWS(rawURL string, h http.Header) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{wire.ProtoSubprotocol}}
	ws, _, err := d.Dial(rawURL, h)
	return ws, err
}

// 2,000 handshakes from one address: past the burst every one is refused
// RATE_LIMITED with a retry_after and close 1013, before its token is
// checked; the players let in are untouched.
func TestTwoThousandHandshakesFromOneAddress(t *testing.T) {
	const n, burst = 2000, 200
	g := limitGate(t, func(c *Config) {
		c.AddrHandshakeRate, c.AddrHandshakeBurst, c.AddrMaxConns = 50, burst, 0
	})
	url := g.wsURL(g.tokenFor(t, "bot"))
	type outcome struct {
		welcomed, limited bool
		retryMs           uint32
		close             int
	}
	out := make([]outcome, n)
	var mu sync.Mutex
	var open []*websocket.Conn
	t.Cleanup(func() {
		for _, ws := range open {
			_ = ws.Close()
		}
	})
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				ws, err := dialWS(url, nil)
				if err != nil {
					t.Errorf("dial %d: %v", i, err)
					continue
				}
				codec, _ := wire.ForSubprotocol(ws.Subprotocol())
				codec.Game = testTypes
				_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, b, err := ws.ReadMessage()
				if err != nil {
					// Let in, and replaced by a newer connection of "bot"
					// before its welcome went out.
					var ce *websocket.CloseError
					if !errors.As(err, &ce) || ce.Code != apperr.CloseReplaced {
						t.Errorf("read %d: %v", i, err)
					}
					out[i].welcomed = true
					_ = ws.Close()
					continue
				}
				f, _ := codec.DecodeServer(b, func(uint64) string { return "" })
				o := &out[i]
				switch {
				case f.GetWelcome() != nil:
					o.welcomed = true
					mu.Lock()
					open = append(open, ws)
					mu.Unlock()
					continue
				case f.GetError().GetCode() == leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED:
					o.limited, o.retryMs = true, f.GetError().GetRetryAfterMs()
				}
				_, _, err = ws.ReadMessage()
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					o.close = ce.Code
				}
				_ = ws.Close()
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	welcomed, limited := 0, 0 // welcomed: let in (some replaced before their welcome)
	for i, o := range out {
		switch {
		case o.welcomed:
			welcomed++
		case o.limited && o.retryMs > 0 && o.close == websocket.CloseTryAgainLater:
			limited++
		default:
			t.Fatalf("handshake %d: %+v, want a welcome or RATE_LIMITED with retry_after and 1013", i, o)
		}
	}
	// The clock does not move: exactly the burst gets in. Each of them is
	// one player id, so all but the last were replaced; that is the other
	// limit's business, and they were welcomed all the same.
	if welcomed != burst || limited != n-burst {
		t.Fatalf("%d welcomed, %d rate limited; want %d and %d", welcomed, limited, burst, n-burst)
	}
	if got := g.tokenChecks.Load(); got != burst {
		t.Fatalf("%d tokens checked, want %d: a refused handshake must not cost a token check", got, burst)
	}
	if got := testutil.ToFloat64(g.m.rejectAddrRate); got != n-burst {
		t.Fatalf("gate_rejections_total{addr_handshake_rate} = %v, want %d", got, n-burst)
	}
	testwait.Until(t, "the replaced ones to close", func() bool { return testutil.ToFloat64(g.m.active) == 1 })
	// After a token's time, one more gets in.
	g.clock.Advance(20 * time.Millisecond)
	c := dialRaw(t, url, wire.ProtoSubprotocol, nil)
	if f := c.recv(); f.GetWelcome() == nil {
		t.Fatalf("after the refill: %v", f)
	}
}

// The open-connection cap per address bucket: past it SERVER_FULL with a
// retry_after and 1013, before the token check; a connection that ends
// gives its place back.
func TestAddrMaxConns(t *testing.T) {
	g := limitGate(t, func(c *Config) { c.AddrHandshakeRate, c.AddrMaxConns = 0, 3 })
	var cs []*client
	for _, p := range []string{"a", "b", "c"} {
		c, _ := g.connect(t, p, wire.ProtoSubprotocol)
		cs = append(cs, c)
	}
	checks := g.tokenChecks.Load()
	e := g.refusedLimit(t, g.wsURL(g.tokenFor(t, "d")), leveev2.ErrorCode_ERROR_CODE_SERVER_FULL)
	if e.GetRetryAfterMs() < 8000 || e.GetRetryAfterMs() > 12000 || !strings.Contains(e.GetMessage(), "your network") {
		t.Fatalf("refusal %v", e)
	}
	if got := g.tokenChecks.Load(); got != checks {
		t.Fatal("the refused connection's token was checked")
	}
	// A refused connection (bad token) gives its count back too.
	_ = cs[0].ws.Close()
	testwait.Until(t, "a's connection to end", func() bool { return testutil.ToFloat64(g.m.active) == 2 })
	g.refusedLimit(t, g.wsURL("bad-token"), leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED)
	g.connect(t, "d", wire.ProtoSubprotocol)
	if got := testutil.ToFloat64(g.m.rejectAddrConns); got != 1 {
		t.Fatalf("gate_rejections_total{addr_conns} = %v, want 1", got)
	}
}

// refusedLimit dials and expects a typed refusal with code, then a close.
func (g *testGate) refusedLimit(t *testing.T, rawURL string, code leveev2.ErrorCode) *leveev2.Error {
	t.Helper()
	c := dialRaw(t, rawURL, wire.ProtoSubprotocol, nil)
	e := wantError(t, c.recv(), 0, code)
	c.recvClose()
	return e
}

// Behind a trusted proxy the X-Forwarded-For address is limited, by its
// /24; from any other peer the header is ignored.
func TestTrustedProxyForwardedFor(t *testing.T) {
	g := limitGate(t, func(c *Config) {
		c.AddrHandshakeRate, c.AddrMaxConns = 0, 1
		c.TrustedProxies = []string{"127.0.0.1/32"}
	})
	xff := func(a string) http.Header { return http.Header{"X-Forwarded-For": {a}} }
	c1 := dialRaw(t, g.wsURL(g.tokenFor(t, "a")), wire.ProtoSubprotocol, xff("203.0.113.5"))
	if f := c1.recv(); f.GetWelcome() == nil {
		t.Fatalf("first from 203.0.113.5: %v", f)
	}
	c2 := dialRaw(t, g.wsURL(g.tokenFor(t, "b")), wire.ProtoSubprotocol, xff("9.9.9.9, 203.0.113.77"))
	wantError(t, c2.recv(), 0, leveev2.ErrorCode_ERROR_CODE_SERVER_FULL)
	c3 := dialRaw(t, g.wsURL(g.tokenFor(t, "c")), wire.ProtoSubprotocol, xff("203.0.113.77, 198.51.100.1"))
	if f := c3.recv(); f.GetWelcome() == nil {
		t.Fatalf("from 198.51.100.1 (the rightmost hop): %v", f)
	}

	// Not trusted: 127.0.0.1 itself is the address, whatever the header says.
	h := limitGate(t, func(c *Config) { c.AddrHandshakeRate, c.AddrMaxConns = 0, 1 })
	d1 := dialRaw(t, h.wsURL(h.tokenFor(t, "a")), wire.ProtoSubprotocol, xff("203.0.113.5"))
	if f := d1.recv(); f.GetWelcome() == nil {
		t.Fatalf("first: %v", f)
	}
	d2 := dialRaw(t, h.wsURL(h.tokenFor(t, "b")), wire.ProtoSubprotocol, xff("198.51.100.1"))
	wantError(t, d2.recv(), 0, leveev2.ErrorCode_ERROR_CODE_SERVER_FULL)
}

// The player's request rate counts across its connections: a new
// connection (which replaces the old one) does not refill it.
func TestPlayerRateAcrossConnections(t *testing.T) {
	g := startGate(t, func(c *Config) {
		c.PlayerRate, c.PlayerBurst = 1, 2
		c.ConnRate, c.ConnBurst = 1000, 1000
	}, startFakeLogic(t))
	c1, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	for id := uint64(1); id <= 2; id++ {
		c1.send(profileFrame(id))
		if f := c1.recv(); !isProfile(f) {
			t.Fatalf("request %d: %v", id, f)
		}
	}
	c1.send(profileFrame(3))
	if e := wantError(t, c1.recv(), 3, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED); e.GetRetryAfterMs() != 1000 {
		t.Fatalf("retry_after %d ms, want 1000", e.GetRetryAfterMs())
	}
	c2, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	c2.send(profileFrame(4))
	wantError(t, c2.recv(), 4, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED)
	// Another player is not affected.
	b, _ := g.connect(t, "bob", wire.ProtoSubprotocol)
	b.send(profileFrame(5))
	if f := b.recv(); !isProfile(f) {
		t.Fatalf("bob: %v", f)
	}
	g.clock.Advance(time.Second)
	c2.send(profileFrame(6))
	if f := c2.recv(); !isProfile(f) {
		t.Fatalf("after a second: %v", f)
	}
	if got := testutil.ToFloat64(g.m.rejectRequest[reqPlayerRate]); got != 2 {
		t.Fatalf("gate_rejections_total{player_rate} = %v, want 2", got)
	}
}

func TestLimitConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		flag string
	}{
		{func(c *Config) { c.AddrHandshakeRate = -1 }, "-addr-handshake-rate"},
		{func(c *Config) { c.AddrHandshakeBurst = 0 }, "-addr-handshake-burst"},
		{func(c *Config) { c.AddrMaxConns = -1 }, "-addr-max-conns"},
		{func(c *Config) { c.PlayerBurst = 0 }, "-player-burst"},
		{func(c *Config) { c.AddrLimitExempt = []string{"10.0.0.0/33"} }, "-addr-limit-exempt"},
		{func(c *Config) { c.TrustedProxies = []string{"lb.example"} }, "-trusted-proxies"},
	} {
		cfg := DefaultConfig()
		cfg.LogicAddrs = []string{"127.0.0.1:1"}
		tc.mod(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: %v", tc.flag, err)
		}
	}
}

// BenchmarkAddrAdmitRefused is the cost of refusing a handshake at the
// per-address rate (the map look-up and the bucket), which must stay far
// below a token check.
func BenchmarkAddrAdmitRefused(b *testing.B) {
	l := newAddrLimits(1, 1, 0, nil)
	a := netip.MustParseAddr("203.0.113.1")
	l.admit(a, t0)
	b.ReportAllocs()
	for b.Loop() {
		if _, why, _ := l.admit(a, t0); why != addrRateLimit {
			b.Fatal(why)
		}
	}
}

// BenchmarkSourceAddrForwarded reads the source address behind a trusted
// proxy.
func BenchmarkSourceAddrForwarded(b *testing.B) {
	trusted := mustPrefixes(b, "10.0.0.0/8")
	xff := []string{"198.51.100.1, 10.0.0.7"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sourceAddr("10.1.2.3:5000", xff, trusted); err != nil {
			b.Fatal(err)
		}
	}
}
