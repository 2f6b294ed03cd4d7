package logic

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func TestStoreReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "write", Path: "/d/shard-000.db", Err: syscall.ENOSPC}, reasonNoSpace},
		{fmt.Errorf("%w: commit: %w", ErrStore, &fs.PathError{Op: "write", Path: "x", Err: syscall.EDQUOT}), reasonNoSpace},
		// bbolt's grow formats the truncate and fsync errors with %s.
		{fmt.Errorf("file resize error: %s", &fs.PathError{Op: "truncate", Path: "x", Err: syscall.ENOSPC}), reasonNoSpace},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.EIO}, reasonIO},
		{errors.New("disk on fire"), reasonIO},
	} {
		if got := storeReason(c.err); got != c.want {
			t.Errorf("storeReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory and
// unmounts it when the test ends (after the servers started later have
// stopped: cleanups run last first). It skips the test when it cannot
// mount: not root, or no CAP_SYS_ADMIN (a container without it).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs that fills up (CI runs as root)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v (needs CAP_SYS_ADMIN)", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// fillDisk writes path until the file system it is on has no space left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		_, err := f.Write(buf)
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		if err != nil {
			t.Fatalf("filling %s: %v", path, err)
		}
	}
}

// storageFull checks that err is the refusal of a mutation on a full disk:
// UNAVAILABLE (outcome unknown: the SDK resends with the same id) with
// storageRetryAfter and a message that says so.
func storageFull(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("%s: %v, want UNAVAILABLE", what, err)
	}
	e := apperr.FromStatus(err)
	if e.Code != leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE || e.RetryAfter != storageRetryAfter || !strings.Contains(e.Message, "storage full") {
		t.Fatalf("%s: code %v, retry after %v, message %q; want UNAVAILABLE, %v, storage full", what, e.Code, e.RetryAfter, e.Message, storageRetryAfter)
	}
}

