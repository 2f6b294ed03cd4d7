package logic

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/pgtest"
	"github.com/leveehq/levee/internal/priority"
	"github.com/prometheus/client_golang/prometheus"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// BenchmarkBuy measures purchases through gRPC into an in-process server
// with real bbolt files in a temp dir (one fsync per group commit), from 32
// concurrent callers. Each caller logs in a fresh player every 90 purchases.
func BenchmarkBuy(b *testing.B) {
	for _, shards := range []int{1, 8} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) { benchmarkBuy(b, shards) })
	}
}

func benchmarkBuy(b *testing.B, shards int) {
	e := start(b, envOpts{cfg: func(c *Config) { c.Shards = shards }})
	var players atomic.Int64
	b.SetParallelism(16)
	count0, sum0 := histogram(b, e.srv.m.batchSize)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		var id string
		var rid uint64
		for pb.Next() {
			if rid%90 == 0 {
				id = fmt.Sprintf("bench-%d", players.Add(1))
				if _, err := e.cli.Do(ctx, loginReq(id)); err != nil {
					b.Error(err)
					return
				}
			}
			rid++
			r, err := e.cli.Do(ctx, buyReq(id, rid, "potion", 1))
			if err != nil || view(r).GetBuyItem() == nil {
				b.Errorf("buy: %v %v", r, err)
				return
			}
		}
	})
	b.StopTimer()
	count, sum := histogram(b, e.srv.m.batchSize)
	if c, s := histogram(b, e.srv.m.commitTime); c > 0 {
		b.ReportMetric(s/float64(c)*1e6, "µs/commit")
	}
	if count > count0 {
		b.ReportMetric((sum-sum0)/float64(count-count0), "mutations/commit")
	}
}

// BenchmarkBuyLongLived is BenchmarkBuy (one shard) for players with a
// long history: each of the 32 callers keeps one rich player for the whole
// run, so every purchase finds thousands of earlier outcomes of its player
// (hundreds of them inside the record, before the outcomes had a bucket of
// their own).
func BenchmarkBuyLongLived(b *testing.B) {
	ts := newTestStore(b, StoreBolt)
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("long-%d", i)
	}
	seedRich(b, ts, ids...)
	e := start(b, envOpts{store: ts})
	var players atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		id := ids[players.Add(1)-1]
		var rid uint64
		for pb.Next() {
			rid++
			r, err := e.cli.Do(ctx, buyReq(id, rid, "potion", 1))
			if err != nil || view(r).GetBuyItem() == nil {
				b.Errorf("buy: %v %v", r, err)
				return
			}
		}
	})
	b.StopTimer()
	if c, s := histogram(b, e.srv.m.commitTime); c > 0 {
		b.ReportMetric(s/float64(c)*1e6, "µs/commit")
	}
}

// BenchmarkAdmit measures the shard admission check alone (Server.admit on
// a shard with no goroutine, default configuration, 1 ms per request as if
// measured): accept puts a request on the channel (and the loop takes it
// off again), refuse finds the channel at the 90 % threshold (the fill
// rule), refuse-wait finds 60 requests queued, 60 ms of estimated wait
// against -queue-max-wait 50 ms (the time rule).
func BenchmarkAdmit(b *testing.B) {
	s := &Server{cfg: DefaultConfig(), m: newMetrics(prometheus.NewRegistry()), rejectEarly: true}
	sh := newShard(0, nil, s)
	sh.perOp.Store(int64(time.Millisecond))
	o := &op{class: priority.Default}
	b.Run("accept", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.admit(sh, o); err != nil {
				b.Fatal(err)
			}
			<-sh.ch
		}
	})
	b.Run("refuse-wait", func(b *testing.B) {
		for len(sh.ch) < 60 {
			sh.ch <- o
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.admit(sh, o); err != sh.slow[priority.Default] {
				b.Fatalf("admit = %v, want the time rule's refusal", err)
			}
		}
	})
	b.Run("refuse", func(b *testing.B) {
		for len(sh.ch) < sh.limit[priority.Default] {
			sh.ch <- o
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.admit(sh, o); err != sh.refusal[priority.Default] {
				b.Fatalf("admit = %v, want the fill rule's refusal", err)
			}
		}
	})
	b.Run("refuse-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := s.admit(sh, o); err == nil {
					b.Error("admitted past the threshold")
					return
				}
			}
		})
	})
}

