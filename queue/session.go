package queue

import "time"

// Leave marks a waiting ticket away: its player disconnected. The ticket
// keeps its place until now + Grace. Leaving an away ticket again changes
// nothing. A held ticket cannot leave (it is already away).
func (q *Queue) Leave(id TicketID, now time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	s, _, ok := q.find(id)
	if !ok {
		if _, held := q.held[id]; held {
			return nil
		}
		return ErrUnknownTicket
	}
	if s.away {
		return nil
	}
	s.away = true
	q.away++
	s.gen++
	s.deadline = now.Add(q.grace)
	q.graces.add(graceItem{deadline: s.deadline, id: id, gen: s.gen})
	return nil
}

// Resume gives an away ticket back to its player, who reconnected within
// the grace period: the ticket is back at the same place (State Waiting), or,
// if it was released meanwhile, admitted at once (State Admitted). Errors:
// ErrUnknownTicket, ErrWrongPlayer, ErrTicketInUse (the ticket is not away:
// another connection holds it), ErrTicketExpired (grace is over).
func (q *Queue) Resume(id TicketID, playerID string, now time.Time) (Status, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.resumeLocked(id, playerID, now)
}

func (q *Queue) resumeLocked(id TicketID, playerID string, now time.Time) (Status, error) {
	// Judge this ticket before the sweep, to tell "expired" from "unknown".
	if s, lc, ok := q.find(id); ok {
		switch {
		case s.player != playerID:
			return Status{}, ErrWrongPlayer
		case !s.away:
			return Status{}, ErrTicketInUse
		case !now.Before(s.deadline):
			q.drop(id, lc)
			q.dropped++
			q.sweep(now)
			return Status{}, ErrTicketExpired
		}
		s.away = false
		q.away--
		q.sweep(now) // may compact or shift the lane: look the slot up again
		s, lc, _ = q.find(id)
		return q.statusAt(s, lc, now), nil
	}
	h, ok := q.held[id]
	switch {
	case !ok:
		q.sweep(now)
		return Status{}, ErrUnknownTicket
	case h.t.PlayerID != playerID:
		return Status{}, ErrWrongPlayer
	}
	delete(q.held, id)
	q.sweep(now)
	if !now.Before(h.deadline) {
		q.dropped++
		return Status{}, ErrTicketExpired
	}
	q.admitted++
	return Status{Ticket: h.t, State: Admitted}, nil
}

// Cancel takes a ticket out of the line for good (the player gave up); it
// counts as dropped.
func (q *Queue) Cancel(id TicketID, now time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	if _, lc, ok := q.find(id); ok {
		q.drop(id, lc)
		q.dropped++
		return nil
	}
	if _, ok := q.held[id]; ok {
		delete(q.held, id)
		q.dropped++
		return nil
	}
	return ErrUnknownTicket
}
