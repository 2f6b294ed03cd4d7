package queue

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Queue is the admission line. Build it with New.
type Queue struct {
	mu sync.Mutex

	mode       Mode
	rate       Rate
	maxLen     int
	grace      time.Duration
	retryAfter time.Duration // given with ErrClosed

	prio, normal lane
	ret          retLane              // returning tickets (Rejoin), by original join time
	where        map[TicketID]loc     // tickets in a lane
	held         map[TicketID]heldTkt // released while away
	graces       graceHeap

	pace  pacer
	meter meter

	nextID  TicketID
	nextSeq uint64
	lastKey int64 // the normal lane's last key: its keys never decrease

	lastRelease   time.Time // previous Release
	nonEmptySince time.Time // when the line last went from empty to not

	away int // away tickets in the lanes

	joined, admitted, dropped  uint64
	refusedFull, refusedClosed uint64
}

// loc finds a ticket in a lane: its lane index, or for a returning ticket
// (ret) its key.
type loc struct {
	prio bool
	ret  bool
	idx  uint64
}

// heldTkt is a ticket released while its player was away.
type heldTkt struct {
	t        Ticket
	deadline time.Time
	gen      uint32
}

// New returns a Queue configured by cfg, with now as the start of its pace.
func New(cfg Config, now time.Time) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Queue{
		mode:        cfg.Mode,
		rate:        cfg.Rate,
		maxLen:      cfg.MaxLength,
		grace:       cfg.Grace,
		retryAfter:  cfg.ClosedRetryAfter,
		where:       make(map[TicketID]loc),
		held:        make(map[TicketID]heldTkt),
		pace:        newPacer(cfg.Rate, now),
		meter:       newMeter(cfg.Window),
		nextID:      TicketID(rand.Uint64() >> 1),
		lastRelease: now,
	}, nil
}

// Join puts playerID in the normal lane. In Open mode with hasRoom (the
// caller's check that the gate can take one more player) and an empty line
// the ticket is admitted at once (State Admitted); otherwise it waits (State
// Waiting, with its Position and ETA). A closed or full line refuses with a
// *RefusedError wrapping ErrClosed (retry-after: the operator's, see
// SetRetryAfter) or ErrLineFull (retry-after: the rate's interval, at least
// 1 s: by then an interval's worth of players has gone in).
func (q *Queue) Join(playerID string, now time.Time, hasRoom bool) (Status, error) {
	return q.join(playerID, now, hasRoom, false)
}

// JoinPriority is Join for a player reconnecting to a match in progress: the
// ticket goes in the priority lane, which Release empties before the normal
// lane.
func (q *Queue) JoinPriority(playerID string, now time.Time, hasRoom bool) (Status, error) {
	return q.join(playerID, now, hasRoom, true)
}

func (q *Queue) join(playerID string, now time.Time, hasRoom, prio bool) (Status, error) {
	if playerID == "" {
		return Status{}, ErrBadPlayer
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	if q.mode == Closed {
		return Status{}, q.refuseClosed()
	}
	n := q.length()
	if q.mode == Open && hasRoom && n == 0 {
		t := q.issue(playerID, now, prio)
		q.joined++
		q.admitted++
		return Status{Ticket: t, State: Admitted}, nil
	}
	if n >= q.maxLen {
		return Status{}, q.refuseFull()
	}
	t := q.issue(playerID, now, prio)
	l := q.laneOf(prio)
	key := max(now.UnixNano(), q.lastKey)
	if !prio {
		q.lastKey = key
	}
	idx := l.push(slot{id: t.ID, player: playerID, seq: t.Seq, joined: now, key: key})
	lc := loc{prio: prio, idx: idx}
	q.where[t.ID] = lc
	q.joined++
	if n == 0 {
		q.nonEmptySince = now
	}
	return q.statusAt(l.at(idx), lc, now), nil
}

// refuseClosed counts and returns the refusal of a closed line.
func (q *Queue) refuseClosed() error {
	q.refusedClosed++
	return &RefusedError{Err: ErrClosed, RetryAfter: q.retryAfter}
}

// refuseFull counts and returns the refusal of a full line.
func (q *Queue) refuseFull() error {
	q.refusedFull++
	return &RefusedError{Err: ErrLineFull, RetryAfter: max(q.rate.Interval, time.Second)}
}

func (q *Queue) issue(playerID string, now time.Time, prio bool) Ticket {
	q.nextID++
	for q.known(q.nextID) { // a returning ticket took this id (Rejoin)
		q.nextID++
	}
	q.nextSeq++
	return Ticket{ID: q.nextID, PlayerID: playerID, Seq: q.nextSeq, Priority: prio, Joined: now}
}

func (q *Queue) laneOf(prio bool) *lane {
	if prio {
		return &q.prio
	}
	return &q.normal
}

// length is the number of tickets in the line, away ones included.
func (q *Queue) length() int { return q.prio.live + q.normal.live + len(q.ret.slots) }

// known reports whether id is in the line or held.
func (q *Queue) known(id TicketID) bool {
	_, in := q.where[id]
	_, held := q.held[id]
	return in || held
}

// find returns the lane slot of id.
func (q *Queue) find(id TicketID) (*slot, loc, bool) {
	lc, ok := q.where[id]
	if !ok {
		return nil, loc{}, false
	}
	if lc.ret {
		return &q.ret.slots[q.ret.index(int64(lc.idx), id)], lc, true
	}
	return q.laneOf(lc.prio).at(lc.idx), lc, true
}

// drop takes a ticket out of its lane.
func (q *Queue) drop(id TicketID, lc loc) {
	if lc.ret {
		i := q.ret.index(int64(lc.idx), id)
		if q.ret.slots[i].away {
			q.away--
		}
		q.ret.remove(i)
		delete(q.where, id)
		return
	}
	l := q.laneOf(lc.prio)
	if l.at(lc.idx).away {
		q.away--
	}
	l.remove(lc.idx)
	delete(q.where, id)
}

// ticketOf rebuilds the Ticket of a lane slot.
func ticketOf(s *slot, prio bool) Ticket {
	return Ticket{ID: s.id, PlayerID: s.player, Seq: s.seq, Priority: prio, Joined: s.joined}
}
