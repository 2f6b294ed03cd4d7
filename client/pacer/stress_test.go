package pacer

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

// Many goroutines on the real clock, mixed priorities, cancels and
// pressure changes: every Wait returns exactly one outcome, the counters
// add up, and the queue ends empty. Mostly for -race.
func TestStressRealClock(t *testing.T) {
	p := New(Config{Rate: 4000, MinRate: 1000, Capacity: 4}, clock.Real{})
	const workers, each = 16, 50
	var ok, evicted, full, canceled atomic.Int64
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range each {
				c, cancel := context.WithCancel(ctx)
				if r.IntN(5) == 0 {
					cancel() // sometimes before, sometimes while waiting
				} else if r.IntN(5) == 0 {
					go cancel()
				}
				if r.IntN(10) == 0 {
					p.SetPressure(r.Float64())
				}
				err := p.Wait(c, Priority(r.IntN(levels)))
				cancel()
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrEvicted):
					evicted.Add(1)
				case errors.Is(err, ErrQueueFull):
					full.Add(1)
				case errors.Is(err, context.Canceled):
					canceled.Add(1)
				default:
					t.Errorf("Wait: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("stress run did not finish in time")
	}
	s := p.Stats()
	if int64(s.Released) != ok.Load() || int64(s.Evicted) != evicted.Load() || int64(s.Full) != full.Load() || int64(s.Canceled) != canceled.Load() {
		t.Fatalf("stats %+v; seen ok %d evicted %d full %d canceled %d", s, ok.Load(), evicted.Load(), full.Load(), canceled.Load())
	}
	if total := ok.Load() + evicted.Load() + full.Load() + canceled.Load(); total != workers*each {
		t.Fatalf("%d outcomes for %d calls", total, workers*each)
	}
	if p.Len() != 0 {
		t.Fatalf("Len = %d at the end", p.Len())
	}
	t.Logf("%+v", s)
}
