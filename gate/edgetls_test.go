package gate

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
	"github.com/leveehq/levee/internal/wire"
)

// tlsGate is a gate serving -tls-cert/-tls-key files f.
func tlsGate(t *testing.T, f tlstest.Files, logics ...*fakeLogic) *testGate {
	t.Helper()
	return startGate(t, func(c *Config) { c.TLSCert, c.TLSKey = f.Cert, f.Key }, logics...)
}

func (g *testGate) wssURL(tok string) string {
	u := url.URL{Scheme: "wss", Host: "localhost:" + portOf(g.Addr().String()), Path: "/ws", RawQuery: url.Values{"token": {tok}}.Encode()}
	return u.String()
}

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// dialWSS connects as player over wss, trusting roots, and returns the
// socket after its welcome and the server certificate's serial.
func dialWSS(t *testing.T, g *testGate, player string, cfg *tls.Config) (*client, string, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, TLSClientConfig: cfg, Subprotocols: []string{wire.ProtoSubprotocol}}
	ws, _, err := d.Dial(g.wssURL(g.tokenFor(t, player)), nil)
	if err != nil {
		return nil, "", err
	}
	t.Cleanup(func() { _ = ws.Close() })
	serial := ""
	if tc, ok := ws.NetConn().(*tls.Conn); ok {
		serial = tc.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	codec, _ := wire.ForSubprotocol(ws.Subprotocol())
	codec.Game = testTypes
	c := &client{t: t, ws: ws, codec: codec, sent: map[uint64]string{}}
	if f := c.recv(); f.GetWelcome() == nil {
		t.Fatalf("want a welcome, got %v", f)
	}
	return c, serial, nil
}

func TestEdgeTLSServesWSSAndHTTPSAndPicksUpARenewal(t *testing.T) {
	ca := tlstest.NewCA(t)
	f := ca.Issue(t, "edge", tlstest.Localhost())
	g := tlsGate(t, f, startFakeLogic(t))
	if !g.TLS() {
		t.Fatal("TLS() false with -tls-cert")
	}
	client := ca.ClientTLS()
	client.ClientSessionCache = tls.NewLRUClientSessionCache(8)

	c, serial, err := dialWSS(t, g, "alice", client)
	if err != nil {
		t.Fatal(err)
	}
	if serial != f.Serial.String() {
		t.Fatalf("serial %s, want %s", serial, f.Serial)
	}
	c.send(profileFrame(1))
	if r := c.recv(); r.GetRequestId() != 1 || r.GetError() != nil {
		t.Fatalf("reply %v", r)
	}

	// The ops port serves https with the same certificate, and a second
	// connection resumes the first one's session.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: client, DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	opsURL := "https://localhost:" + portOf(g.OpsAddr().String()) + "/healthz"
	resumed := false
	for range 3 {
		resp, err := hc.Get(opsURL)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz %d", resp.StatusCode)
		}
		resumed = resumed || resp.TLS.DidResume
	}
	if !resumed {
		t.Fatal("no https connection to the ops port resumed its TLS session")
	}

	// Renewal: the files are rewritten; new handshakes see the new
	// certificate within ReloadInterval, the open socket keeps working.
	// (A resumed session keeps the certificate of the session it resumes:
	// full handshakes, without the session cache, show the renewal.)
	renewed := ca.Write(t, f.Cert, f.Key, tlstest.Localhost())
	testwait.Until(t, "a new wss handshake with the renewed certificate", func() bool {
		_, s, err := dialWSS(t, g, "bob", ca.ClientTLS())
		return err == nil && s == renewed.String()
	})
	c.send(profileFrame(2))
	if r := c.recv(); r.GetRequestId() != 2 || r.GetError() != nil {
		t.Fatalf("reply on the socket opened before the renewal: %v", r)
	}
}

func TestEdgeTLSRefusesPlaintextAndBadCertificates(t *testing.T) {
	ca := tlstest.NewCA(t)
	good := ca.Issue(t, "edge", tlstest.Localhost())
	logic := startFakeLogic(t)
	g := tlsGate(t, good, logic)

	// Plaintext to the TLS port: no WebSocket.
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{wire.ProtoSubprotocol}}
	if ws, _, err := d.Dial(g.wsURL(g.tokenFor(t, "mallory")), nil); err == nil {
		ws.Close()
		t.Fatal("a plaintext ws:// handshake succeeded on the TLS port")
	}
	// Plain http to the ops port: no metrics.
	if resp, err := http.Get("http://" + g.OpsAddr().String() + "/metrics"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || strings.Contains(string(b), "gate_active_connections") {
			t.Fatalf("plain http to the ops port got the metrics (%d)", resp.StatusCode)
		}
	}

	// The client's side refuses an edge certificate that is expired,
	// self-signed or for another name.
	for _, tc := range []struct {
		name string
		f    tlstest.Files
		want string
	}{
		{"expired", ca.Issue(t, "old", tlstest.Spec{DNS: []string{"localhost"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}), "expired"},
		{"self-signed", tlstest.SelfSigned(t, "self", tlstest.Localhost()), "unknown authority"},
		{"wrong name", ca.Issue(t, "other", tlstest.Spec{DNS: []string{"other.example"}}), "other.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := tlsGate(t, tc.f, logic)
			_, _, err := dialWSS(t, bad, "alice", ca.ClientTLS())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("dial: %v, want a verification error naming %q", err, tc.want)
			}
			if n := testutil.ToFloat64(bad.m.active); n != 0 {
				t.Fatalf("%v connections active after the refusal", n)
			}
		})
	}
	if n := len(logic.requests()); n != 0 {
		t.Fatalf("logic saw %d requests from refused clients", n)
	}
}

func TestEdgeTLSConfigNeedsBothFiles(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LogicAddrs = []string{"127.0.0.1:1"}
	cfg.TLSCert = "edge.crt"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "-tls-key") {
		t.Fatalf("only -tls-cert: %v", err)
	}
}
