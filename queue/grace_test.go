package queue

import (
	"errors"
	"testing"
	"time"
)

// TestGraceResumeKeepsPlace: a player who drops and comes back within grace
// is at the same place, and the players behind never moved.
func TestGraceResumeKeepsPlace(t *testing.T) {
	q := newQ(t, paced)
	tk := fill(t, q, 100, t0)
	me := tk[40]
	if err := q.Leave(me.ID, at(time.Second)); err != nil {
		t.Fatal(err)
	}
	if st := mustPos(t, q, me.ID, at(2*time.Second)); st.State != Away || st.Position != 41 {
		t.Fatalf("away: %+v", st)
	}
	if got := mustPos(t, q, tk[41].ID, at(2*time.Second)).Position; got != 42 {
		t.Fatalf("the one behind is at %d, want 42", got)
	}
	got := q.Release(at(100 * time.Millisecond)) // 10 go in meanwhile
	if len(got) != 10 {
		t.Fatalf("released %d", len(got))
	}
	st, err := q.Resume(me.ID, me.PlayerID, at(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st.State != Waiting || st.Position != 31 {
		t.Fatalf("resumed: %+v, want waiting at 31", st)
	}
	checkConservation(t, q, at(61*time.Second))
}

// TestGracePastIsDropped: past grace the ticket is gone, whether the player
// comes back (ErrTicketExpired) or not (swept by Release); the ones behind
// move up.
func TestGracePastIsDropped(t *testing.T) {
	q := newQ(t, func(c *Config) { c.Mode = Queueing })
	tk := fill(t, q, 5, t0)
	if err := q.Leave(tk[1].ID, t0); err != nil {
		t.Fatal(err)
	}
	if err := q.Leave(tk[2].ID, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Resume(tk[1].ID, tk[1].PlayerID, at(60*time.Second)); !errors.Is(err, ErrTicketExpired) {
		t.Fatalf("resume at exactly grace: %v, want ErrTicketExpired", err)
	}
	q.Release(at(61 * time.Second))
	if _, err := q.Position(tk[2].ID, at(61*time.Second)); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("swept ticket: %v", err)
	}
	if _, err := q.Resume(tk[2].ID, tk[2].PlayerID, at(61*time.Second)); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("resume of a swept ticket: %v", err)
	}
	if got := mustPos(t, q, tk[4].ID, at(61*time.Second)).Position; got != 3 {
		t.Fatalf("last one at %d, want 3", got)
	}
	if st := checkConservation(t, q, at(61*time.Second)); st.Dropped != 2 || st.Away != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTicketInUse: a ticket whose connection has not left cannot be resumed
// by a second connection; nor by another player; and a resumed ticket
// cannot be resumed again.
func TestTicketInUse(t *testing.T) {
	q := newQ(t, paced)
	me := fill(t, q, 3, t0)[1]
	if _, err := q.Resume(me.ID, me.PlayerID, t0); !errors.Is(err, ErrTicketInUse) {
		t.Fatalf("resume while active: %v, want ErrTicketInUse", err)
	}
	if err := q.Leave(me.ID, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Resume(me.ID, "someone-else", t0); !errors.Is(err, ErrWrongPlayer) {
		t.Fatalf("resume by another player: %v", err)
	}
	if _, err := q.Resume(me.ID, me.PlayerID, at(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Resume(me.ID, me.PlayerID, at(2*time.Second)); !errors.Is(err, ErrTicketInUse) {
		t.Fatalf("second resume: %v, want ErrTicketInUse", err)
	}
	if _, err := q.Resume(TicketID(12345), "x", t0); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("unknown: %v", err)
	}
}

// TestReleasedWhileAway: a ticket whose turn came while its player was away
// is held and admitted at once on resume; if the player does not return it
// is dropped when grace ends.
func TestReleasedWhileAway(t *testing.T) {
	q := newQ(t, paced)
	tk := fill(t, q, 4, t0)
	for _, i := range []int{0, 2} {
		if err := q.Leave(tk[i].ID, t0); err != nil {
			t.Fatal(err)
		}
	}
	got := q.Release(at(40 * time.Millisecond))
	if len(got) != 2 || got[0].ID != tk[1].ID || got[1].ID != tk[3].ID {
		t.Fatalf("released %v, want the two connected ones", got)
	}
	if st := mustPos(t, q, tk[0].ID, at(time.Second)); st.State != Held {
		t.Fatalf("away ticket after its turn: %+v", st)
	}
	st, err := q.Resume(tk[0].ID, tk[0].PlayerID, at(30*time.Second))
	if err != nil || st.State != Admitted {
		t.Fatalf("resume of a held ticket: %+v %v", st, err)
	}
	s := checkConservation(t, q, at(59*time.Second))
	if s.Held != 1 || s.Admitted != 3 {
		t.Fatalf("stats %+v", s)
	}
	s = checkConservation(t, q, at(60*time.Second))
	if s.Held != 0 || s.Dropped != 1 {
		t.Fatalf("after grace: %+v", s)
	}
}
