package pacer

import "github.com/leveehq/levee/internal/priority"

// Priority orders waiting requests: higher goes first and evicts lower when
// the queue is full. It is the cluster's one class type (Sheddable <
// Default < Critical, the same the gate, logic and battle shed by), named
// here for the SDK's users, who cannot import Levee's internal packages.
type Priority = priority.Class

// The priorities, least important first.
const (
	Sheddable = priority.Sheddable // cosmetics, chat: shed first
	Default   = priority.Default   // most actions
	Critical  = priority.Critical  // purchases, trades: shed last
)

// levels is the number of priorities, the queue's number of FIFOs; a
// Priority's Index is its FIFO.
const levels = priority.NumClasses
