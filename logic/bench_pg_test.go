package logic

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/pgschema"
	"github.com/leveehq/levee/internal/pgtest"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// BenchmarkCommitShards measures what one durable PostgreSQL primary
// commits when many shards commit at once (the capacity sheet's question,
// docs/capacity.md): S shards, each its own goroutine and connection,
// each committing batches of n purchases (n records, n outcomes) as fast
// as it can, against a server of its own with fsync and synchronous_commit
// on (its WAL flushes are shared by the transactions that commit together:
// PostgreSQL's own group commit). Each op is one commit of one shard.
// Reported: commits/s and mutations/s over all shards, and the CPU the
// server spent (every PostgreSQL process: /proc, the postmaster's children
// and its reaped ones) and the benchmark process spent (the store's Go
// side: pgx, encoding), in µs per mutation. On a 2-core machine the server
// and the benchmark share the cores.
func BenchmarkCommitShards(b *testing.B) {
	srv, err := pgtest.Start(pgtest.Options{Durable: true})
	if errors.Is(err, pgtest.ErrNotInstalled) {
		pgtest.Shared(b) // skips, or fails under LEVEE_REQUIRE_POSTGRES
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	for _, shards := range []int{1, 8, 32} {
		for _, n := range []int{1, 16} {
			b.Run(fmt.Sprintf("shards=%d/batch=%d", shards, n), func(b *testing.B) { benchmarkCommitShards(b, srv, shards, n) })
		}
	}
}

func benchmarkCommitShards(b *testing.B, srv *pgtest.Server, shards, n int) {
	url := srv.NewDatabase(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgschema.Connect(ctx, url, int32(shards+1))
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if err := pgschema.Migrate(ctx, pool, shards, nil); err != nil {
		b.Fatal(err)
	}
	var dataDir string
	if err := pool.QueryRow(ctx, `SHOW data_directory`).Scan(&dataDir); err != nil {
		b.Fatal(err)
	}
	at := time.Now()
	enc, err := encodeOutcome(at, buyReq("bench", 1, "potion", 1).GetCall(), &leveev2.LogicReply{Version: 2})
	if err != nil {
		b.Fatal(err)
	}
	sts := make([]shardStore, shards)
	recs := make([]map[string]*record, shards)
	for s := range sts {
		if sts[s], err = newPGStore(pool, arenaState).forShard(ctx, s, fence{}); err != nil {
			b.Fatal(err)
		}
		recs[s] = make(map[string]*record, n)
		for i := range n {
			id := fmt.Sprintf("bench-%d-%d", s, i)
			recs[s][id] = &record{state: newPlayer(id), version: 1}
		}
	}
	var next atomic.Int64
	var failed atomic.Value
	b.ResetTimer()
	pg0, self0 := pgTicks(b, dataDir), selfCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for s := range sts {
		wg.Go(func() {
			var rid uint64
			for next.Add(1) <= int64(b.N) {
				rid++
				outs := make(map[string]outcome, n)
				for id := range recs[s] {
					key := requestKey(id, rid)
					outs[key] = outcome{key: key, at: at, enc: enc}
				}
				if err := sts[s].put(recs[s], outs, nil); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	pg1, self1 := pgTicks(b, dataDir), selfCPU()
	b.StopTimer()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	muts := float64(b.N) * float64(n)
	b.ReportMetric(float64(b.N)/elapsed, "commits/s")
	b.ReportMetric(muts/elapsed, "mutations/s")
	b.ReportMetric(float64(pg1-pg0)/clkTck*1e6/muts, "pg-µs/mutation")
	b.ReportMetric((self1-self0).Seconds()*1e6/muts, "go-µs/mutation")
	b.ReportMetric(float64(pg1-pg0)/clkTck/elapsed, "pg-cores")
}

// clkTck is /proc's tick (USER_HZ), 100 on Linux.
const clkTck = 100

// pgTicks is the CPU ticks (utime+stime) of the PostgreSQL server whose
// data directory is dir: its postmaster (with its reaped children's,
// cutime+cstime) and its live children.
func pgTicks(b *testing.B, dir string) int64 {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		b.Fatal(err)
	}
	var t int64
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		s, err := os.ReadFile(p)
		if err != nil {
			continue // exited
		}
		i := strings.LastIndexByte(string(s), ')')
		f := strings.Fields(string(s[i+2:])) // from state (field 3)
		if len(f) < 15 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, _ := strconv.Atoi(f[1])
		if pid != pm && ppid != pm {
			continue
		}
		for _, k := range []int{11, 12} { // utime, stime
			v, _ := strconv.ParseInt(f[k], 10, 64)
			t += v
		}
		if pid == pm {
			for _, k := range []int{13, 14} { // cutime, cstime
				v, _ := strconv.ParseInt(f[k], 10, 64)
				t += v
			}
		}
	}
	return t
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
