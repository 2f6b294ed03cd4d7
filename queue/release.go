package queue

import (
	"math"
	"time"
)

// Release hands out the tickets due by now (see AppendRelease), with no
// limit but the pace.
func (q *Queue) Release(now time.Time) []Ticket {
	return q.AppendRelease(nil, now, math.MaxInt)
}

// AppendRelease releases the tickets due by now, at most limit of them, in
// order (priority lane first), and appends those whose players are connected
// to dst; a ticket whose player is away is released too but held for its
// return (see the package doc). Due means: in Paced mode, as many as the
// credit earned since the previous call covers; in Open mode, the whole line;
// in Queueing and Closed, none. It also drops tickets whose grace has ended.
// The gate calls it from one ticker, every 100 ms or so.
func (q *Queue) AppendRelease(dst []Ticket, now time.Time, limit int) []Ticket {
	limit = max(limit, 0)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	busy := q.busy(now)
	if now.After(q.lastRelease) {
		q.lastRelease = now
	}
	k := 0
	switch q.mode {
	case Paced:
		q.pace.accrue(now)
		k = q.pace.take(min(limit, q.length()))
		q.pace.capOne()
	case Open:
		k = min(limit, q.length())
	default:
		q.pace.skip(now)
		return dst
	}
	for range k {
		dst = q.releaseFront(dst, now)
	}
	q.meter.record(now, k, busy)
	return dst
}

// busy is how long, since the previous Release, the line was not empty.
func (q *Queue) busy(now time.Time) time.Duration {
	if q.length() == 0 || q.mode == Queueing || q.mode == Closed {
		return 0
	}
	from := q.lastRelease
	if q.nonEmptySince.After(from) {
		from = q.nonEmptySince
	}
	return max(now.Sub(from), 0)
}

// releaseFront takes the first ticket of the line (priority lane first).
func (q *Queue) releaseFront(dst []Ticket, now time.Time) []Ticket {
	prio := q.prio.live > 0
	l := q.laneOf(prio)
	s, idx, ok := l.front()
	lc := loc{prio: prio, idx: idx}
	if !prio && len(q.ret.slots) > 0 && (!ok || q.ret.slots[0].key <= s.key) {
		s, lc, ok = &q.ret.slots[0], loc{ret: true, idx: uint64(q.ret.slots[0].key)}, true
	}
	if !ok {
		return dst
	}
	t := ticketOf(s, prio)
	if s.away {
		q.held[t.ID] = heldTkt{t: t, deadline: s.deadline, gen: s.gen}
	} else {
		q.admitted++
		dst = append(dst, t)
	}
	q.drop(t.ID, lc)
	return dst
}

// sweep drops the away and held tickets whose grace ended by now.
func (q *Queue) sweep(now time.Time) {
	for {
		it, ok := q.graces.due(now)
		if !ok {
			return
		}
		if s, lc, ok := q.find(it.id); ok {
			if s.away && s.gen == it.gen {
				q.drop(it.id, lc)
				q.dropped++
			}
			continue
		}
		if h, ok := q.held[it.id]; ok && h.gen == it.gen {
			delete(q.held, it.id)
			q.dropped++
		}
	}
}
