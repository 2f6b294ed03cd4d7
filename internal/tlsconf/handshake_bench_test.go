package tlsconf_test

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
)

// BenchmarkEdgeHandshake is one TLS handshake with the gate's edge
// configuration (Edge, an ECDSA P-256 certificate), client and server in
// this process over net.Pipe, so ns/op is both sides' CPU: full (no
// session cache) and resumed (the client's cache holds a ticket), with
// Go's default key exchange (X25519MLKEM768 first in TLS 1.3) and with
// X25519 only. It says where a surge's handshake CPU goes: TLS 1.3
// resumption still does a fresh key exchange (psk_dhe_ke), and skips only
// the certificate and its signature.
func BenchmarkEdgeHandshake(b *testing.B) {
	ca := tlstest.NewCA(b)
	f := ca.Issue(b, "edge", tlstest.Localhost())
	kp, err := tlsconf.LoadKeyPair(f.Cert, f.Key)
	if err != nil {
		b.Fatal(err)
	}
	for _, kx := range []struct {
		name   string
		curves []tls.CurveID
	}{{"default", nil}, {"x25519", []tls.CurveID{tls.X25519}}} {
		for _, resume := range []bool{false, true} {
			name := kx.name + "/full"
			if resume {
				name = kx.name + "/resumed"
			}
			b.Run(name, func(b *testing.B) {
				srv := tlsconf.Edge(kp)
				srv.CurvePreferences = kx.curves
				cli := ca.ClientTLS()
				cli.ServerName = "localhost"
				cli.CurvePreferences = kx.curves
				if resume {
					cli.ClientSessionCache = tls.NewLRUClientSessionCache(1)
					benchHandshake(b, srv, cli) // the ticket
				}
				b.ReportAllocs()
				for b.Loop() {
					if got := benchHandshake(b, srv, cli); got != resume {
						b.Fatalf("resumed %v, want %v", got, resume)
					}
				}
			})
		}
	}
}

// benchHandshake runs one handshake, the client reading one byte so that it
// takes the server's session ticket, and reports whether it resumed.
func benchHandshake(b *testing.B, srv, cli *tls.Config) bool {
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		ss := tls.Server(s, srv)
		if err := ss.Handshake(); err != nil {
			done <- err
			return
		}
		_, err := ss.Write([]byte{1})
		done <- err
	}()
	cc := tls.Client(c, cli)
	if err := cc.Handshake(); err != nil {
		b.Fatal(err)
	}
	var one [1]byte
	if _, err := cc.Read(one[:]); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return cc.ConnectionState().DidResume
}
