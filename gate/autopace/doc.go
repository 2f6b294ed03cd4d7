// Package autopace is the gate's auto mode: every interval it reads the
// tiers' health (the sum of logic_queue_depth and the battle p99 from
// their /metrics pages, and the backpressure ratio on logic's replies to
// this gate) and decides the admission line's release rate.
//
// The parts, each small:
//
//   - Pace (pace.go) is the rate controller: pure, no goroutines and no
//     I/O, the time passed in, so every decision is a unit test away.
//   - Scraper (scrape.go) reads the /metrics pages; Pressure (pressure.go)
//     collects the backpressure ratios the gate's request path sees.
//   - Loop (loop.go) is the goroutine: each interval it reads the signals
//     and hands them to its Applier, the gate's admission line, which
//     steps its Pace (under its own lock, as operators change the same
//     settings) and applies the rate decided. The gate's Run owns the
//     goroutine and stops it with its context.
package autopace
