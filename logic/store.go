package logic

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrStore wraps every storage failure.
var ErrStore = errors.New("logic: store")

// openTimeout bounds how long opening a shard file waits for another
// process's lock, so a second process on the same -data-dir fails fast.
const openTimeout = time.Second

var playersBucket = []byte("players")

// store is one shard's bbolt file: bucket "players", key player id, value a
// marshalled leveev1.PlayerRecord. Only the shard goroutine uses it.
type store struct {
	db   *bolt.DB
	path string
}

// shardFile is where shard's state lives under dir.
func shardFile(dir string, shard int) string {
	return filepath.Join(dir, fmt.Sprintf("shard-%03d.db", shard))
}

// openStore opens (creating if needed) shard's file under dir.
func openStore(dir string, shard int) (*store, error) {
	path := shardFile(dir, shard)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: open %s: still locked after %v; is another logic process using this -data-dir?", ErrStore, path, openTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrStore, path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(playersBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: init %s: %w", ErrStore, path, err)
	}
	return &store{db: db, path: path}, nil
}

// ensureDir creates dir if it is missing.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: -data-dir: %w", ErrStore, err)
	}
	return nil
}

// get loads a player's record; (nil, nil) when there is none.
func (s *store) get(id string) (*record, error) {
	var rec *record
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(playersBucket).Get([]byte(id))
		if v == nil {
			return nil
		}
		var err error
		rec, err = unmarshalRecord(v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: get %q from %s: %w", ErrStore, id, s.path, err)
	}
	return rec, nil
}

// put writes every record in one transaction: one fsync for the lot. hook,
// if not nil, runs inside the transaction (tests use it to make it fail).
func (s *store) put(recs map[string]*record, hook func() error) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(playersBucket)
		for id, rec := range recs {
			v, err := rec.marshal()
			if err != nil {
				return err
			}
			if err := b.Put([]byte(id), v); err != nil {
				return err
			}
		}
		if hook != nil {
			return hook()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: commit %d records to %s: %w", ErrStore, len(recs), s.path, err)
	}
	return nil
}

func (s *store) close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("%w: close %s: %w", ErrStore, s.path, err)
	}
	return nil
}
