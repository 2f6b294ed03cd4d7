package logic

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/internal/testwait"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// A full shard queue refuses at once with RESOURCE_EXHAUSTED and a pushback.
func TestQueueFullIsBusy(t *testing.T) {
	const size = 4
	e := start(t, envOpts{cfg: func(c *Config) { c.QueueSize = size }})
	e.login("alice")
	e.flushAndBlock("alice")
	replies := make(chan *leveev2.LogicReply, size)
	var wg sync.WaitGroup
	for range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.cli.Do(ctxT(t), profileReq("alice", ""))
			if err != nil {
				t.Error(err)
				return
			}
			replies <- r
		}()
	}
	testwait.Until(t, "a full queue", func() bool { return e.depth(0) == size })

	start := time.Now()
	_, err := e.cli.Do(ctxT(t), profileReq("alice", ""))
	wantStatus(t, err, codes.ResourceExhausted, "queue is full")
	if got := apperr.FromStatus(err).RetryAfter; got < minRetryAfter || got > maxRetryAfter {
		t.Fatalf("pushback = %v, want it in [50ms, 5s]", got)
	}
	t.Logf("busy answered in %v over loopback", time.Since(start))
	if got := e.requests("get_profile", "busy"); got != 1 {
		t.Errorf("logic_requests_total{get_profile,busy} = %d, want 1", got)
	}

	e.gate.release()
	wg.Wait()
	close(replies)
	for r := range replies {
		if view(r).GetProfile() == nil || r.GetBackpressure() == nil {
			t.Fatalf("queued request answered with %v", r)
		}
	}
}

// Every reply carries the shard's fill.
func TestReplyCarriesBackpressure(t *testing.T) {
	e := start(t, envOpts{cfg: func(c *Config) { c.QueueSize = 10; c.MaxBatch = 1 }})
	e.login("alice")
	e.flushAndBlock("alice")
	got := make(chan *leveev2.Backpressure, 4)
	for range 4 {
		go func() {
			r, err := e.cli.Do(ctxT(t), profileReq("alice", ""))
			if err != nil {
				t.Error(err)
			}
			got <- r.GetBackpressure()
		}()
	}
	testwait.Until(t, "4 queued", func() bool { return e.depth(0) == 4 })
	e.gate.release()
	// MaxBatch 1: the replies are sent with 3, 2, 1 and 0 still queued.
	seen := map[uint32]bool{}
	for range 4 {
		bp := <-got
		if bp.GetRatio() != float64(bp.GetQueueDepth())/10 {
			t.Errorf("backpressure %v: ratio does not match depth", bp)
		}
		seen[bp.GetQueueDepth()] = true
	}
	if !seen[3] || !seen[0] {
		t.Errorf("queue depths seen: %v, want 3..0", seen)
	}
}

// A request whose caller has gone by the time the shard picks it up is
// never executed.
func TestExpiredInQueueIsNotExecuted(t *testing.T) {
	e := start(t, envOpts{})
	before := e.login("alice")
	e.flushAndBlock("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.cli.Do(priority.Outgoing(ctx, priority.Critical), buyReq("alice", 5, "sword", 1))
		done <- err
	}()
	testwait.Until(t, "the purchase queued", func() bool { return e.depth(0) == 1 })
	wantStatus(t, <-done, codes.DeadlineExceeded, "")
	// The handler gave up, so the request's server-side context is done.
	testwait.Until(t, "the handler to give up", func() bool { return e.requests("buy_item", "expired") == 1 })
	e.gate.release()
	if p := e.profile("alice"); p.GetGold() != before.GetGold() || p.GetVersion() != before.GetVersion() || len(p.GetInventory()) != 0 {
		t.Fatalf("expired purchase executed: %v", p)
	}
	if got := e.rejections(0, reasonExpired, priority.Critical); got != 1 {
		t.Fatalf("logic_rejections_total{0,expired,critical} = %v, want 1", got)
	}
	if got := e.rejections(0, reasonExpired, priority.Default); got != 0 {
		t.Fatalf("logic_rejections_total{0,expired,default} = %v, want 0", got)
	}
}

// All requests waiting in a shard's channel are committed in one
// transaction, at most MaxBatch at a time.
func TestGroupCommitBatches(t *testing.T) {
	for _, c := range []struct {
		maxBatch    int
		wantCommits uint64
	}{{256, 1}, {16, 3}} {
		t.Run(fmt.Sprintf("max-batch=%d", c.maxBatch), func(t *testing.T) {
			e := start(t, envOpts{cfg: func(cfg *Config) { cfg.MaxBatch = c.maxBatch }})
			const n = 40
			for i := range n {
				e.login(fmt.Sprintf("p%d", i))
			}
			e.flushAndBlock("p0")
			count0, sum0 := histogram(t, e.srv.m.batchSize)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := e.cli.Do(ctxT(t), buyReq(fmt.Sprintf("p%d", i), 1, "sword", 1))
					if err != nil || view(r).GetBuyItem().GetPlayer().GetGold() != 900 {
						t.Errorf("buy: %v %v", r, err)
					}
				}()
			}
			testwait.Until(t, "40 purchases queued", func() bool { return e.depth(0) == n })
			e.gate.release()
			wg.Wait()
			count, sum := histogram(t, e.srv.m.batchSize)
			if count-count0 != c.wantCommits || sum-sum0 != n {
				t.Fatalf("commits %d with %v mutations, want %d with %d", count-count0, sum-sum0, c.wantCommits, n)
			}
		})
	}
}

// A failed commit acknowledges nothing and keeps nothing.
func TestCommitFailureRollsBack(t *testing.T) { forEachStore(t, testCommitFailureRollsBack) }

func testCommitFailureRollsBack(t *testing.T, ts *testStore) {
	var fail atomic.Bool
	e := start(t, envOpts{store: ts, hookCommit: func() error {
		if fail.Load() {
			return errors.New("disk on fire")
		}
		return nil
	}})
	before := e.login("alice")

	fail.Store(true)
	_, err := e.cli.Do(ctxT(t), buyReq("alice", 9, "sword", 1))
	wantStatus(t, err, codes.Internal, "")
	_, err = e.cli.Do(ctxT(t), loginReq("bob"))
	wantStatus(t, err, codes.Internal, "")
	_, err = e.cli.Do(ctxT(t), battleReq("alice", "b1", 2, 10))
	wantStatus(t, err, codes.Internal, "")
	if p := e.profile("alice"); p.GetGold() != before.GetGold() || p.GetVersion() != before.GetVersion() || len(p.GetInventory()) != 0 || p.GetWins()+p.GetLosses() != 0 {
		t.Fatalf("state after failed commits: %v", p)
	}
	wantError(t, e.call(profileReq("bob", "")), leveev2.ErrorCode_ERROR_CODE_NOT_FOUND)

	fail.Store(false)
	if r := e.call(buyReq("alice", 9, "sword", 1)).GetBuyItem(); r.GetReplayed() || r.GetPlayer().GetGold() != 900 {
		t.Fatalf("purchase after recovery = %v", r)
	}
	if r := e.call(battleReq("alice", "b1", 2, 10)).GetBattle(); r.GetReplayed() {
		t.Fatalf("battle after recovery = %v", r)
	}
	if p := e.profile("alice"); p.GetWins()+p.GetLosses() != 1 || p.GetVersion() != 3 {
		t.Fatalf("state after recovery: %v", p)
	}
	if c := e.battle.calls.Load(); c != 2 {
		t.Fatalf("battle calls = %d, want 2", c)
	}
}