// BenchmarkBattlePick measures the battle client's choice of an instance
// (three instances, -battle-pushback on, the real clock, connections not
// yet dialled): first picks a first attempt's instance among ready ones,
// retry one of the others, full finds every instance at its adaptive limit
// (a local refusal), cooling asks allCooling with two of the three cooling,
// and success is the adaptive limit's bookkeeping after a call.
func BenchmarkBattlePick(b *testing.B) {
	c, err := dialBattle(grpcdial.Insecure(), []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, time.Second, nil, true, clock.Real{}, newMetrics(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.close()
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if i, _, _ := c.pick(-1, false); i < 0 {
				b.Fatal("no instance")
			}
		}
	})
	b.Run("retry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if i, _, _ := c.pick(0, false); i <= 0 {
				b.Fatal("no other instance")
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		for i := range c.insts() {
			setInflight(c, i, aimdMax)
		}
		b.ReportAllocs()
		for b.Loop() {
			if i, _, full := c.pick(-1, false); i >= 0 || !full {
				b.Fatal("picked an instance at its limit")
			}
		}
	})
	b.Run("cooling", func(b *testing.B) {
		c.insts()[0].limit.cool(time.Now(), time.Hour)
		c.insts()[1].limit.cool(time.Now(), time.Hour)
		b.ReportAllocs()
		for b.Loop() {
			if _, all := c.allCooling(time.Now()); all {
				b.Fatal("all cooling")
			}
		}
	})
	b.Run("success", func(b *testing.B) {
		l := &aimd{tolerance: 2}
		now := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Millisecond)
			l.success(now, 5*time.Millisecond, 400)
		}
	})
}

// setInflight sets instance i's count of outstanding calls.
func setInflight(c *battleClient, i int, n int64) { c.insts()[i].limit.inflight.Store(n) }

// BenchmarkCommit measures one shard's group commit alone (shardStore.put,
// no gRPC, no game code): each op is one transaction of n purchases, n
// players' records and their n outcomes under new keys, on bbolt (a file
// in a temp dir, fsync on), on PostgreSQL as the tests run it (pgtest's
// shared server, fsync off) and on a durable PostgreSQL of its own (fsync
// and synchronous_commit on, as in production). commits/s and
// mutations/s are the figures to record.
func BenchmarkCommit(b *testing.B) {
	for _, kind := range []string{StoreBolt, StorePostgres, "postgres-durable"} {
		for _, n := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("%s/batch=%d", kind, n), func(b *testing.B) { benchmarkCommit(b, kind, n) })
		}
	}
}

func benchmarkCommit(b *testing.B, kind string, n int) {
	var ts *testStore
	switch kind {
	case "postgres-durable":
		srv, err := pgtest.Start(pgtest.Options{Durable: true})
		if errors.Is(err, pgtest.ErrNotInstalled) {
			pgtest.Shared(b) // skips, or fails under LEVEE_REQUIRE_POSTGRES
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Stop() })
		ts = &testStore{kind: StorePostgres, url: srv.NewDatabase(b)}
	default:
		ts = newTestStore(b, kind)
	}
	st, done := ts.open(b)
	defer done()
	at := time.Now()
	recs := make(map[string]*record, n)
	players := make([]string, n)
	for i := range players {
		players[i] = fmt.Sprintf("bench-%d", i)
		recs[players[i]] = &record{state: newPlayer(players[i]), version: 1}
	}
	enc, err := encodeOutcome(at, buyReq("bench", 1, "potion", 1).GetCall(), &leveev2.LogicReply{Version: 2})
	if err != nil {
		b.Fatal(err)
	}
	var rid uint64
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		rid++
		outs := make(map[string]outcome, n)
		for _, id := range players {
			key := requestKey(id, rid)
			outs[key] = outcome{key: key, at: at, enc: enc}
		}
		if err := st.put(recs, outs, nil); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start).Seconds()
	b.ReportMetric(float64(rid)/elapsed, "commits/s")
	b.ReportMetric(float64(rid)*float64(n)/elapsed, "mutations/s")
}
