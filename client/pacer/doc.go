// Package pacer is the client SDK's adaptive leaky bucket (seed 000): it
// releases outgoing requests at a constant drip rate that follows the
// server's backpressure ratio, and holds the rest in a small bounded local
// queue ordered by priority.
//
// The drip rate is
//
//	rate = max(MinRate, Rate × (1 − Factor × ratio))
//
// (defaults: Rate 10/s, Factor 0.85, MinRate 1/s; full pressure leaves 15 %)
//
// where ratio (0..1) is the latest backpressure ratio the client saw
// (SetPressure). The pacer follows the latest value directly, with no
// smoothing: the server's ratio is already a level (a queue's fill), the
// seed applies it as it arrives, and any smoothing would delay the recovery
// the SDK wants when pressure drops. A rate change applies to the very next
// release slot, so a drop in pressure is felt at once.
//
// It is a leaky bucket, not a token bucket: there is no burst. After a
// quiet spell one request goes at once and the next one interval later.
// A release that comes up to one interval late (timer latency) keeps the
// cadence; a later one restarts it from now.
//
// Wait blocks until the caller's turn. Waiters are released in priority
// order (Critical, then Default, then Sheddable; FIFO within a priority).
// When the queue holds Capacity waiters, a new request evicts the oldest
// waiter of the lowest priority below its own, which fails at once with
// ErrEvicted; if there is none the new request fails with ErrQueueFull.
//
// There is no background goroutine and nothing to close: each Wait call
// blocks on its own channel; the waiter at the head of the queue holds the
// only timer (from the injected clock.Clock) and releases itself when it
// fires, then wakes the next head. Every state change happens under one
// mutex.
package pacer
