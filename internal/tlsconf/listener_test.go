package tlsconf_test

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leveehq/levee/internal/tlsconf"
	"github.com/leveehq/levee/internal/tlsconf/tlstest"
)

// The listener hands out connections already handshaken; a client that
// connects and says nothing holds up nobody else, and is cut off at the
// timeout; Close ends every goroutine, also a handshake in progress.
func TestListenerHandshakesOffTheServersGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	ca := tlstest.NewCA(t)
	f := ca.Issue(t, "edge", tlstest.Localhost())
	kp, err := tlsconf.LoadKeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 2 * time.Second
	l := tlsconf.NewListener(inner, tlsconf.Edge(kp), timeout, nil)
	addr := l.Addr().String()

	// A silent client first.
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	// A real one is accepted meanwhile, handshaken.
	cfg := ca.ClientTLS()
	cfg.ServerName = "localhost"
	clientErr := make(chan error, 1)
	go func() {
		c, err := tls.Dial("tcp", addr, cfg)
		if err == nil {
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		clientErr <- err
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	tc, ok := c.(*tls.Conn)
	if !ok || !tc.ConnectionState().HandshakeComplete {
		t.Fatalf("accepted %T, handshake complete %v", c, ok && tc.ConnectionState().HandshakeComplete)
	}
	if _, err := tc.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-clientErr; err != nil {
		t.Fatalf("client: %v", err)
	}
	tc.Close()

	// The silent client is closed at the timeout.
	_ = silent.SetReadDeadline(time.Now().Add(timeout + 5*time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		t.Fatal("the silent client read something")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the silent client was not cut off at the handshake timeout")
	}

	// A client whose handshake may be in progress (or waiting for Accept)
	// when the listener closes: Close still ends every goroutine.
	stuck, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	hello := make(chan error, 1)
	go func() {
		c := tls.Client(stuck, cfg)
		hello <- c.Handshake()
	}()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	stuck.Close()
	<-hello
}
