package queue

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// A gate restarts: its old line's players come back in a scrambled order
// and take their places by their original join time, ahead of a player who
// joined the new line after the restart but before they came back.
func TestRejoinByOriginalJoinTime(t *testing.T) {
	old := newQ(t, paced)
	var tickets []Ticket
	for i := range 6 {
		st, err := old.Join(fmt.Sprintf("p%d", i), at(time.Duration(i)*time.Second), false)
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, st.Ticket)
	}
	q := newQ(t, func(c *Config) { c.Mode = Queueing }) // the new line, at t0
	late, err := q.Join("late", at(20*time.Second), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{3, 0, 5, 1} {
		tk := tickets[i]
		st, err := q.Rejoin(tk.ID, tk.PlayerID, tk.Joined, at(21*time.Second), false)
		if err != nil || st.State != Waiting || st.Ticket.ID != tk.ID || !st.Ticket.Joined.Equal(tk.Joined) {
			t.Fatalf("Rejoin p%d: %+v %v", i, st, err)
		}
	}
	now := at(22 * time.Second)
	want := map[string]int{"p0": 1, "p1": 2, "p3": 3, "p5": 4, "late": 5}
	for _, id := range []TicketID{tickets[0].ID, tickets[1].ID, tickets[3].ID, tickets[5].ID, late.Ticket.ID} {
		st := mustPos(t, q, id, now)
		if st.Position != want[st.Ticket.PlayerID] {
			t.Errorf("%s at %d, want %d", st.Ticket.PlayerID, st.Position, want[st.Ticket.PlayerID])
		}
	}
	var order []string
	for _, s := range q.AppendPositions(nil, now) {
		order = append(order, fmt.Sprintf("%s@%d", s.Ticket.PlayerID, s.Position))
	}
	if got := fmt.Sprint(order); got != "[p0@1 p1@2 p3@3 p5@4 late@5]" {
		t.Fatalf("AppendPositions: %s", got)
	}
	if err := q.SetMode(Open, now); err != nil {
		t.Fatal(err)
	}
	var released []string
	for _, tk := range q.Release(now) {
		released = append(released, tk.PlayerID)
	}
	if got := fmt.Sprint(released); got != "[p0 p1 p3 p5 late]" {
		t.Fatalf("released %s", got)
	}
	if st := checkConservation(t, q, now); st.Joined != 5 || st.Admitted != 5 {
		t.Fatalf("stats %+v", st)
	}
}

