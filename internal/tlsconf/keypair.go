package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

// ReloadInterval is the most often a KeyPair or CAPool looks at its files.
const ReloadInterval = time.Second

// Option configures LoadKeyPair, LoadCAPool and LoadCluster.
type Option func(*options)

type options struct {
	clock clock.Clock
	log   *slog.Logger
}

// WithClock sets the time source of the reload checks and of the peer
// certificates' validity (default: the wall clock).
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets where reloads, failed reloads and refusals are logged
// (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

func newOptions(opts []Option) options {
	o := options{clock: clock.Real{}, log: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// stamp is what tells a changed file: its modification time and size.
type stamp struct {
	mod  time.Time
	size int64
}

func stat(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stamp{fi.ModTime(), fi.Size()}, nil
}

// watched is a set of files parsed together into a T, re-parsed when one
// of them changed, at most once per ReloadInterval.
type watched[T any] struct {
	what  string // for the logs: "key pair", "CA bundle"
	files []string
	parse func() (T, error)
	o     options

	mu      sync.Mutex
	cur     T
	seen    []stamp   // the files' stamps when cur (or the last failure) was read
	checked time.Time // the last look at the files
}

func newWatched[T any](what string, files []string, parse func() (T, error), o options) (*watched[T], error) {
	w := &watched[T]{what: what, files: files, parse: parse, o: o}
	st, err := w.stamps()
	if err != nil {
		return nil, err
	}
	if w.cur, err = parse(); err != nil {
		return nil, err
	}
	w.seen, w.checked = st, o.clock.Now()
	return w, nil
}

func (w *watched[T]) stamps() ([]stamp, error) {
	out := make([]stamp, len(w.files))
	for i, f := range w.files {
		s, err := stat(f)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

func sameStamps(a, b []stamp) bool {
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// get returns the current value, first re-reading the files if
// ReloadInterval has passed since the last look and one of them changed.
func (w *watched[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.o.clock.Now()
	if now.Sub(w.checked) < ReloadInterval {
		return w.cur
	}
	w.checked = now
	st, err := w.stamps()
	if err != nil {
		if w.seen != nil {
			w.o.log.Warn("tlsconf: cannot stat the "+w.what+"; keeping the loaded one", "files", w.files, "err", err)
			w.seen = nil // log once, and re-read when the files are back
		}
		return w.cur
	}
	if w.seen != nil && sameStamps(st, w.seen) {
		return w.cur
	}
	w.seen = st
	v, err := w.parse()
	if err != nil {
		w.o.log.Warn("tlsconf: the changed "+w.what+" does not load; keeping the loaded one", "files", w.files, "err", err)
		return w.cur
	}
	w.cur = v
	w.o.log.Info("tlsconf: reloaded the "+w.what, "files", w.files)
	return v
}

// KeyPair is a certificate and its private key, read from two PEM files
// and re-read when they change (see the package doc).
type KeyPair struct{ w *watched[*tls.Certificate] }

// LoadKeyPair reads certFile and keyFile (PEM). The error names the file
// that does not load; nothing is kept of a pair that does not load.
func LoadKeyPair(certFile, keyFile string, opts ...Option) (*KeyPair, error) {
	o := newOptions(opts)
	w, err := newWatched("key pair", []string{certFile, keyFile}, func() (*tls.Certificate, error) {
		return readKeyPair(certFile, keyFile)
	}, o)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: key pair %s, %s: %w", certFile, keyFile, err)
	}
	return &KeyPair{w}, nil
}

func readKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// Certificate is the pair in service now (reloading it first if due).
func (k *KeyPair) Certificate() *tls.Certificate { return k.w.get() }

// GetCertificate is for tls.Config.GetCertificate.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.w.get(), nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate.
func (k *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.w.get(), nil
}

// CAPool is a bundle of CA certificates read from one PEM file and re-read
// when it changes (see the package doc).
type CAPool struct{ w *watched[*x509.CertPool] }

// ErrNoCACertificates is returned for a CA file without a certificate.
var ErrNoCACertificates = errors.New("tlsconf: no CA certificate in the file")

// LoadCAPool reads the CA certificates in file (PEM).
func LoadCAPool(file string, opts ...Option) (*CAPool, error) {
	o := newOptions(opts)
	w, err := newWatched("CA bundle", []string{file}, func() (*x509.CertPool, error) {
		return readPool(file)
	}, o)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: CA file %s: %w", file, err)
	}
	return &CAPool{w}, nil
}

func readPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, ErrNoCACertificates
	}
	return p, nil
}

// Pool is the bundle in service now (reloading it first if due).
func (p *CAPool) Pool() *x509.CertPool { return p.w.get() }

// Edge is the gate's public TLS configuration: TLS 1.2 and later with Go's
// default cipher suites and curves, kp's certificate (reloaded on
// renewal), and session tickets on so that a reconnecting player resumes
// instead of paying for a full handshake.
func Edge(kp *KeyPair) *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS12,
		GetCertificate:         kp.GetCertificate,
		SessionTicketsDisabled: false,
	}
}
