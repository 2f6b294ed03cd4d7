package target

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
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
	if err := LoopbackOnly("tcp", "127.0.0.1:80", nil); err != nil {
		t.Error(err)
	}
	if err := LoopbackOnly("tcp6", "[::1]:80", nil); err != nil {
		t.Error(err)
	}
	if err := LoopbackOnly("tcp", "10.0.0.1:80", nil); !errors.Is(err, ErrNonLocal) {
		t.Errorf("10.0.0.1: %v", err)
	}
}

func TestCheckHTTP(t *testing.T) {
	res := fakeResolver{"localhost": {"127.0.0.1"}, "example.com": {"93.184.215.14"}}
	ctx := context.Background()
	for _, u := range []string{"http://127.0.0.1:8082/admin/line", "https://localhost/metrics", "http://[::1]:9/"} {
		if err := CheckHTTP(ctx, "-admin-url", u, res); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
	for _, u := range []string{"http://10.0.0.1/admin/line", "http://example.com/", "http://nowhere.invalid/"} {
		if err := CheckHTTP(ctx, "-admin-url", u, res); !errors.Is(err, ErrNonLocal) || !strings.Contains(err.Error(), "-admin-url") {
			t.Errorf("%s: err = %v, want ErrNonLocal naming -admin-url", u, err)
		}
	}
	for _, u := range []string{"ws://127.0.0.1/ws", "127.0.0.1:8082", "http:///x"} {
		if err := CheckHTTP(ctx, "-admin-url", u, res); err == nil || errors.Is(err, ErrNonLocal) || !strings.Contains(err.Error(), "-admin-url") {
			t.Errorf("%s: err = %v, want a malformed-URL error naming -admin-url", u, err)
		}
	}
}

func TestParseSourceAddr(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.2": "127.0.0.2", "::1": "::1", "::ffff:127.0.0.3": "127.0.0.3"} {
		if got, err := ParseSourceAddr(in); err != nil || got.String() != want {
			t.Errorf("ParseSourceAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "127.0.0.2:80", "10.0.0.1", "localhost"} {
		if _, err := ParseSourceAddr(in); err == nil || !strings.Contains(err.Error(), "-source-addr") {
			t.Errorf("ParseSourceAddr(%q): err = %v, want one naming -source-addr", in, err)
		}
	}
}

// The dialer's connections come from the source address, and it refuses a
// destination that is not loopback before connecting.
func TestNewDialer(t *testing.T) {
	from := make(chan string, 1)
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from <- r.RemoteAddr
		c, err := up.Upgrade(w, r, nil)
		if err == nil {
			c.Close()
		}
	}))
	defer srv.Close()
	d, err := NewDialer(5*time.Second, "127.0.0.2", false)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if host, _, _ := net.SplitHostPort(<-from); host != "127.0.0.2" {
		t.Errorf("the connection came from %s, want 127.0.0.2", host)
	}
	if _, _, err := d.Dial("ws://10.0.0.1:1/ws", nil); !errors.Is(err, ErrNonLocal) {
		t.Errorf("dial 10.0.0.1: err = %v, want ErrNonLocal", err)
	}
	if _, err := NewDialer(time.Second, "10.0.0.1", false); err == nil {
		t.Error("NewDialer took a source address that is not loopback")
	}
}

// A nil resolver is the system's: localhost resolves to loopback here.
func TestCheckTargetNilResolver(t *testing.T) {
	if err := CheckTarget(context.Background(), "ws://localhost:8080/ws", nil); err != nil {
		t.Fatalf("localhost with the system's resolver: %v", err)
	}
}
