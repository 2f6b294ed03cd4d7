package queue

import (
	"errors"
	"testing"
	"time"
)

func TestOpenAdmitsAtOnce(t *testing.T) {
	q := newQ(t, nil)
	st, err := q.Join("a", t0, true)
	if err != nil || st.State != Admitted {
		t.Fatalf("open with room: %+v %v", st, err)
	}
	st, err = q.Join("b", t0, false)
	if err != nil || st.State != Waiting || st.Position != 1 {
		t.Fatalf("open without room: %+v %v", st, err)
	}
	// Room again, but someone is waiting: no passing them.
	st, err = q.Join("c", t0, true)
	if err != nil || st.State != Waiting || st.Position != 2 {
		t.Fatalf("open with a line: %+v %v", st, err)
	}
	if got := q.AppendRelease(nil, at(time.Millisecond), 1); len(got) != 1 || got[0].PlayerID != "b" {
		t.Fatalf("open release with room 1: %v", got)
	}
	if got := q.Release(at(2 * time.Millisecond)); len(got) != 1 || got[0].PlayerID != "c" {
		t.Fatalf("open release: %v", got)
	}
	checkConservation(t, q, t0)
}

// TestModeSwitchesLoseNobody walks the seed's timeline: queueing at T-5,
// paced from T-0, faster at T+5, open at T+15, with a maintenance close in
// between; every ticket is accounted for at every step.
func TestModeSwitchesLoseNobody(t *testing.T) {
	q := newQ(t, func(c *Config) { c.Mode = Queueing })
	fill(t, q, 20_000, t0) // T-5: line open, nothing forwarded
	for i := 1; i <= 300; i++ {
		if got := q.Release(at(time.Duration(i) * time.Second)); len(got) != 0 {
			t.Fatalf("queueing released %d", len(got))
		}
	}
	if st := q.Stats(at(5 * time.Minute)); st.OldestWait != 5*time.Minute || st.Length != 20_000 {
		t.Fatalf("stats at T-0: %+v", st)
	}
	mustSetMode(t, q, Paced, at(5*time.Minute)) // T-0
	released := 0
	now := at(5 * time.Minute)
	step := func(d time.Duration) {
		for end := now.Add(d); now.Before(end); {
			now = now.Add(100 * time.Millisecond)
			released += len(q.Release(now))
			checkConservation(t, q, now)
		}
	}
	step(time.Minute)
	if released != 6000 {
		t.Fatalf("first paced minute: %d, want 6,000 (no credit from the frozen time)", released)
	}
	mustSetMode(t, q, Closed, now) // maintenance: line kept, frozen
	_, err := q.Join("late", now, true)
	if d, ok := RetryAfter(err); !errors.Is(err, ErrClosed) || !ok || d != time.Minute {
		t.Fatalf("closed join: %v, retry-after %v", err, d)
	}
	step(30 * time.Second)
	if released != 6000 {
		t.Fatalf("closed released %d", released-6000)
	}
	mustSetMode(t, q, Paced, now)
	if err := q.SetRate(2000, 10*time.Second, now); err != nil { // T+5: faster
		t.Fatal(err)
	}
	step(30 * time.Second)
	if released != 12_000 {
		t.Fatalf("after 30 s at 200/s: %d, want 12,000", released)
	}
	mustSetMode(t, q, Queueing, now)
	step(10 * time.Second)
	mustSetMode(t, q, Open, now) // T+15: everyone waiting goes in
	step(100 * time.Millisecond)
	st := checkConservation(t, q, now)
	if released != 20_000 || st.Length != 0 || st.Admitted != 20_000 || st.RefusedClosed != 1 {
		t.Fatalf("released %d, stats %+v", released, st)
	}
}

func mustSetMode(t *testing.T, q *Queue, m Mode, now time.Time) {
	t.Helper()
	if err := q.SetMode(m, now); err != nil {
		t.Fatal(err)
	}
	if q.Mode() != m {
		t.Fatalf("mode %v, want %v", q.Mode(), m)
	}
}

// TestClosedKeepsLine: closing keeps the line, refuses new players (also in
// the priority lane) with the operator's retry-after, and lets away players
// resume.
func TestClosedKeepsLine(t *testing.T) {
	q := newQ(t, paced)
	tk := fill(t, q, 3, t0)
	if err := q.Leave(tk[2].ID, t0); err != nil {
		t.Fatal(err)
	}
	mustSetMode(t, q, Closed, t0)
	if err := q.SetRetryAfter(15 * time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, join := range []func(string, time.Time, bool) (Status, error){q.Join, q.JoinPriority} {
		_, err := join("new", t0, true)
		var r *RefusedError
		if !errors.As(err, &r) || !errors.Is(err, ErrClosed) || r.RetryAfter != 15*time.Minute {
			t.Fatalf("closed join: %v", err)
		}
	}
	if st, err := q.Resume(tk[2].ID, tk[2].PlayerID, at(time.Second)); err != nil || st.Position != 3 || st.ETA != NoETA {
		t.Fatalf("resume while closed: %+v %v", st, err)
	}
	if st := q.Stats(at(time.Second)); st.Length != 3 || st.RefusedClosed != 2 || st.Mode != Closed {
		t.Fatalf("stats %+v", st)
	}
}

// TestLineFull: the maximum length refuses with ErrLineFull and a
// retry-after; priority joins count too; SetMaxLength takes effect at once.
func TestLineFull(t *testing.T) {
	q := newQ(t, func(c *Config) { c.Mode = Paced; c.MaxLength = 3 })
	fill(t, q, 3, t0)
	_, err := q.Join("x", t0, true)
	if d, ok := RetryAfter(err); !errors.Is(err, ErrLineFull) || !ok || d != 10*time.Second {
		t.Fatalf("full: %v %v", err, d)
	}
	if _, err := q.JoinPriority("y", t0, true); !errors.Is(err, ErrLineFull) {
		t.Fatalf("priority on a full line: %v", err)
	}
	if err := q.SetMaxLength(4); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Join("x", t0, true); err != nil {
		t.Fatal(err)
	}
	if err := q.SetMaxLength(1); err != nil { // shrink: nobody removed
		t.Fatal(err)
	}
	if st := q.Stats(t0); st.Length != 4 || st.RefusedFull != 2 || st.MaxLength != 1 {
		t.Fatalf("stats %+v", st)
	}
}
