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
// UNAVAILABLE with storageRetryAfter for a full disk, INTERNAL otherwise.
// Both say that nothing was kept; UNAVAILABLE is outcome-unknown for the
// SDK, so that it resends with the same request id (a failed fsync may
// leave the commit on disk after all, and the id makes the resend safe).
func (sh *shard) commitFailed(b *batch, err error) result {
	reason := storeReason(err)
	sh.srv.m.storeErrors.WithLabelValues(storeOpCommit, reason).Inc()
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
		if reason == reasonNoSpace {
			msg = "storage full: commits fail and mutations are refused (UNAVAILABLE) until space returns; reads go on"
		}
		sh.srv.log.Error(msg, "shard", sh.id, "reason", reason, "failed_commits", h.unlogged,
			"failing_since", h.since, "records", len(b.dirty), "outcomes", len(b.outcomes), "err", err)
		h.logged, h.unlogged, h.reported = now, 0, true
	}
	if reason == reasonNoSpace {
		return result{
			err:      fmt.Errorf("%w: shard %d: storage full, the change could not be committed; try again later with the same request id: %w", apperr.ErrUnavailable, sh.id, err),
			pushback: storageRetryAfter,
		}
	}
	return internalError(err)
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
