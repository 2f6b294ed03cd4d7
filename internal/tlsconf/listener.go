package tlsconf

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Listener is a TLS listener whose Accept returns connections already
// handshaken. Each handshake runs on a goroutine of its own that ends with
// it, so that the server's long-lived goroutine of a connection (the gate's
// reader of a waiting player) never runs the handshake: the key exchange
// and the certificate's signature run deep, and a goroutine's stack that
// grew for them stays grown (it is only halved at a GC, while it uses less
// than a quarter of it). A handshake that fails or takes longer than the
// timeout closes the connection and is logged at DEBUG.
type Listener struct {
	inner   net.Listener
	cfg     *tls.Config
	timeout time.Duration
	log     *slog.Logger

	ready  chan net.Conn // handshaken connections for Accept
	done   chan struct{} // closed by Close
	failed chan struct{} // closed when the inner listener failed (err)
	err    error

	mu      sync.Mutex
	closed  bool
	pending map[net.Conn]struct{} // raw connections mid-handshake
	wg      sync.WaitGroup        // the accept loop and the handshakes
	once    sync.Once
}

var _ net.Listener = (*Listener)(nil)

// NewListener serves TLS with cfg on inner; timeout bounds each handshake
// (> 0). Close stops its goroutines.
func NewListener(inner net.Listener, cfg *tls.Config, timeout time.Duration, log *slog.Logger) *Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Listener{inner: inner, cfg: cfg, timeout: timeout, log: log,
		ready: make(chan net.Conn), done: make(chan struct{}), failed: make(chan struct{}),
		pending: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		raw, err := l.inner.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// Out of file descriptors and the like: wait, as
				// net/http does, rather than spin.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
					continue
				case <-l.done:
					return
				}
			}
			l.err = err
			close(l.failed)
			return
		}
		backoff = 0
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = raw.Close()
			return
		}
		l.pending[raw] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.handshake(raw)
	}
}

// isTemporary reports an Accept error worth retrying (EMFILE, ENFILE,
// ECONNABORTED): the deprecated Temporary, which is what net/http uses.
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (l *Listener) handshake(raw net.Conn) {
	defer l.wg.Done()
	tc := tls.Server(raw, l.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	l.mu.Lock()
	delete(l.pending, raw)
	l.mu.Unlock()
	if err != nil {
		l.log.Debug("tlsconf: TLS handshake failed", "remote", raw.RemoteAddr().String(), "err", err)
		_ = raw.Close()
		return
	}
	select {
	case l.ready <- tc:
	case <-l.done:
		_ = tc.Close()
	}
}

// Accept returns the next handshaken connection (a *tls.Conn).
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-l.failed:
		return nil, l.err
	}
}

// Close closes the inner listener and the connections mid-handshake, and
// returns once every goroutine of the listener has ended. Connections
// already accepted are the caller's.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.inner.Close()
		l.mu.Lock()
		l.closed = true
		for c := range l.pending {
			_ = c.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
	})
	return err
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }
