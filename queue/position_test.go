package queue

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// FuzzPositionsNeverGoBack drives a line with joins (both lanes), releases,
// leaves, resumes, cancels, grace expiries and mode switches that the input
// chooses (then a seeded stream), and checks after every step that no
// ticket's position went up, that each lane is ranked 1..n in arrival
// order, that Position agrees with AppendPositions, and that no ticket is
// lost. The seed corpus is the former fixed-seed run: 20,000 steps from
// PCG(7, 7).
func FuzzPositionsNeverGoBack(f *testing.F) {
	f.Add(uint64(7), uint64(7), uint32(20_000), []byte(nil))
	f.Add(uint64(1), uint64(1), uint32(2_000), []byte{0, 10, 0, 50, 3, 70, 0, 0, 93, 1, 0, 80, 1})
	f.Fuzz(func(t *testing.T, seed1, seed2 uint64, n uint32, ops []byte) {
		positionSteps(t, newSteps(seed1, seed2, ops), int(min(n, 20_000)), n >= 20_000 && len(ops) == 0)
	})
}

func positionSteps(t *testing.T, rnd *steps, n int, full bool) {
	q := newQ(t, func(c *Config) { c.Mode = Paced; c.Grace = 20 * time.Second })
	last := map[TicketID]int{}
	var ids []TicketID
	modes := []Mode{Paced, Paced, Paced, Queueing, Open, Closed}
	now := t0
	var buf []Status
	for step := range n {
		now = now.Add(time.Duration(rnd.IntN(200)) * time.Millisecond)
		switch op := rnd.IntN(100); {
		case op < 40:
			join := q.Join
			if rnd.IntN(20) == 0 {
				join = q.JoinPriority
			}
			st, err := join(fmt.Sprint("p", step), now, false)
			if err == nil {
				ids = append(ids, st.Ticket.ID)
			} else if !errors.Is(err, ErrClosed) {
				t.Fatal(err)
			}
		case op < 60:
			q.Release(now)
		case op < 75 && len(ids) > 0:
			_ = q.Leave(ids[rnd.IntN(len(ids))], now)
		case op < 90 && len(ids) > 0:
			id := ids[rnd.IntN(len(ids))]
			if st, err := q.Position(id, now); err == nil {
				_, _ = q.Resume(id, st.Ticket.PlayerID, now)
			}
		case op < 93 && len(ids) > 0:
			_ = q.Cancel(ids[rnd.IntN(len(ids))], now)
		case op < 94:
			if err := q.SetMode(modes[rnd.IntN(len(modes))], now); err != nil {
				t.Fatal(err)
			}
		}
		buf = q.AppendPositions(buf[:0], now)
		var want [2]int
		var lastSeq [2]uint64
		for _, st := range buf {
			lane := 0
			if st.Ticket.Priority {
				lane = 1
			}
			want[lane]++
			if st.Position != want[lane] || st.Ticket.Seq <= lastSeq[lane] {
				t.Fatalf("step %d: lane %d ticket seq %d at position %d, want %d in arrival order",
					step, lane, st.Ticket.Seq, st.Position, want[lane])
			}
			lastSeq[lane] = st.Ticket.Seq
			if p, ok := last[st.Ticket.ID]; ok && st.Position > p {
				t.Fatalf("step %d: ticket %v went back from %d to %d", step, st.Ticket.ID, p, st.Position)
			}
			last[st.Ticket.ID] = st.Position
		}
		if step%50 == 0 {
			for _, st := range buf {
				if got := mustPos(t, q, st.Ticket.ID, now); got.Position != st.Position || got.State != st.State {
					t.Fatalf("Position %+v, AppendPositions %+v", got, st)
				}
			}
		}
		checkConservation(t, q, now)
	}
	st := checkConservation(t, q, now)
	if full && (st.Admitted == 0 || st.Dropped == 0 || st.Joined < 5000) {
		t.Fatalf("the run did not exercise enough: %+v", st)
	}
}

// TestPriorityLaneFirst: a priority ticket is released before the normal
// lane, and does not move normal tickets back (their ETA grows instead).
func TestPriorityLaneFirst(t *testing.T) {
	q := newQ(t, paced)
	normal := fill(t, q, 10, t0)
	before := mustPos(t, q, normal[0].ID, t0)
	var prio []Ticket
	for i := range 3 {
		st, err := q.JoinPriority(fmt.Sprint("r", i), t0, false)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Ticket.Priority || st.Position != i+1 {
			t.Fatalf("priority join %d: %+v", i, st)
		}
		prio = append(prio, st.Ticket)
	}
	after := mustPos(t, q, normal[0].ID, t0)
	if after.Position != before.Position {
		t.Fatalf("normal position moved from %d to %d", before.Position, after.Position)
	}
	if want := before.ETA + 3*10*time.Millisecond; after.ETA != want {
		t.Fatalf("normal ETA %v, want %v (3 priority tickets at 100/s ahead)", after.ETA, want)
	}
	got := q.Release(at(50 * time.Millisecond))
	if len(got) != 5 {
		t.Fatalf("released %d, want 5", len(got))
	}
	for i, tk := range got {
		want := normal[0].ID
		if i < 3 {
			want = prio[i].ID
		} else {
			want = normal[i-3].ID
		}
		if tk.ID != want {
			t.Fatalf("release %d: %v, want %v", i, tk.ID, want)
		}
	}
}
