package queue

import (
	"strconv"
	"testing"
	"time"
)

const benchWaiters = 80_000

// benchLine is a paced line with 80,000 waiters and their tickets.
func benchLine(b *testing.B) (*Queue, []TicketID) {
	b.Helper()
	q := newQ(b, func(c *Config) { c.Mode = Paced; c.MaxLength = MaxMaxLength })
	ids := make([]TicketID, benchWaiters)
	for i := range ids {
		st, err := q.Join("player-"+strconv.Itoa(i), t0, false)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = st.Ticket.ID
	}
	return q, ids
}

// BenchmarkJoin: one Join onto a line of 80,000 to 180,000 waiters.
func BenchmarkJoin(b *testing.B) {
	names := make([]string, 1024)
	for i := range names {
		names[i] = "player-" + strconv.Itoa(i)
	}
	q, _ := benchLine(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%100_000 == 0 && i > 0 {
			b.StopTimer()
			q, _ = benchLine(b)
			b.StartTimer()
		}
		if _, err := q.Join(names[i%len(names)], t0, false); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkRelease: one Release call on a line of about 80,000, at 1,000 per
// 10 s called every 10 ms (1 ticket a call) and every 1 s (100 a call).
func BenchmarkRelease(b *testing.B) {
	for _, step := range []time.Duration{10 * time.Millisecond, time.Second} {
		b.Run(step.String(), func(b *testing.B) {
			q, _ := benchLine(b)
			now := t0
			var dst []Ticket
			released := 0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(step)
				dst = q.AppendRelease(dst[:0], now, 1<<30)
				released += len(dst)
				if q.normal.live < benchWaiters/2 {
					b.StopTimer()
					q, _ = benchLine(b)
					now = t0
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(released)/float64(b.N), "tickets/op")
		})
	}
}

// BenchmarkPosition: one Position read among 80,000 waiters.
func BenchmarkPosition(b *testing.B) {
	q, ids := benchLine(b)
	q.Release(at(10 * time.Second)) // a measured rate and a moved head
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i = (i + 7919) % len(ids)
		if _, err := q.Position(ids[i], at(10*time.Second)); err != nil && i >= 1000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendPositions: the whole line of 80,000 in one call (the form
// for a gate pushing every waiter's place every 2 s); ns/op is per line.
func BenchmarkAppendPositions(b *testing.B) {
	q, _ := benchLine(b)
	var dst []Status
	b.ReportAllocs()
	for b.Loop() {
		dst = q.AppendPositions(dst[:0], at(time.Second))
	}
}
