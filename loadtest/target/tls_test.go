package target

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// Each gate URL gets its own session cache (Go keys sessions by host, so
// two gates on one host must not share one); the base dialer is not
// modified; NoSessionCache turns resumption off.
func TestDialersOneCachePerGate(t *testing.T) {
	base := &websocket.Dialer{}
	gates := []string{"wss://127.0.0.1:1/ws", "wss://127.0.0.1:2/ws", "wss://127.0.0.1:1/ws"}
	ds, err := TLS{}.Dialers(base, gates)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || base.TLSClientConfig != nil {
		t.Fatalf("%d dialers, base TLS %v", len(ds), base.TLSClientConfig)
	}
	a, b := ds[gates[0]].TLSClientConfig, ds[gates[1]].TLSClientConfig
	if a.ClientSessionCache == nil || b.ClientSessionCache == nil || a.ClientSessionCache == b.ClientSessionCache {
		t.Fatalf("session caches %p and %p: want one each", a.ClientSessionCache, b.ClientSessionCache)
	}
	if a.RootCAs != nil || a.InsecureSkipVerify {
		t.Fatal("the zero TLS does not use the system roots")
	}
	ds, err = TLS{NoSessionCache: true, InsecureSkipVerify: true}.Dialers(base, gates)
	if err != nil {
		t.Fatal(err)
	}
	if c := ds[gates[0]].TLSClientConfig; c.ClientSessionCache != nil || !c.SessionTicketsDisabled || !c.InsecureSkipVerify {
		t.Fatalf("NoSessionCache, InsecureSkipVerify: %+v", c)
	}
}

func TestTLSConfigCAFile(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.pem"), "-ca-file"},
		{junk, "no PEM certificate"},
	} {
		if _, err := (TLS{CAFile: c.file}).Config(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.file, err, c.want)
		}
	}
}
