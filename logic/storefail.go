package logic

import (
	"fmt"
	"time"

	"github.com/leveehq/levee/internal/apperr"
)

// How a shard answers, counts and reports commits its store refuses.
//
// A full disk: bbolt writes its pages with pwrite (never through its
// mapping, which is read-only) and grows the file with ftruncate, so ENOSPC
// comes back as an error of the commit, which bbolt rolls back; the DB
// stays usable and the next commit tries again, so a shard recovers by
// itself when space returns. Reads go through the mapping, but only to
// pages that a committed meta page points to, all written (so, on tmpfs,
// backed by memory) before: the holes that ftruncate leaves in a sparse
// file are never touched, which is what would raise SIGBUS on a full tmpfs.
// Options that would touch them (MmapFlags MAP_POPULATE, Mlock) are not
// used for that reason.

const (
	// storageRetryAfter is the retry delay sent with a mutation refused
	// for a full disk: space comes back by an operator's hand, not within
	// milliseconds, and a delay longer than most request budgets keeps the
	// SDK from retrying within them (no retry storm against a full disk).
	storageRetryAfter = 5 * time.Second
	// storeLogEvery: a shard whose commits keep failing logs it at most
	// once per this (with the count of failures meanwhile).
	storeLogEvery = 30 * time.Second
	// storeRetryAfter is the retry delay sent with a mutation refused
	// because the database is unreachable, the shard's lease was lost or
	// another process wrote the shard: a database restart or a lease moving
	// takes about a second or a few.
	storeRetryAfter = time.Second
)

// storeHealth is what a shard remembers of its store's failures; the shard
// goroutine's own. A disk at the edge of full lets some commits through (those
// that reuse free pages) and refuses others, so the lines are rate-limited
// across such flapping: a failure line at most once per storeLogEvery, and a
// recovery line after a failure line, at the first commit that succeeds when
// none has failed for storeLogEvery.
type storeHealth struct {
	reported bool      // a failure line was logged and no recovery line since
	since    time.Time // the first failure after the last recovery line
	failures int       // failed commits since then
	lastFail time.Time // when a commit last failed
	logged   time.Time // when a failure line was last logged
	unlogged int       // failed commits since that line
}

// commitFailed counts and (rate-limited) logs a commit that failed with
// err, and returns the answer for the requests that depended on it:
// UNAVAILABLE with a retry delay for a full disk (storageRetryAfter), an
// unreachable database, a lost lease or another process's write
// (storeRetryAfter); INTERNAL otherwise. All of them say that nothing was
// kept; UNAVAILABLE is outcome-unknown for the SDK, so that it resends with
// the same request id (a failed fsync, or a connection lost while the
// database committed, may leave the commit stored after all, and the id
// makes the resend safe: it is answered from the stored outcome).
func (sh *shard) commitFailed(b *batch, err error) result {
	reason := storeReason(err)
	sh.srv.m.storeErrors.WithLabelValues(storeOpCommit, reason).Inc()
	if reason == reasonFenced {
		sh.fenced(err)
	}
	now := sh.srv.clk.Now()
	h := &sh.health
	if h.failures == 0 {
		h.since = now
	}
	h.lastFail = now
	h.failures++
	h.unlogged++
	if h.logged.IsZero() || now.Sub(h.logged) >= storeLogEvery {
		msg := "group commit failed; batch rolled back, its mutations answered INTERNAL"
		switch reason {
		case reasonNoSpace:
			msg = "storage full: commits fail and mutations are refused (UNAVAILABLE) until space returns; reads go on"
		case reasonUnavailable:
			msg = "database unavailable: commits fail and mutations are refused (UNAVAILABLE, retry later) until it answers again"
		case reasonFenced:
			msg = "shard lease lost: commits are refused by the fence (UNAVAILABLE, retry later); another process serves the shard"
		case reasonConflict:
			msg = "another process wrote this shard: the batch was rolled back (UNAVAILABLE, retry later); resends are answered from what it stored"
		}
		sh.srv.log.Error(msg, "shard", sh.id, "reason", reason, "failed_commits", h.unlogged,
			"failing_since", h.since, "records", len(b.dirty), "outcomes", len(b.outcomes), "err", err)
		h.logged, h.unlogged, h.reported = now, 0, true
	}
	switch reason {
	case reasonNoSpace:
		return result{
			err:      fmt.Errorf("%w: shard %d: storage full, the change could not be committed; try again later with the same request id: %w", apperr.ErrUnavailable, sh.id, err),
			pushback: storageRetryAfter,
		}
	case reasonUnavailable, reasonFenced, reasonConflict:
		return unavailable(reason, err)
	}
	return internalError(err)
}

// unavailable is the answer to a request that a store failure of reason
// (unavailable, fenced, conflict) kept from being served: UNAVAILABLE with
// storeRetryAfter; whether a commit took place is not known to the caller,
// which resends with the same request id.
func unavailable(reason string, err error) result {
	what := map[string]string{
		reasonUnavailable: "the database is unavailable",
		reasonFenced:      "the shard is moving to another logic process",
		reasonConflict:    "another logic process wrote this shard",
	}[reason]
	return result{
		err:      fmt.Errorf("%w: %s, nothing was committed; try again later with the same request id: %w", apperr.ErrUnavailable, what, err),
		pushback: storeRetryAfter,
	}
}

// fenced is called when a commit fails because the shard's lease is no
// longer this process's (ErrFenced): a shard served by lease is dropped as
// lost (Server.dropFenced), and answers what is left in its queue
// UNAVAILABLE; the failure is counted as
// logic_store_errors_total{reason="fenced"}.
func (sh *shard) fenced(err error) {
	if sh.fencedSeen {
		return
	}
	sh.fencedSeen = true
	if sh.epoch != 0 {
		sh.srv.dropFenced(sh, err)
		return
	}
	sh.srv.log.Warn("shard fenced: its lease is another process's now", "shard", sh.id, "err", err)
}

// commitSucceeded notes a commit that went through: after a failure line,
// once no commit has failed for storeLogEvery, one line says that the store
// is writable again.
func (sh *shard) commitSucceeded() {
	h := &sh.health
	if !h.reported {
		return
	}
	if sh.srv.clk.Now().Sub(h.lastFail) < storeLogEvery {
		return
	}
	sh.srv.log.Info("storage writable again: commits succeed and none has failed for "+storeLogEvery.String(), "shard", sh.id,
		"failed_commits", h.failures, "failing_since", h.since, "last_failure", h.lastFail)
	h.reported, h.failures = false, 0
}
