package clienttest

import (
	"time"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// LineGrace is the grace period the fake line's statuses announce.
const LineGrace = 60 * time.Second

// Status is a QueueStatus push: place pos in a paced line of length
// length, releasing rate players per second (the ETA is pos/rate), with
// ticket and a grace of LineGrace. A gate sends the ticket in a
// connection's first status only: give "" for the later ones.
func Status(pos, length uint64, rate float64, ticket string) *leveev2.ServerFrame {
	var eta uint64
	if rate > 0 {
		eta = uint64(float64(pos) / rate * 1000)
	}
	return &leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Queue{Queue: &leveev2.QueueStatus{
		Position: pos, EtaMs: eta, ReleaseRate: rate, LineLength: length,
		Ticket: ticket, GraceMs: uint32(LineGrace / time.Millisecond), Mode: "paced",
	}}}
}

// Admit is the Admitted push, after waited.
func Admit(waited time.Duration) *leveev2.ServerFrame { return AdmitPass(waited, "") }

// AdmitPass is the Admitted push, after waited, with the admission pass
// pass (a gate's "a1." token; any string here).
func AdmitPass(waited time.Duration, pass string) *leveev2.ServerFrame {
	return &leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Admitted{Admitted: &leveev2.Admitted{
		WaitedMs: uint64(waited / time.Millisecond), Ticket: pass}}}
}

// Waiting is a Line that walks each player down the given positions (one
// status each, 1 player/s, the ticket "ticket-<player>" in the first only,
// as a gate sends it), then admits them (Admitted with waited_ms 1000 ×
// the first position) and lets them in.
func Waiting(positions ...uint64) Line {
	return func(c *Conn) bool {
		var length uint64
		for _, p := range positions {
			length = max(length, p)
		}
		ticket := "ticket-" + c.Player
		for _, p := range positions {
			if c.Send(Status(p, length, 1, ticket)) != nil {
				return false
			}
			ticket = "" // unchanged
		}
		var waited time.Duration
		if len(positions) > 0 {
			waited = time.Duration(positions[0]) * time.Second
		}
		return c.Send(Admit(waited)) == nil
	}
}
