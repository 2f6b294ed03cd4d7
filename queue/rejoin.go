package queue

import (
	"sort"
	"time"
)

// Rejoin puts back in the line a ticket that another line issued (the line
// of this gate before it restarted, or of another gate): the ticket keeps
// its id and takes its place by its original join time, ahead of every
// normal ticket that joined later (arrivals after the restart included) and
// behind every one that joined before; among returning tickets, by join
// time too. A joined time after now counts as now.
//
// If the line knows id already (an earlier Rejoin of it), Rejoin is Resume:
// the same place, or admitted if its turn came, and the same errors
// (ErrWrongPlayer, ErrTicketInUse, ErrTicketExpired). Otherwise it is Join
// with that place: in Open mode with hasRoom and an empty line the ticket
// is admitted at once; a closed or full line refuses with a *RefusedError.
// Returning tickets are in the normal lane as far as Stats and Release are
// concerned (Priority does not count them).
func (q *Queue) Rejoin(id TicketID, playerID string, joined, now time.Time, hasRoom bool) (Status, error) {
	if playerID == "" {
		return Status{}, ErrBadPlayer
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, _, ok := q.find(id); ok {
		return q.resumeLocked(id, playerID, now)
	}
	if _, ok := q.held[id]; ok {
		return q.resumeLocked(id, playerID, now)
	}
	q.sweep(now)
	if q.mode == Closed {
		return Status{}, q.refuseClosed()
	}
	if joined.After(now) {
		joined = now
	}
	q.nextSeq++
	t := Ticket{ID: id, PlayerID: playerID, Seq: q.nextSeq, Joined: joined}
	n := q.length()
	if q.mode == Open && hasRoom && n == 0 {
		q.joined++
		q.admitted++
		return Status{Ticket: t, State: Admitted}, nil
	}
	if n >= q.maxLen {
		return Status{}, q.refuseFull()
	}
	key := joined.UnixNano()
	q.ret.insert(slot{id: id, player: playerID, seq: t.Seq, joined: joined, key: key})
	q.where[id] = loc{ret: true, idx: uint64(key)}
	q.joined++
	if n == 0 {
		q.nonEmptySince = now
	}
	s, lc, _ := q.find(id)
	return q.statusAt(s, lc, now), nil
}

// retLane holds the returning tickets (Rejoin) in the order of their
// original join time: a sorted slice of live slots, so inserting or taking
// one out moves the ones behind it (O(r) for r returning tickets; r is at
// most the line that was lost, and only players who came back within the
// return window join it). A slot is found by its key (in its loc) and id.
type retLane struct {
	slots []slot
}

// before reports whether the ticket (key, id) goes before slot s.
func before(key int64, id TicketID, s *slot) bool {
	return key < s.key || key == s.key && id < s.id
}

// search is the index of the first slot not before (key, id).
func (r *retLane) search(key int64, id TicketID) int {
	return sort.Search(len(r.slots), func(i int) bool { return !before(r.slots[i].key, r.slots[i].id, &slot{key: key, id: id}) })
}

func (r *retLane) insert(s slot) {
	s.live = true
	i := r.search(s.key, s.id)
	r.slots = append(r.slots, slot{})
	copy(r.slots[i+1:], r.slots[i:])
	r.slots[i] = s
}

// index is the index of the slot (key, id), or -1.
func (r *retLane) index(key int64, id TicketID) int {
	i := r.search(key, id)
	if i < len(r.slots) && r.slots[i].id == id {
		return i
	}
	return -1
}

func (r *retLane) remove(i int) {
	copy(r.slots[i:], r.slots[i+1:])
	r.slots[len(r.slots)-1] = slot{}
	r.slots = r.slots[:len(r.slots)-1]
}

// atOrBefore is the number of returning tickets with a key at or before
// key: those ahead of a normal ticket with that key (at equal keys the
// returning ticket goes first).
func (r *retLane) atOrBefore(key int64) int {
	return sort.Search(len(r.slots), func(i int) bool { return r.slots[i].key > key })
}

// before is the number of live normal-lane tickets with a key before key:
// those ahead of a returning ticket with that key. The lane's keys never
// decrease with its index (removed slots keep theirs), so it is a binary
// search and a prefix sum, O(log n).
func (l *lane) before(key int64) int {
	i := sort.Search(len(l.slots), func(i int) bool { return l.slots[i].key >= key })
	return int(l.fen.sum1(i))
}

// Knows reports whether id is in the line (waiting or away) or held for
// its player.
func (q *Queue) Knows(id TicketID, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	return q.known(id)
}
