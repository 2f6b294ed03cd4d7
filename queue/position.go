package queue

import "time"

// Position returns the standing of a ticket in the line (Waiting or Away,
// with its Position and ETA) or held for its player (Held). A ticket that was
// admitted, cancelled or dropped is ErrUnknownTicket. O(log n).
func (q *Queue) Position(id TicketID, now time.Time) (Status, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	if s, lc, ok := q.find(id); ok {
		return q.statusAt(s, lc, now), nil
	}
	if h, ok := q.held[id]; ok {
		return Status{Ticket: h.t, State: Held}, nil
	}
	return Status{}, ErrUnknownTicket
}

// AppendPositions appends the standing of every ticket in the line to dst,
// in release order (priority lane first), in O(n): the form for pushing
// positions to all waiters every couple of seconds. Held tickets are not
// included.
func (q *Queue) AppendPositions(dst []Status, now time.Time) []Status {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	perSec, known := q.releaseRate(now)
	add := func(s *slot, prio bool, pos, ahead int) {
		dst = append(dst, Status{
			Ticket:   ticketOf(s, prio),
			State:    stateOf(s),
			Position: pos,
			ETA:      eta(ahead+pos, perSec, known),
		})
	}
	pos := 0
	for i := q.prio.head; i < len(q.prio.slots); i++ {
		if s := &q.prio.slots[i]; s.live {
			pos++
			add(s, true, pos, 0)
		}
	}
	// The normal lane and the returning tickets, merged by key.
	pos, r := 0, 0
	for i := q.normal.head; i < len(q.normal.slots); i++ {
		s := &q.normal.slots[i]
		if !s.live {
			continue
		}
		for ; r < len(q.ret.slots) && q.ret.slots[r].key <= s.key; r++ {
			pos++
			add(&q.ret.slots[r], false, pos, q.prio.live)
		}
		pos++
		add(s, false, pos, q.prio.live)
	}
	for ; r < len(q.ret.slots); r++ {
		pos++
		add(&q.ret.slots[r], false, pos, q.prio.live)
	}
	return dst
}

// statusAt is the Status of the slot s, found at lc.
func (q *Queue) statusAt(s *slot, lc loc, now time.Time) Status {
	var pos int
	switch {
	case lc.prio:
		pos = q.prio.rank(lc.idx)
	case lc.ret:
		pos = q.ret.index(s.key, s.id) + 1 + q.normal.before(s.key)
	default:
		pos = q.normal.rank(lc.idx) + q.ret.atOrBefore(s.key)
	}
	prio := lc.prio
	ahead := pos
	if !prio {
		ahead += q.prio.live
	}
	perSec, known := q.releaseRate(now)
	return Status{Ticket: ticketOf(s, prio), State: stateOf(s), Position: pos, ETA: eta(ahead, perSec, known)}
}

func stateOf(s *slot) State {
	if s.away {
		return Away
	}
	return Waiting
}

// releaseRate is the rate the ETA uses, in tickets per second: measured if
// the window holds enough, else the configured one; known is false when the
// line releases nothing.
func (q *Queue) releaseRate(now time.Time) (perSec float64, known bool) {
	if q.mode == Queueing || q.mode == Closed {
		return 0, false
	}
	if r, ok := q.meter.rate(now); ok {
		return r, r > 0
	}
	return q.rate.PerSecond(), true
}

// eta is the wait for the ahead-th ticket to be released.
func eta(ahead int, perSec float64, known bool) time.Duration {
	if !known {
		return NoETA
	}
	secs := float64(ahead) / perSec
	if secs >= maxETA.Seconds() {
		return maxETA
	}
	return time.Duration(secs * float64(time.Second))
}

// maxETA caps the ETA (a long line at a very slow rate).
const maxETA = 1000 * time.Hour
