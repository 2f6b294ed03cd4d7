package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
)

// ErrNonLocal refuses a target that is not on this machine's loopback.
var ErrNonLocal = errors.New("loadtest: target is not a loopback address")

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// CheckTarget accepts a ws:// or wss:// URL whose host is, or resolves only
// to, loopback addresses (127.0.0.0/8 or ::1). Anything else is ErrNonLocal.
func CheckTarget(ctx context.Context, rawURL string, res Resolver) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("-gate-url: %w", err)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("-gate-url %q: no host", rawURL)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !isLoopback(ip) {
			return nonLocal(rawURL, host, ip.String())
		}
		return nil
	}
	addrs, err := res.LookupIPAddr(ctx, host)
	if err != nil {
		return fmt.Errorf("%w: -gate-url %q: host %q does not resolve: %v", ErrNonLocal, rawURL, host, err)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%w: -gate-url %q: host %q has no address", ErrNonLocal, rawURL, host)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || !isLoopback(ip) {
			return nonLocal(rawURL, host, a.IP.String())
		}
	}
	return nil
}

func nonLocal(rawURL, host, addr string) error {
	return fmt.Errorf("%w: -gate-url %q: host %q is %s; only 127.0.0.0/8 and ::1 are allowed (-allow-nonlocal overrides)",
		ErrNonLocal, rawURL, host, addr)
}

func isLoopback(ip netip.Addr) bool { return ip.Unmap().IsLoopback() }

// loopbackOnly is a net.Dialer Control hook: it refuses to connect to any
// address that is not loopback, whatever DNS says by the time of the dial.
func loopbackOnly(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNonLocal, address, err)
	}
	if !isLoopback(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrNonLocal, address)
	}
	return nil
}