// The disk-full drill on a real file system: logic's data on a small tmpfs
// that fills up. Purchases are refused with UNAVAILABLE and a retry delay,
// nothing refused is applied and nothing acknowledged is lost (also across
// a restart), reads go on, the shard serves on and recovers by itself when
// space returns; logic_store_errors_total counts the failures and one line
// per storeLogEvery says that the disk is full.
func TestDiskFull(t *testing.T) {
	dir := mountTmpfs(t, 1<<20)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	logs := &lockedBuffer{}
	e := start(t, envOpts{dir: dir, clock: clk, log: slog.New(slog.NewJSONHandler(logs, nil))})
	lines := func(msg string) int { return strings.Count(logs.String(), msg) }
	const fullLine, backLine = "storage full: commits fail", "storage writable again"
	noSpace := func() float64 {
		return testutilValue(e.srv.m.storeErrors.WithLabelValues(storeOpCommit, reasonNoSpace))
	}

	// The ledger: purchases of one potion (10 gold) acknowledged per player.
	acked := map[string]int{}
	rid := uint64(1)
	buy := func(id string) (*leveev2.LogicReply, error) {
		rid++
		return e.cli.Do(ctxT(t), buyReq(id, rid, "potion", 1))
	}
	e.login("alice")
	if _, err := buy("alice"); err != nil {
		t.Fatal(err)
	}
	acked["alice"]++

	filler := filepath.Join(dir, "filler")
	fillDisk(t, filler)

	// Commits that reuse free pages of the file still go through; a new
	// player and a purchase each until one cannot be committed.
	var victim string
	var victimRID uint64
	for i := 0; victim == "" && i < 20000; i++ {
		id := fmt.Sprintf("player-%05d-%s", i, strings.Repeat("x", 40))
		if _, err := e.cli.Do(ctxT(t), loginReq(id)); err != nil {
			storageFull(t, "login of "+id, err)
			continue
		}
		_, err := buy(id)
		if err == nil {
			acked[id]++
			continue
		}
		storageFull(t, "purchase of "+id, err)
		victim, victimRID = id, rid
	}
	if victim == "" {
		t.Fatal("no purchase was refused on a full tmpfs")
	}
	t.Logf("refused after %d acknowledged purchases on the full disk: %s", len(acked)-1, victim)
	failures := noSpace()
	if failures < 1 {
		t.Fatalf("logic_store_errors_total{commit,no_space} = %v after a refusal", failures)
	}

	// The same purchase again, same id: refused again, nothing stored.
	for range 5 {
		_, err := e.cli.Do(ctxT(t), buyReq(victim, victimRID, "potion", 1))
		storageFull(t, "resend while full", err)
	}
	if got := noSpace(); got != failures+5 {
		t.Fatalf("logic_store_errors_total{commit,no_space} = %v, want %v", got, failures+5)
	}
	if n := lines(fullLine); n != 1 {
		t.Fatalf("%d %q lines after %v failures without time passing, want 1:\n%s", n, fullLine, failures+5, logs)
	}
	// Reads go on, and show nothing of what was refused.
	if p := e.profile(victim); p.GetGold() != startGold || len(p.GetInventory()) != 0 {
		t.Fatalf("profile of %s after a refused purchase: %v", victim, p)
	}

	// In one batch with a refused purchase: a read of committed state goes
	// out; a read of the refused purchase's player after it fails with it.
	e.flushAndBlock("alice")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	reps := make([]*leveev2.LogicReply, 3)
	for i, req := range []*leveev2.LogicRequest{profileReq("alice", ""), buyReq(victim, victimRID, "potion", 1), profileReq(victim, "")} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = e.cli.Do(ctxT(t), req)
		}()
		testwait.Until(t, fmt.Sprintf("%d queued", i+1), func() bool { return e.depth(0) == i+1 })
	}
	e.gate.release()
	wg.Wait()
	if errs[0] != nil || view(reps[0]).GetProfile().GetPlayer().GetGold() != startGold-10 {
		t.Fatalf("read of committed state in a failed batch: %v, %v", reps[0], errs[0])
	}
	storageFull(t, "purchase in a failed batch", errs[1])
	storageFull(t, "read of an uncommitted purchase", errs[2])

	// storeLogEvery on: one more line, with the count of failures meanwhile.
	clk.Advance(storeLogEvery)
	_, err := e.cli.Do(ctxT(t), buyReq(victim, victimRID, "potion", 1))
	storageFull(t, "resend storeLogEvery later", err)
	if n := lines(fullLine); n != 2 {
		t.Fatalf("%d %q lines after storeLogEvery, want 2:\n%s", n, fullLine, logs)
	}

	// Space returns: the same shard commits again, no restart. The
	// refused purchase, resent with its id, is applied once.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r := e.call(buyReq(victim, victimRID, "potion", 1)).GetBuyItem()
	if r.GetReplayed() || r.GetPlayer().GetGold() != startGold-10 {
		t.Fatalf("the refused purchase resent after space returned: %v", r)
	}
	acked[victim]++
	if r := e.call(buyReq(victim, victimRID, "potion", 1)).GetBuyItem(); !r.GetReplayed() {
		t.Fatalf("second resend not a replay: %v", r)
	}
	if lines(backLine) != 0 {
		t.Fatalf("%q before storeLogEvery without failures:\n%s", backLine, logs)
	}
	clk.Advance(storeLogEvery)
	e.login("bob")
	if n := lines(backLine); n != 1 {
		t.Fatalf("%d %q lines, want 1:\n%s", n, backLine, logs)
	}

	// Every acknowledged purchase, and nothing else, also after a restart.
	check := func(e *env, when string) {
		t.Helper()
		for id, n := range acked {
			if p := e.profile(id); p.GetGold() != startGold-10*int64(n) || p.GetInventory()["potion"] != uint32(n) {
				t.Fatalf("%s: %s has %d gold and %d potions; %d purchases were acknowledged", when, id, p.GetGold(), p.GetInventory()["potion"], n)
			}
		}
	}
	check(e, "after recovery")
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	check(start(t, envOpts{dir: dir}), "after a restart")
}
