// Package queue is the launch-day admission line: a first-in, first-out line
// of tickets, released at a smooth, operator-set pace, in which every waiting
// player can read their place and an ETA. It is a leaf package (standard
// library only) with no goroutines and no clock: every time-based method takes
// the time, like golang.org/x/time/rate's AllowN(t, n), and the caller (the
// gate) owns the ticker that calls Release. A Queue is safe for concurrent
// use; every method takes one mutex.
//
// # Tickets and positions
//
// Join gives a player a Ticket: an opaque TicketID (the first one is drawn at
// random when the Queue is built, so tokens from an earlier process do not
// name live tickets), the player id, and Seq, the arrival order. Tickets live
// in two lanes: the priority lane (JoinPriority: a player reconnecting to a
// match in progress) and the normal lane. Release always empties the priority
// lane first: the configured rate is shared priority-first, not split.
//
// A ticket's Position is its place in its own lane: 1 + the number of tickets
// of that lane that arrived before it and are still in the line (for the
// normal lane, returning tickets count by join time, below). Tickets that
// leave (cancel, or grace expiry) leave holes, which simply make everyone
// behind them move up. Positions therefore never increase for a waiting
// ticket: releases, cancellations and expiries only lower them, a player who
// is away keeps their place (and so does not move anyone), a resume restores
// the same place, and a priority arrival is not counted in a normal ticket's
// position (it only delays the normal lane, which the ETA shows). Within a
// lane nobody passes anybody. The one exception is a returning ticket.
//
// # Returning tickets
//
// Rejoin takes back a ticket that another line issued (the gate's line
// before a restart, or another gate's): it keeps its TicketID and is
// placed by its original join time, in the normal lane's order, ahead of
// every ticket that joined later (at equal times the returning one first)
// and behind every earlier one. A waiting ticket that joined after it
// therefore moves back one place: positions only increase this way, while
// the players of a lost line come back. A returning ticket is stored
// apart (a slice sorted by join time) and merged with the normal lane by
// Release and AppendPositions; its Position is its rank there plus the
// normal tickets that joined before it (a binary search over the normal
// lane's keys, which never decrease: join times, made monotonic). Rejoin
// of an id the line knows is Resume. Fresh tickets skip ids a returning
// ticket holds.
//
// Each lane is a slice indexed by arrival with a Fenwick tree over "still in
// the line", so (n = tickets in the line):
//
//	Join, JoinPriority     O(log n) amortised (slice append and one tree update)
//	Rejoin; Release, Cancel
//	or expiry of a
//	returning ticket       O(r + log n), r returning tickets in the line
//	Position, Leave,
//	Resume, Cancel         O(log n)
//	Release of k tickets   O(k log n) amortised; the slice is compacted when
//	                       its released prefix is half of it (O(n), amortised O(1))
//	AppendPositions        O(n) for the whole line, in order, O(1) per ticket
//	Stats                  O(1)
//	grace expiry           O(log n) per expired ticket (a min-heap of deadlines)
//
// # Pace
//
// In Paced mode the line releases N tickets per Interval (default 1,000 per
// 10 s) as a smooth rate, one ticket every Interval/N. Release accumulates
// credit for the time since the previous Release in exact integer arithmetic
// (1 ns earns N units, a ticket costs Interval-in-ns units), releases as many
// whole tickets as the credit covers, and keeps the fraction. After a
// Release, the credit left over is capped at one ticket: an idle or
// held-back line stores no burst, and the first player to arrive in an idle
// paced line goes in at the next Release. Over a run in which the line is
// never empty, the number released is exactly floor(rate × time) (the
// first Release after New starts from zero credit). No single Release hands
// out more than rate × (time since the previous Release) + 1 tickets, so the
// gate should call Release often (every 100 ms or so), not once per Interval.
//
// AppendRelease takes a limit (the gate's free room, say): credit not used
// because of it is kept, up to the one-ticket cap. In Open mode the limit is
// the only brake.
//
// # ETA
//
// The ETA of a waiting ticket is (tickets released before it) / (measured
// release rate), where the tickets released before it are its position plus,
// for the normal lane, the whole priority lane. The measured rate is the
// number of tickets released over the busy time (time in which the line was
// releasing and not empty) of a sliding window (default 30 s, in 30 buckets),
// so an idle line does not look slow. Until the window holds at least 1 s of
// busy time and 5 releases the configured rate is used. SetRate and SetMode
// clear the window, so the ETA follows a new pace at once. When the line
// releases nothing (Queueing, Closed) the ETA is NoETA.
//
// # Modes
//
//   - Open: Join admits at once if the caller says there is room and the line
//     is empty; otherwise the ticket waits and the next Release hands out the
//     whole line (up to its limit). The gate decides how fast it lets them in
//     by the limit it passes.
//   - Queueing: Join accepts and holds; Release hands out nothing and the
//     pace earns no credit (the line is frozen).
//   - Paced: Join always waits in line; Release hands out tickets at the pace.
//   - Closed (maintenance): Join and JoinPriority are refused with ErrClosed
//     and the retry-after the operator set; the waiting line is kept, frozen
//     as in Queueing, and players who are away may still Resume.
//
// Switching modes never loses a ticket: Paced -> Open releases everyone at the
// next Release, Paced -> Queueing or Closed freezes the line, and going back
// to Paced restarts the pace from the moment of the switch. A switch keeps at
// most one ticket of credit (credit earned between the last Release and a
// switch out of Paced beyond that is forfeit, like idle credit).
//
// # Grace
//
// Leave marks a waiting ticket away: it keeps its place for Grace (default
// 60 s). Resume, with the same ticket id and player id, within Grace, puts it
// back at the same place. A ticket whose turn comes while its player is away
// is still released (it used its slot of the pace) and held as admitted
// (state Held) until its grace ends: a Resume then admits the player at once.
// Past grace, an away or held ticket is dropped at the next call that takes
// the time (Release, Join, Position, Stats, ...). A ticket is used by one
// connection at a time: Resume on a ticket that is not away is refused with
// ErrTicketInUse.
//
// # Counting
//
// Every ticket that Join or JoinPriority accepted is, at any moment, in
// exactly one of: admitted (handed to the caller by Join, Release or Resume),
// waiting (in the line, here or away), held, or dropped (cancelled or
// expired). Stats reports all four, and Joined = Admitted + Waiting + Held +
// Dropped always holds.
package queue
