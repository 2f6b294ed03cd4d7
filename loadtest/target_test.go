package loadtest

import (
	"context"
	"errors"
	"net"
	"testing"
)

type fakeResolver map[string][]string

func (f fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	ips, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, s := range ips {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, nil
}

func TestCheckTarget(t *testing.T) {
	res := fakeResolver{
		"localhost":   {"127.0.0.1", "::1"},
		"example.com": {"93.184.215.14"},
		"sneaky":      {"127.0.0.1", "10.0.0.2"},
	}
	ctx := context.Background()
	for _, u := range []string{
		"ws://127.0.0.1:8080/ws", "ws://localhost:8080/ws", "ws://[::1]:8080/ws", "wss://127.9.8.7/ws",
	} {
		if err := CheckTarget(ctx, u, res); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
	for _, u := range []string{
		"ws://10.0.0.1:8080/ws", "ws://example.com/ws", "ws://sneaky/ws", "ws://nowhere.invalid/ws",
		"ws://[::ffff:10.0.0.1]/ws", "ws://0.0.0.0:8080/ws", "ws://[2001:db8::1]/ws",
	} {
		err := CheckTarget(ctx, u, res)
		if !errors.Is(err, ErrNonLocal) {
			t.Errorf("%s: err = %v, want ErrNonLocal", u, err)
		}
	}
	// The system resolver knows localhost.
	if err := CheckTarget(ctx, "ws://localhost:8080/ws", net.DefaultResolver); err != nil {
		t.Errorf("localhost via the system resolver: %v", err)
	}
}

func TestLoopbackOnlyDialHook(t *testing.T) {
	if err := loopbackOnly("tcp", "127.0.0.1:80", nil); err != nil {
		t.Error(err)
	}
	if err := loopbackOnly("tcp6", "[::1]:80", nil); err != nil {
		t.Error(err)
	}
	if err := loopbackOnly("tcp", "10.0.0.1:80", nil); !errors.Is(err, ErrNonLocal) {
		t.Errorf("10.0.0.1: %v", err)
	}
}
