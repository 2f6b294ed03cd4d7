package queue

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestETAWithinTwentyPercent: under a steady pace, the ETA a ticket is
// given when it joins, and the ETA every waiter reads in a later snapshot,
// are within 20 % of how long it then actually waits. The second case holds
// releases back to half the configured rate (the gate's room), which only a
// measured rate gets right.
func TestETAWithinTwentyPercent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max      int // per Release call
		wantRate float64
	}{
		{"paced", 1 << 30, 100},
		{"room-limited", 5, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQ(t, paced)
			rnd := rand.New(rand.NewPCG(9, 9))
			type promise struct {
				at  time.Time
				eta time.Duration
			}
			promised := map[TicketID][]promise{}
			now, n, checked := t0, 0, 0
			var snap []Status
			var worst float64
			var worstAt time.Duration
			var mid Stats
			for now.Before(at(4 * time.Minute)) {
				now = now.Add(time.Duration(50+rnd.IntN(100)) * time.Millisecond)
				if now.Before(at(2 * time.Minute)) { // 150 arrivals/s for 2 min
					for range int(now.Sub(t0).Seconds()*150) - n {
						st, err := q.Join(fmt.Sprint("p", n), now, false)
						if err != nil {
							t.Fatal(err)
						}
						n++
						promised[st.Ticket.ID] = []promise{{now, st.ETA}}
					}
				}
				if now.Sub(t0)%(10*time.Second) < 150*time.Millisecond { // a snapshot every ~10 s
					snap = q.AppendPositions(snap[:0], now)
					for _, st := range snap {
						promised[st.Ticket.ID] = append(promised[st.Ticket.ID], promise{now, st.ETA})
					}
				}
				if mid.Joined == 0 && !now.Before(at(2*time.Minute)) {
					mid = q.Stats(now)
				}
				for _, tk := range q.AppendRelease(nil, now, tc.max) {
					for _, p := range promised[tk.ID] {
						wait := now.Sub(p.at)
						if p.at.Before(at(5*time.Second)) || wait < 5*time.Second {
							continue // before the rate could be measured, or too short to judge
						}
						checked++
						off := (p.eta - wait).Seconds() / wait.Seconds()
						if off > worst || -off > worst {
							worst, worstAt = max(off, -off), p.at.Sub(t0)
						}
						if off > 0.2 || off < -0.2 {
							t.Fatalf("ticket %v: ETA %v given at %v, waited %v (%.0f%% off)",
								tk.ID, p.eta, p.at.Sub(t0), wait, 100*off)
						}
					}
					delete(promised, tk.ID)
				}
			}
			st := mid // while the line is still long
			if !st.Measured || st.MeasuredPerSecond < 0.95*tc.wantRate || st.MeasuredPerSecond > 1.05*tc.wantRate {
				t.Fatalf("measured %v/s (%v), want %v", st.MeasuredPerSecond, st.Measured, tc.wantRate)
			}
			if checked < 5000 {
				t.Fatalf("only %d ETAs checked", checked)
			}
			t.Logf("%d ETAs checked, worst %.1f%% off (given at %v); measured %.1f/s", checked, 100*worst, worstAt, st.MeasuredPerSecond)
		})
	}
}

// TestETAUnknownWhenFrozen: a line that releases nothing has no ETA.
func TestETAUnknownWhenFrozen(t *testing.T) {
	q := newQ(t, func(c *Config) { c.Mode = Queueing })
	st, err := q.Join("a", t0, true)
	if err != nil || st.ETA != NoETA || st.Position != 1 {
		t.Fatalf("queueing join: %+v %v", st, err)
	}
	mustSetMode(t, q, Paced, t0)
	if st := mustPos(t, q, st.Ticket.ID, t0); st.ETA != 10*time.Millisecond {
		t.Fatalf("paced ETA %v, want 10ms (configured 100/s)", st.ETA)
	}
}
