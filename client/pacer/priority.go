package pacer

import "strconv"

// Priority orders waiting requests: higher goes first and evicts lower when
// the queue is full. The zero value is Default. It mirrors the proto's
// Criticality (whose numbers run the other way).
type Priority int8

const (
	Sheddable Priority = -1 // cosmetics, chat-like traffic: shed first
	Default   Priority = 0
	Critical  Priority = 1 // purchases, in-match actions, reconnects: shed last
)

// levels is the number of priorities; level() maps them to 0..levels-1.
const levels = 3

// level is the queue index of p; values outside Sheddable..Critical are
// clamped to the nearest one.
func (p Priority) level() int {
	return int(min(max(p, Sheddable), Critical) - Sheddable)
}

func (p Priority) String() string {
	switch p {
	case Sheddable:
		return "sheddable"
	case Default:
		return "default"
	case Critical:
		return "critical"
	}
	return "priority(" + strconv.Itoa(int(p)) + ")"
}
