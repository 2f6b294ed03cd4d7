package logic

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// shardStore is one shard's durable state: the commit boundary. A shard's
// goroutine is its only writer. Two implementations: boltStore (one bbolt
// file per shard, the embedded default) and pgShard (rows in PostgreSQL,
// pgstore.go).
type shardStore interface {
	// get loads a player's record; (nil, nil) when there is none.
	get(id string) (*record, error)
	// outcome returns the stored outcome under key, decoded; (nil, nil)
	// when there is none.
	outcome(key string) (*leveev2.StoredOutcome, error)
	// purgedUpTo is the latest applied time (unix ms) of any outcome
	// purged so far; 0: none.
	purgedUpTo() int64
	// put writes every record and outcome in one transaction: all of it or
	// nothing. An outcome key already stored is never overwritten. hook,
	// if not nil, runs inside the transaction before it commits (tests use
	// it to make it fail).
	put(recs map[string]*record, outs map[string]outcome, hook func() error) error
	// purge deletes up to limit outcomes applied before cutoff, oldest
	// first, in one transaction, and advances purgedUpTo; more says that
	// outcomes older than cutoff remain.
	purge(cutoff time.Time, limit int) (n int, more bool, err error)
	// close releases the shard's store (not a pool it shares).
	close() error
}

var (
	_ shardStore = (*boltStore)(nil)
	_ shardStore = (*pgShard)(nil)
)

// ErrStore wraps every storage failure.
var ErrStore = errors.New("logic: store")

// ErrFenced is the failure of a commit to PostgreSQL made without the
// shard's lease: the shard_leases row no longer names this process and
// epoch (another process took the shard over, or the lease expired).
// Nothing of the transaction was applied; the shard must stop serving, and
// the requests of the batch are answered UNAVAILABLE with a retry delay
// (the gate finds the new owner).
var ErrFenced = errors.New("logic: shard lease lost (fenced)")

// ErrOutcomeExists is the failure of a commit to PostgreSQL that would
// have stored an outcome under a (player, key) already stored: another
// process (or an earlier commit whose acknowledgement was lost) applied
// that request first. The whole transaction was rolled back, so nothing is
// applied twice; a resend is answered from the stored outcome.
var ErrOutcomeExists = errors.New("logic: outcome already stored")

// errShardChanged: the shard's purged_up_to_ms in PostgreSQL is ahead of
// what this process read, so another process purged outcomes this batch's
// checks relied on; the batch is refused and its resends are checked
// again with the new value.
var errShardChanged = errors.New("logic: another process purged this shard's outcomes meanwhile")

// Storage failure reasons (the logic_store_errors_total reason label).
const (
	// reasonNoSpace: the file system is full (ENOSPC) or the quota is
	// used up (EDQUOT); PostgreSQL's disk_full.
	reasonNoSpace = "no_space"
	// reasonUnavailable: the database could not be reached or went away
	// (connection refused or lost, shutting down, too many connections,
	// a timeout): nothing is known to be applied, a retry may succeed.
	reasonUnavailable = "unavailable"
	// reasonFenced: the shard's lease is no longer this process's
	// (ErrFenced).
	reasonFenced = "fenced"
	// reasonConflict: another process wrote the shard: an outcome key
	// already stored (ErrOutcomeExists) or a purge meanwhile.
	reasonConflict = "conflict"
	// reasonIO: any other failure of the store.
	reasonIO = "io"
)

// storeReasons are every reason, for the metrics' zero series.
var storeReasons = []string{reasonNoSpace, reasonUnavailable, reasonFenced, reasonConflict, reasonIO}

// storeReason is err's storage failure reason. bbolt wraps write errors
// with %w but formats those of growing and syncing the file with %s, so a
// full disk is also recognised by its text.
func storeReason(err error) string {
	switch {
	case errors.Is(err, ErrFenced):
		return reasonFenced
	case errors.Is(err, ErrOutcomeExists), errors.Is(err, errShardChanged):
		return reasonConflict
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return reasonNoSpace
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgDiskFull {
		return reasonNoSpace
	}
	if msg := err.Error(); strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error()) {
		return reasonNoSpace
	}
	if unreachable(err) {
		return reasonUnavailable
	}
	return reasonIO
}

// SQLSTATEs the store tells apart.
const (
	pgUniqueViolation    = "23505"
	pgDiskFull           = "53100"
	pgTooManyConnections = "53300"
	pgAdminShutdown      = "57P01"
	pgCrashShutdown      = "57P02"
	pgCannotConnectNow   = "57P03"
)

// unreachable says whether err means that PostgreSQL could not be reached
// or went away, rather than that it refused the statement: connecting
// failed, the connection broke, the server is shutting down or starting,
// it has no connection left, or the operation's deadline passed (waiting
// for a connection from the pool included).
func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection_exception
			pe.Code == pgTooManyConnections, pe.Code == pgAdminShutdown,
			pe.Code == pgCrashShutdown, pe.Code == pgCannotConnectNow:
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var oe *net.OpError // a socket's (a file's errors are no net.OpError)
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.As(err, &ce) || errors.As(err, &oe) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