// A rejoined ticket is the line's own from then on: presenting it again is
// Resume, with Resume's refusals.
func TestRejoinKnownTicketIsResume(t *testing.T) {
	q := newQ(t, paced)
	const id = TicketID(77)
	joined := at(-time.Minute)
	if _, err := q.Rejoin(id, "alice", joined, t0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Rejoin(id, "alice", joined, at(time.Second), false); !errors.Is(err, ErrTicketInUse) {
		t.Fatalf("second Rejoin while connected: %v, want ErrTicketInUse", err)
	}
	if _, err := q.Rejoin(id, "bob", joined, at(time.Second), false); !errors.Is(err, ErrWrongPlayer) {
		t.Fatalf("Rejoin by another player: %v, want ErrWrongPlayer", err)
	}
	if err := q.Leave(id, at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	st, err := q.Rejoin(id, "alice", joined, at(3*time.Second), false)
	if err != nil || st.State != Waiting || st.Position != 1 {
		t.Fatalf("Rejoin after Leave: %+v %v", st, err)
	}
	if err := q.Leave(id, at(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Resume(id, "alice", at(4*time.Second+q.grace)); !errors.Is(err, ErrTicketExpired) {
		t.Fatalf("Resume past grace: %v, want ErrTicketExpired", err)
	}
	checkConservation(t, q, at(time.Hour))
}

// Rejoin is refused as Join is, and admits at once as Join does; a join
// time in the future counts as now; a fresh ticket never takes the id of
// a returning one.
func TestRejoinRefusalsAndIDs(t *testing.T) {
	q := newQ(t, func(c *Config) { c.Mode = Closed })
	if _, err := q.Rejoin(1, "a", t0, t0, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	if _, err := q.Rejoin(1, "", t0, t0, true); !errors.Is(err, ErrBadPlayer) {
		t.Fatalf("empty player: %v", err)
	}
	q = newQ(t, func(c *Config) { c.MaxLength = 1; c.Mode = Paced })
	if _, err := q.Rejoin(1, "a", t0, t0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Rejoin(2, "b", at(-time.Hour), t0, false); !errors.Is(err, ErrLineFull) {
		t.Fatalf("full: %v", err)
	}
	q = newQ(t, nil) // open
	if st, err := q.Rejoin(9, "a", t0, t0, true); err != nil || st.State != Admitted || st.Ticket.ID != 9 {
		t.Fatalf("open, empty: %+v %v", st, err)
	}
	q = newQ(t, paced)
	next := q.nextID + 1
	st, err := q.Rejoin(next, "a", at(time.Hour), t0, false)
	if err != nil || !st.Ticket.Joined.Equal(t0) {
		t.Fatalf("future join time: %+v %v", st, err)
	}
	fresh, err := q.Join("b", t0, false)
	if err != nil || fresh.Ticket.ID == next {
		t.Fatalf("Join took the returning ticket's id: %+v %v", fresh, err)
	}
	if fresh.Position != 2 {
		t.Fatalf("fresh arrival at %d, want 2 (behind the returning one, same time)", fresh.Position)
	}
	checkConservation(t, q, t0)
}

// TestRejoinMatchesModel runs random joins, rejoins, leaves, resumes,
// cancels and releases against a reference line that sorts by (join time,
// returning first, arrival) and checks every position and the release
// order.
func TestRejoinMatchesModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { rejoinModel(t, newSteps(seed, 1, nil)) })
	}
}

func FuzzRejoinModel(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) { rejoinModel(t, newSteps(7, 7, data)) })
}

type modelTkt struct {
	id     TicketID
	player string
	key    int64
	ret    bool
	seq    int
	away   bool
}

func rejoinModel(t *testing.T, r *steps) {
	q := newQ(t, func(c *Config) { c.Mode = Queueing; c.Grace = time.Hour })
	var line []*modelTkt
	seq := 0
	now := t0
	order := func() {
		slices.SortStableFunc(line, func(a, b *modelTkt) int {
			switch {
			case a.key != b.key:
				return cmp.Compare(a.key, b.key)
			case a.ret != b.ret:
				if a.ret {
					return -1
				}
				return 1
			case a.ret:
				return cmp.Compare(a.id, b.id)
			}
			return a.seq - b.seq
		})
	}
	nextRet := TicketID(1 << 62)
	for range 200 {
		now = now.Add(time.Duration(r.IntN(3)) * time.Second)
		seq++
		switch op := r.IntN(6); {
		case op == 0:
			st, err := q.Join(fmt.Sprint("n", seq), now, false)
			if err != nil {
				t.Fatal(err)
			}
			line = append(line, &modelTkt{id: st.Ticket.ID, player: st.Ticket.PlayerID, key: now.UnixNano(), seq: seq})
		case op == 1:
			nextRet++
			joined := now.Add(-time.Duration(r.IntN(600)) * time.Second)
			st, err := q.Rejoin(nextRet, fmt.Sprint("r", seq), joined, now, false)
			if err != nil {
				t.Fatal(err)
			}
			line = append(line, &modelTkt{id: nextRet, player: st.Ticket.PlayerID, key: joined.UnixNano(), ret: true, seq: seq})
		case op == 2 && len(line) > 0:
			m := line[r.IntN(len(line))]
			if err := q.Leave(m.id, now); err != nil {
				t.Fatal(err)
			}
			m.away = true
		case op == 3 && len(line) > 0:
			m := line[r.IntN(len(line))]
			_, err := q.Resume(m.id, m.player, now)
			if m.away != (err == nil) {
				t.Fatalf("Resume of %+v: %v", m, err)
			}
			m.away = false
		case op == 4 && len(line) > 0:
			i := r.IntN(len(line))
			if err := q.Cancel(line[i].id, now); err != nil {
				t.Fatal(err)
			}
			line = slices.Delete(line, i, i+1)
		case op == 5:
			order()
			k := min(r.IntN(4), len(line))
			if err := q.SetMode(Open, now); err != nil {
				t.Fatal(err)
			}
			got := q.AppendRelease(nil, now, k)
			if err := q.SetMode(Queueing, now); err != nil {
				t.Fatal(err)
			}
			var want []TicketID
			for _, m := range line[:k] {
				if !m.away {
					want = append(want, m.id)
				}
			}
			var ids []TicketID
			for _, tk := range got {
				ids = append(ids, tk.ID)
			}
			if !slices.Equal(ids, want) {
				t.Fatalf("released %v, want %v", ids, want)
			}
			line = line[k:]
		}
		order()
		all := q.AppendPositions(nil, now)
		if len(all) != len(line) {
			t.Fatalf("%d in the line, model %d", len(all), len(line))
		}
		for i, m := range line {
			if all[i].Ticket.ID != m.id || all[i].Position != i+1 {
				t.Fatalf("place %d: %+v, want %+v", i+1, all[i], m)
			}
			if st := mustPos(t, q, m.id, now); st.Position != i+1 {
				t.Fatalf("Position of %+v: %d, want %d", m, st.Position, i+1)
			}
		}
	}
	checkConservation(t, q, now)
}
