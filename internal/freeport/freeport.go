// Package freeport picks loopback TCP ports for tests that hand a port to
// a server that binds it later: a child process, or a listener closed and
// opened again.
//
// Port 0 is no good for that: the kernel answers it from its ephemeral
// range (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default),
// the range it also takes the source ports of outgoing connections from,
// so the port may be some connection's source port by the time the server
// binds it ("address already in use"). Addr picks outside that range, from
// the larger stretch below it (from 10000) or above it, and checks that it
// can bind the port there.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// RangeFile is where Linux keeps the ephemeral range.
const RangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// The ephemeral range assumed when RangeFile cannot be read (Linux's
// default).
const (
	DefaultLow  = 32768
	DefaultHigh = 60999
)

// lowest is the lowest port handed out: below it are the well-known and
// the registered ports services commonly sit on.
const lowest = 10000

// ErrNoPort is returned when no free port was found outside the range.
var ErrNoPort = errors.New("freeport: no free port outside the ephemeral range")

// EphemeralRange reads the kernel's ephemeral range from RangeFile, or
// returns Linux's default when it cannot be read (another OS).
func EphemeralRange() (lo, hi int) {
	b, err := os.ReadFile(RangeFile)
	if err != nil {
		return DefaultLow, DefaultHigh
	}
	lo, hi, err = ParseRange(string(b))
	if err != nil {
		return DefaultLow, DefaultHigh
	}
	return lo, hi
}

// ParseRange parses RangeFile's content: two port numbers, low then high.
func ParseRange(s string) (lo, hi int, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("freeport: %s: want two ports, got %q", RangeFile, s)
	}
	if lo, err = strconv.Atoi(f[0]); err == nil {
		hi, err = strconv.Atoi(f[1])
	}
	if err != nil || lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("freeport: %s: %q is not a port range", RangeFile, s)
	}
	return lo, hi, nil
}

// Stretch is the larger run of ports outside the range [lo, hi]: from
// 10000 up to lo, or from above hi up to 65535; first, and n ports.
func Stretch(lo, hi int) (first, n int) {
	below, above := lo-lowest, 65535-hi
	if below >= above {
		return lowest, max(below, 0)
	}
	return hi + 1, above
}

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Pick returns "127.0.0.1:PORT" for a port outside the ephemeral range that
// it could bind just now and has not returned before in this process.
// Another process may still take it first; tests in parallel processes
// pick at random over thousands of ports, which makes that rare.
func Pick() (string, error) {
	first, n := Stretch(EphemeralRange())
	if n < 100 {
		return "", fmt.Errorf("%w: the range in %s leaves %d ports", ErrNoPort, RangeFile, n)
	}
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		p := first + rand.IntN(n)
		if given[p] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use
		}
		if err := l.Close(); err != nil {
			return "", fmt.Errorf("freeport: closing %s: %w", addr, err)
		}
		given[p] = true
		return addr, nil
	}
	return "", fmt.Errorf("%w: 1000 tries in %d-%d", ErrNoPort, first, first+n-1)
}

// Addr is Pick for a test: it fails the test when no port is found.
func Addr(tb testing.TB) string {
	tb.Helper()
	addr, err := Pick()
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}
