package queue

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
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

// steps is the source of a property test's random choices: the fuzzer's
// bytes first, then a PCG stream from a fixed seed, so that a seed corpus
// entry with no bytes replays the seeded run exactly.
type steps struct {
	data []byte
	rnd  *rand.Rand
}

func newSteps(seed1, seed2 uint64, data []byte) *steps {
	return &steps{data: data, rnd: rand.New(rand.NewPCG(seed1, seed2))}
}

// IntN returns a choice in [0, n), n > 0.
func (s *steps) IntN(n int) int {
	switch {
	case len(s.data) >= 1 && n <= 256:
		v := int(s.data[0]) % n
		s.data = s.data[1:]
		return v
	case len(s.data) >= 2:
		v := int(binary.LittleEndian.Uint16(s.data)) % n
		s.data = s.data[2:]
		return v
	}
	s.data = nil
	return s.rnd.IntN(n)
}
