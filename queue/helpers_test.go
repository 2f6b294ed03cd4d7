package queue

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// newQ builds a Queue from the defaults changed by edit.
func newQ(t testing.TB, edit func(*Config)) *Queue {
	t.Helper()
	cfg := DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	q, err := New(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func paced(c *Config) { c.Mode = Paced }

// fill joins n players at now and returns their tickets.
func fill(t testing.TB, q *Queue, n int, now time.Time) []Ticket {
	t.Helper()
	out := make([]Ticket, 0, n)
	for i := range n {
		st, err := q.Join(fmt.Sprintf("p%d", i), now, false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, st.Ticket)
	}
	return out
}

// checkConservation asserts Joined = Admitted + Length + Held + Dropped.
func checkConservation(t testing.TB, q *Queue, now time.Time) Stats {
	t.Helper()
	st := q.Stats(now)
	if got := st.Admitted + uint64(st.Length) + uint64(st.Held) + st.Dropped; got != st.Joined {
		t.Fatalf("joined %d != admitted %d + waiting %d + held %d + dropped %d",
			st.Joined, st.Admitted, st.Length, st.Held, st.Dropped)
	}
	return st
}

func mustPos(t testing.TB, q *Queue, id TicketID, now time.Time) Status {
	t.Helper()
	st, err := q.Position(id, now)
	if err != nil {
		t.Fatalf("Position(%v): %v", id, err)
	}
	return st
}
