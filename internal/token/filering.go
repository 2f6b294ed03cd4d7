package token

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

// ReloadEvery is how often, at most, a FileRing looks at its file.
const ReloadEvery = time.Second

// FileRing is a Ring read from a file (-token-keys) and read again when the
// file changes, so that a rotation needs no restart. Ring looks at the
// file (one stat) at most once per ReloadEvery, when it is called; a file
// that changed is parsed again, and a file that cannot be read or parsed
// keeps the last good ring and is reported to onErr once per change.
// Secret files named by secret_file are read when the ring file itself
// changes: write the secret first, then the ring file (an atomic rename is
// best).
type FileRing struct {
	path  string
	clk   clock.Clock
	onErr func(error)

	ring      atomic.Pointer[Ring]
	nextCheck atomic.Int64 // unix ns of the next stat

	mu   sync.Mutex // serialises reloads; guards seen
	seen os.FileInfo
}

// LoadFileRing reads path, which must hold a good ring (ParseKeys), and
// returns it as a FileRing checked against clk's time. onErr (may be nil)
// is told of each later change that could not be used.
func LoadFileRing(path string, clk clock.Clock, onErr func(error)) (*FileRing, error) {
	if clk == nil {
		clk = clock.Real{}
	}
	if onErr == nil {
		onErr = func(error) {}
	}
	f := &FileRing{path: path, clk: clk, onErr: onErr}
	info, r, err := f.read()
	if err != nil {
		return nil, err
	}
	f.seen = info
	f.ring.Store(r)
	f.nextCheck.Store(clk.Now().Add(ReloadEvery).UnixNano())
	return f, nil
}

// Ring returns the ring in use, after looking at the file if ReloadEvery
// has passed since the last look.
func (f *FileRing) Ring() *Ring {
	now := f.clk.Now()
	if now.UnixNano() < f.nextCheck.Load() {
		return f.ring.Load()
	}
	if !f.mu.TryLock() {
		return f.ring.Load() // another caller is looking
	}
	defer f.mu.Unlock()
	f.nextCheck.Store(now.Add(ReloadEvery).UnixNano())
	info, err := os.Stat(f.path)
	if err != nil {
		if f.seen != nil {
			f.seen = nil
			f.onErr(fmt.Errorf("%w: %s: %v; keeping the last good ring", ErrKeys, f.path, err))
		}
		return f.ring.Load()
	}
	if f.seen != nil && os.SameFile(f.seen, info) && info.ModTime().Equal(f.seen.ModTime()) && info.Size() == f.seen.Size() {
		return f.ring.Load()
	}
	f.seen = info
	_, r, err := f.read()
	if err != nil {
		f.onErr(fmt.Errorf("%w; keeping the last good ring", err))
		return f.ring.Load()
	}
	f.ring.Store(r)
	return r
}

func (f *FileRing) read() (os.FileInfo, *Ring, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrKeys, err)
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrKeys, err)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxKeysFile+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrKeys, f.path, err)
	}
	r, err := ParseKeys(data, filepath.Dir(f.path), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.path, err)
	}
	return info, r, nil
}
