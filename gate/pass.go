package gate

import (
	"container/heap"
	"time"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
	"github.com/leveehq/levee/queue"
)

// An admission pass (ticket.go: "a1.…") is what the line gives a player it
// lets in, in the Admitted frame: the player keeps it as their ticket, so
// that after a drop or a gate restart they are known to have been playing,
// and are not put back in the line by their join time ahead of the players
// still waiting (what a t2 ticket of an admitted player would do).
//
// A pass presented (enterPass):
//   - to the line that gave it (its own line id), within -line-grace of the
//     admission and once: the priority lane, as a ticket let in within grace
//     (recentAdmits); otherwise the back of the line (expired);
//   - to a line that did not give it (this gate restarted, or another gate
//     of the deployment) during this line's return window: let in at once,
//     without waiting for the pace (the line paces new arrivals, not
//     players resuming; the connection cap was passed before the line, as
//     for every connection), or the priority lane while the line is held
//     (queueing); refused while it is closed. Each pass is honoured once per
//     gate run (takenPasses): shown again it joins the back (replayed), so
//     it cannot be shared or kept to skip the line over and over;
//   - to that line after its return window: the back of the line
//     (foreign_late).
//
// A player let in by a pass gets an Admitted frame with a pass of this line
// (same ticket id), good for the priority lane within grace and for the
// next restart. Passes are counted by gate_line_passes_total{result}.

// passTTL is how long a pass is valid: as a ticket, longer than any session
// is expected to last; the lines decide (by grace and return window) what
// it is good for.
const passTTL = ticketTTL

// Results of a presented pass, counted by gate_line_passes_total.
const (
	passAdmitted    = "admitted"     // another line's, in the return window: let in at once
	passPriority    = "priority"     // this line's within grace, or another's while the line is held: the priority lane
	passReplayed    = "replayed"     // another line's, already honoured in this run: the back
	passExpired     = "expired"      // this line's, its grace over or used already: the back
	passForeignLate = "foreign_late" // another line's, after the return window: the back
	passFull        = "full"         // another line's, with maxTakenPasses taken in the window: the back
)

var passResults = []string{passAdmitted, passPriority, passReplayed, passExpired, passForeignLate, passFull}

// maxTakenPasses bounds the passes one return window remembers (about 100
// bytes each). A window is -line-grace long and only passes the gates of
// this deployment signed count, so it is not expected to fill; a pass
// presented once it is full joins the back.
const maxTakenPasses = 1 << 18

// How a connection entered the line (line.enter).
type entry uint8

const (
	entryNew      entry = iota // as a new arrival: the back, the priority lane, or in at once (open, empty line)
	entryResumed               // its ticket's place taken back (Resume, Rejoin)
	entryPass                  // let in at once by another line's pass
	entryTakeOver              // took over the place of the player's older waiting connection (replace.go)
	entryReplace               // let in at once: the player's older connection was let in (replace.go)
)

// enterPass is enter for an admission pass cl (l.mu held): see above.
func (l *line) enterPass(c *conn, cl *ticketClaims, now time.Time) (st queue.Status, how entry, err error) {
	result := ""
	switch {
	case !cl.foreign:
		if l.recent.has(cl.ID, c.playerID, now) {
			if st, err = l.q.JoinPriority(c.playerID, now, true); err == nil {
				l.recent.remove(cl.ID)
			}
			result = passPriority
			break
		}
		result = passExpired
		st, err = l.q.Join(c.playerID, now, true)
	case !now.Before(l.returnUntil):
		result = passForeignLate
		st, err = l.q.Join(c.playerID, now, true)
	default:
		key := passKey{line: cl.Line, id: cl.ID}
		l.passes.evict(now)
		switch {
		case l.passes.has(key):
			result = passReplayed
			st, err = l.q.Join(c.playerID, now, true)
		case l.passes.len() >= maxTakenPasses:
			result = passFull
			st, err = l.q.Join(c.playerID, now, true)
		default:
			switch qs := l.q.Stats(now); qs.Mode {
			case queue.Closed:
				return st, entryNew, &queue.RefusedError{Err: queue.ErrClosed, RetryAfter: qs.RetryAfter}
			case queue.Queueing:
				result = passPriority
				st, err = l.q.JoinPriority(c.playerID, now, true)
			default:
				result, how = passAdmitted, entryPass
				st = queue.Status{Ticket: queue.Ticket{ID: cl.ID, PlayerID: c.playerID, Joined: now}, State: queue.Admitted}
			}
			if err == nil {
				l.passes.add(key, cl.Expiry)
			}
		}
	}
	if err == nil {
		l.s.m.line.passes[result].Inc()
	}
	return st, how, err
}

// admittedFrame is the Admitted push for player, let in from ticket id of
// this line at now after waiting waited, with its pass.
func (s *Server) admittedFrame(player string, id queue.TicketID, waited time.Duration, now time.Time) *leveev2.ServerFrame {
	pass := signPass(s.signingKey(), s.line.id, id, player, now, now.Add(passTTL))
	return &leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Admitted{Admitted: &leveev2.Admitted{
		WaitedMs: uint64(max(waited, 0).Milliseconds()),
		Ticket:   pass,
	}}}
}

// passKey names a pass: its line and ticket id (a pass is given once per
// admission, and a ticket id once per line).
type passKey struct {
	line uint64
	id   queue.TicketID
}

// takenPasses are the other lines' passes honoured in this line's return
// window, each until its expiry (after which it no longer verifies), at
// most maxTakenPasses. The line forgets them all when the window ends
// (prune): a pass of another line joins the back then anyway.
type takenPasses struct {
	by map[passKey]struct{}
	h  passHeap // by expiry
}

func (t *takenPasses) has(k passKey) bool {
	_, ok := t.by[k]
	return ok
}

func (t *takenPasses) len() int { return len(t.by) }

func (t *takenPasses) add(k passKey, exp time.Time) {
	if t.by == nil {
		t.by = map[passKey]struct{}{}
	}
	t.by[k] = struct{}{}
	heap.Push(&t.h, takenPass{key: k, exp: exp})
}

// evict forgets the passes expired at now.
func (t *takenPasses) evict(now time.Time) {
	for len(t.h) > 0 && !now.Before(t.h[0].exp) {
		delete(t.by, heap.Pop(&t.h).(takenPass).key)
	}
}

// prune forgets every pass once the return window (until) is over.
func (t *takenPasses) prune(now, until time.Time) {
	if t.by != nil && !now.Before(until) {
		*t = takenPasses{}
	}
}

type takenPass struct {
	key passKey
	exp time.Time
}

type passHeap []takenPass

func (h passHeap) Len() int           { return len(h) }
func (h passHeap) Less(i, j int) bool { return h[i].exp.Before(h[j].exp) }
func (h passHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *passHeap) Push(x any)        { *h = append(*h, x.(takenPass)) }
func (h *passHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
