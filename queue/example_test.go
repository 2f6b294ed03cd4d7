package queue_test

import (
	"fmt"
	"time"

	"github.com/leveehq/levee/queue"
)

// The seed's launch: the line opens in Queueing mode, players join and see
// their place, then from T-0 it releases 1,000 per 10 s, one every 10 ms.
func Example() {
	start := time.Date(2026, 5, 1, 9, 55, 0, 0, time.UTC)
	cfg := queue.DefaultConfig()
	cfg.Mode = queue.Queueing
	q, err := queue.New(cfg, start)
	if err != nil {
		panic(err)
	}
	var last queue.Status
	for i := range 3 {
		last, _ = q.Join(fmt.Sprintf("player-%d", i), start, true)
	}
	fmt.Println(last.State, last.Position, last.ETA == queue.NoETA)

	t0 := start.Add(5 * time.Minute)
	_ = q.SetMode(queue.Paced, t0)
	st, _ := q.Position(last.Ticket.ID, t0)
	fmt.Println(st.State, st.Position, st.ETA)

	for _, tk := range q.Release(t0.Add(25 * time.Millisecond)) { // the gate's ticker
		fmt.Println("admit", tk.PlayerID)
	}
	st, _ = q.Position(last.Ticket.ID, t0.Add(25*time.Millisecond))
	fmt.Println(st.Position, st.ETA)
	// Output:
	// waiting 3 true
	// waiting 3 30ms
	// admit player-0
	// admit player-1
	// 1 10ms
}
