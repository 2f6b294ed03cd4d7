// Package target keeps the load tool's traffic on this machine: it checks
// the URLs the tool is given (CheckTarget for the gate's WebSocket,
// CheckHTTP for the admin API and /metrics pages), refuses at dial time any
// destination that is not loopback (LoopbackOnly, a net.Dialer Control
// hook), and builds the bots' WebSocket dialer (NewDialer), which may bind
// connections to one 127.0.0.x source address with the port picked at
// connect (IP_BIND_ADDRESS_NO_PORT on Linux), so that one address reaches
// one gate port from the whole ephemeral range run after run.
package target

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// ErrNonLocal refuses a target that is not on this machine's loopback.
var ErrNonLocal = errors.New("target: not a loopback address")

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// CheckTarget accepts a ws:// or wss:// URL whose host is, or resolves only
// to, loopback addresses (127.0.0.0/8 or ::1). Anything else is ErrNonLocal.
func CheckTarget(ctx context.Context, rawURL string, res Resolver) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("-gate-urls: %w", err)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("-gate-urls %q: no host", rawURL)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !IsLoopback(ip) {
			return nonLocal(rawURL, host, ip.String())
		}
		return nil
	}
	if res == nil {
		res = net.DefaultResolver
	}
	addrs, err := res.LookupIPAddr(ctx, host)
	if err != nil {
		return fmt.Errorf("%w: -gate-urls %q: host %q does not resolve: %v", ErrNonLocal, rawURL, host, err)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%w: -gate-urls %q: host %q has no address", ErrNonLocal, rawURL, host)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || !IsLoopback(ip) {
			return nonLocal(rawURL, host, a.IP.String())
		}
	}
	return nil
}

func nonLocal(rawURL, host, addr string) error {
	return fmt.Errorf("%w: -gate-urls %q: host %q is %s; only 127.0.0.0/8 and ::1 are allowed (-allow-nonlocal overrides)",
		ErrNonLocal, rawURL, host, addr)
}

// IsLoopback reports whether ip is in 127.0.0.0/8 or is ::1 (an IPv4
// address mapped into IPv6 counts as its IPv4 self).
func IsLoopback(ip netip.Addr) bool { return ip.Unmap().IsLoopback() }

// LoopbackOnly is a net.Dialer Control hook: it refuses to connect to any
// address that is not loopback, whatever DNS says by the time of the dial.
func LoopbackOnly(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNonLocal, address, err)
	}
	if !IsLoopback(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrNonLocal, address)
	}
	return nil
}

// CheckHTTP accepts an http(s) URL whose host is, or resolves only to,
// loopback addresses; flag (e.g. "-admin-url") names it in the error, which
// wraps ErrNonLocal for a host that is not loopback.
func CheckHTTP(ctx context.Context, flag, rawURL string, res Resolver) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("%s: want an http URL on a loopback host, got %q", flag, rawURL)
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if !IsLoopback(ip) {
			return fmt.Errorf("%w: %s %q: %s is not loopback", ErrNonLocal, flag, rawURL, ip)
		}
		return nil
	}
	if res == nil {
		res = net.DefaultResolver
	}
	addrs, err := res.LookupIPAddr(ctx, host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("%w: %s %q: host %q does not resolve", ErrNonLocal, flag, rawURL, host)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); !ok || !IsLoopback(ip) {
			return fmt.Errorf("%w: %s %q: host %q is %s", ErrNonLocal, flag, rawURL, host, a.IP)
		}
	}
	return nil
}

// ParseSourceAddr reads -source-addr: an IP address on loopback
// (127.0.0.0/8 or ::1), without a port.
func ParseSourceAddr(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("-source-addr: not an IP address (no port): %q", s)
	}
	if !IsLoopback(ip) {
		return netip.Addr{}, fmt.Errorf("-source-addr: must be a loopback address (127.0.0.0/8 or ::1), got %s", ip)
	}
	return ip.Unmap(), nil
}

// NewDialer is the bots' WebSocket dialer: timeout bounds the TCP connect
// and the handshake; sourceAddr ("" for the system's choice) is the
// loopback address connections come from, with the port picked at connect
// (see withBindNoPort); unless allowNonlocal, only loopback destinations
// may be dialled. No proxy: bots talk to the target directly.
func NewDialer(timeout time.Duration, sourceAddr string, allowNonlocal bool) (*websocket.Dialer, error) {
	nd := &net.Dialer{Timeout: timeout}
	if !allowNonlocal {
		nd.Control = LoopbackOnly
	}
	if sourceAddr != "" {
		ip, err := ParseSourceAddr(sourceAddr)
		if err != nil {
			return nil, err
		}
		nd.LocalAddr = &net.TCPAddr{IP: ip.AsSlice()}
		// The port is then chosen at connect, per destination, instead of
		// at bind among the ports free on the address.
		nd.Control = withBindNoPort(nd.Control)
	}
	return &websocket.Dialer{NetDialContext: nd.DialContext, HandshakeTimeout: timeout}, nil
}

// HTTPClient is a plain HTTP client for the tool's own calls (the admin
// API, /metrics pages) whose requests time out after timeout and which,
// unless allowNonlocal, dials only loopback addresses.
func HTTPClient(timeout time.Duration, allowNonlocal bool) *http.Client {
	return HTTPSClient(timeout, allowNonlocal, nil)
}

// HTTPSClient is HTTPClient whose https:// requests use tlsCfg (nil: Go's
// defaults, the system roots), e.g. TLS.Config's for a gate's ops port
// served with the edge certificate.
func HTTPSClient(timeout time.Duration, allowNonlocal bool, tlsCfg *tls.Config) *http.Client {
	tr := &http.Transport{TLSClientConfig: tlsCfg, TLSHandshakeTimeout: timeout}
	if !allowNonlocal {
		nd := &net.Dialer{Timeout: timeout, Control: LoopbackOnly}
		tr.DialContext = nd.DialContext
	} else {
		tr.Proxy = http.ProxyFromEnvironment
	}
	return &http.Client{Timeout: timeout, Transport: tr}
}
