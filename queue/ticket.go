package queue

import (
	"strconv"
	"time"
)

// TicketID names a ticket. It is opaque: the gate puts it in a signed token
// so that a player who drops can come back to the same place.
type TicketID uint64

func (id TicketID) String() string { return strconv.FormatUint(uint64(id), 16) }

// Ticket is a place in the line.
type Ticket struct {
	ID       TicketID
	PlayerID string
	// Seq is the arrival order (both lanes, from 1): a ticket that joined
	// later has a larger Seq.
	Seq uint64
	// Priority is true for a ticket in the priority lane.
	Priority bool
	// Joined is when the ticket joined.
	Joined time.Time
}

// State is where a ticket stands.
type State uint8

// The states a Status reports.
const (
	// Waiting: in the line, player connected.
	Waiting State = iota + 1
	// Away: in the line, player gone; the place is kept until grace ends.
	Away
	// Held: released while its player was away; Resume admits at once.
	Held
	// Admitted: let in (only as the result of Join or Resume: the queue
	// forgets admitted tickets).
	Admitted
)

var stateNames = [...]string{Waiting: "waiting", Away: "away", Held: "held", Admitted: "admitted"}

func (s State) String() string {
	if s >= Waiting && s <= Admitted {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// NoETA is the ETA of a ticket in a line that releases nothing (Queueing,
// Closed) or whose measured rate is zero.
const NoETA time.Duration = -1

// Status is a ticket's standing.
type Status struct {
	Ticket Ticket
	State  State
	// Position is the place in the ticket's lane, 1 = next; 0 when Held or
	// Admitted. It never increases while the ticket is in the line, but
	// for a returning ticket that joined earlier coming back (Rejoin).
	Position int
	// ETA is the expected wait from now, NoETA when unknown, 0 when Held or
	// Admitted.
	ETA time.Duration
}
