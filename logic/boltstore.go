package logic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"google.golang.org/protobuf/reflect/protoreflect"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// openTimeout bounds how long opening a shard file waits for another
// process's lock, so a second process on the same -data-dir fails fast.
const openTimeout = time.Second

// The buckets of a shard file.
var (
	// playersBucket: player id -> marshalled leveev2.PlayerRecord.
	playersBucket = []byte("players")
	// outcomesBucket: outcome key (requestKey, jobKey) -> marshalled
	// leveev2.StoredOutcome.
	outcomesBucket = []byte("outcomes")
	// outcomeTimesBucket is the time index of outcomesBucket: key the
	// 8-byte big-endian unix ms at which the outcome was applied followed
	// by the outcome key, value empty. Sorted by time, so the purge reads
	// the oldest first.
	outcomeTimesBucket = []byte("outcome-times")
	// metaBucket holds the shard's own facts (the keys below).
	metaBucket = []byte("meta")
)

var (
	// metaPurgedUpTo: 8-byte big-endian unix ms, the latest applied time of
	// any outcome purged so far.
	metaPurgedUpTo = []byte("purged-up-to")
)

// boltStore is one shard's bbolt file (Config.Store "bolt"). Only the shard goroutine writes to it
// (tests read it from others, which bbolt allows).
type boltStore struct {
	db   *bolt.DB
	path string
	// purged is metaPurgedUpTo (unix ms, 0: nothing purged yet).
	purged int64
	// state is the type of the game's player state.
	state protoreflect.MessageType
}

// shardFile is where shard's state lives under dir.
func shardFile(dir string, shard int) string {
	return filepath.Join(dir, fmt.Sprintf("shard-%03d.db", shard))
}

// openBoltStore opens (creating if needed) shard's file under dir, whose
// players' states are typ messages.
func openBoltStore(dir string, shard int, typ protoreflect.MessageType) (*boltStore, error) {
	path := shardFile(dir, shard)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: open %s: still locked after %v; is another logic process using this -data-dir?", ErrStore, path, openTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrStore, path, err)
	}
	s := &boltStore{db: db, path: path, state: typ}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{playersBucket, outcomesBucket, outcomeTimesBucket, metaBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if v := tx.Bucket(metaBucket).Get(metaPurgedUpTo); len(v) == 8 {
			s.purged = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: init %s: %w", ErrStore, path, err)
	}
	return s, nil
}

// ensureDir creates dir if it is missing.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: -data-dir: %w", ErrStore, err)
	}
	return nil
}

// get loads a player's record; (nil, nil) when there is none.
func (s *boltStore) get(id string) (*record, error) {
	var rec *record
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(playersBucket).Get([]byte(id))
		if v == nil {
			return nil
		}
		var err error
		rec, err = unmarshalRecord(v, s.state)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: get %q from %s: %w", ErrStore, id, s.path, err)
	}
	return rec, nil
}

// outcome returns the stored outcome under key, decoded; (nil, nil) when
// there is none. One bbolt Get.
func (s *boltStore) outcome(key string) (*leveev2.StoredOutcome, error) {
	var so *leveev2.StoredOutcome
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(outcomesBucket).Get([]byte(key))
		if v == nil {
			return nil
		}
		var err error
		so, err = decodeOutcome(key, v) // decoded inside: v is valid only here
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: get outcome %q from %s: %w", ErrStore, key, s.path, err)
	}
	return so, nil
}

func (s *boltStore) purgedUpTo() int64 { return s.purged }

// timeKey is o's key in the time index.
func timeKey(at time.Time, key string) []byte {
	k := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(k, uint64(max(at.UnixMilli(), 0)))
	return append(k, key...)
}

func putOutcome(tx *bolt.Tx, o outcome) error {
	if err := tx.Bucket(outcomesBucket).Put([]byte(o.key), o.enc); err != nil {
		return err
	}
	return tx.Bucket(outcomeTimesBucket).Put(timeKey(o.at, o.key), nil)
}

// put writes every record and outcome in one transaction: one fsync for the
// lot, and an outcome is durable exactly when the change it answers is.
// hook, if not nil, runs inside the transaction (tests use it to make it
// fail).
func (s *boltStore) put(recs map[string]*record, outs map[string]outcome, hook func() error) error {
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
		for _, o := range outs {
			if err := putOutcome(tx, o); err != nil {
				return err
			}
		}
		if hook != nil {
			return hook()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: commit %d records and %d outcomes to %s: %w", ErrStore, len(recs), len(outs), s.path, err)
	}
	return nil
}

// purge deletes up to limit outcomes applied before cutoff, oldest first,
// in one transaction, and advances purgedUpTo. more says that outcomes
// older than cutoff remain. A purge with nothing to delete writes nothing.
func (s *boltStore) purge(cutoff time.Time, limit int) (n int, more bool, err error) {
	end := timeKey(cutoff, "")
	due := func(k []byte) bool { return k != nil && bytes.Compare(k[:8], end) < 0 }
	var first []byte
	if err := s.db.View(func(tx *bolt.Tx) error {
		first, _ = tx.Bucket(outcomeTimesBucket).Cursor().First()
		return nil
	}); err != nil {
		return 0, false, fmt.Errorf("%w: purge %s: %w", ErrStore, s.path, err)
	}
	if !due(first) {
		return 0, false, nil
	}
	var upTo int64
	err = s.db.Update(func(tx *bolt.Tx) error {
		times, outs := tx.Bucket(outcomeTimesBucket), tx.Bucket(outcomesBucket)
		var keys [][]byte
		c := times.Cursor()
		k, _ := c.First()
		for ; due(k) && len(keys) < limit; k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		more = due(k)
		n = len(keys)
		if n == 0 {
			return nil
		}
		// Deleted after the walk: a bbolt cursor must not move past a
		// deletion it made.
		for _, tk := range keys {
			if err := outs.Delete(tk[8:]); err != nil {
				return err
			}
			if err := times.Delete(tk); err != nil {
				return err
			}
		}
		upTo = int64(binary.BigEndian.Uint64(keys[len(keys)-1][:8]))
		if upTo <= s.purged {
			return nil
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(upTo))
		return tx.Bucket(metaBucket).Put(metaPurgedUpTo, v[:])
	})
	if err != nil {
		return 0, false, fmt.Errorf("%w: purge %s: %w", ErrStore, s.path, err)
	}
	s.purged = max(s.purged, upTo)
	return n, more, nil
}

func (s *boltStore) close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("%w: close %s: %w", ErrStore, s.path, err)
	}
	return nil
}
