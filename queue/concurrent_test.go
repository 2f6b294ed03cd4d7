package queue

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentUse: many goroutines join, read, leave, resume and cancel
// while one releases; run with -race. Every ticket ends up accounted for and
// every admitted one is handed out exactly once.
func TestConcurrentUse(t *testing.T) {
	q := newQ(t, func(c *Config) { c.Mode = Paced; c.Rate = Rate{N: 1000, Interval: time.Second} })
	var clock atomic.Int64 // simulated ns since t0, moved by the releaser
	now := func() time.Time { return t0.Add(time.Duration(clock.Load())) }
	var wg sync.WaitGroup
	var mu sync.Mutex
	handed := map[TicketID]int{}
	const players, perPlayer = 8, 300
	for g := range players {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perPlayer {
				st, err := q.Join(fmt.Sprintf("g%d-%d", g, i), now(), i%7 == 0)
				if err != nil {
					t.Error(err)
					return
				}
				if st.State == Admitted {
					mu.Lock()
					handed[st.Ticket.ID]++
					mu.Unlock()
					continue
				}
				id := st.Ticket.ID
				_, _ = q.Position(id, now())
				switch i % 5 {
				case 0:
					if q.Leave(id, now()) == nil {
						if st, err := q.Resume(id, st.Ticket.PlayerID, now()); err == nil && st.State == Admitted {
							mu.Lock()
							handed[id]++
							mu.Unlock()
						}
					}
				case 1:
					_ = q.Cancel(id, now())
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 5000; i++ {
			clock.Add(int64(time.Millisecond))
			got := q.Release(now())
			mu.Lock()
			for _, tk := range got {
				handed[tk.ID]++
			}
			mu.Unlock()
			if i%100 == 0 {
				_ = q.SetMode([]Mode{Paced, Open, Queueing, Paced}[i/100%4], now())
			}
		}
	}()
	wg.Wait()
	<-done
	mustSetMode(t, q, Open, now())
	for _, tk := range q.Release(now().Add(time.Second)) {
		handed[tk.ID]++
	}
	st := checkConservation(t, q, now().Add(time.Second))
	if st.Joined != players*perPlayer || st.Length != 0 || st.Admitted != uint64(len(handed)) {
		t.Fatalf("stats %+v, %d handed out", st, len(handed))
	}
	for id, n := range handed {
		if n != 1 {
			t.Fatalf("ticket %v handed out %d times", id, n)
		}
	}
}
