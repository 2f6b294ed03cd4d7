// Package loadtest drives simulated players (bots) against a gate and
// reports what the cluster did.
//
// Three parts, kept apart so that new traffic shapes need no new plumbing:
//   - a Scenario says how many bots come, when (a Schedule: arrival time as a
//     function of the bot's rank, e.g. a linear ramp or, later, a launch-day
//     curve), for how long, and what each does (a Behaviour such as Smoke);
//   - the Runner connects the bots to a loopback gate through the client
//     SDK, bounds everything in count and time, and records every request's
//     outcome and latency;
//   - the Report sums it up: outcomes by class and code, latency
//     percentiles, and the problems that make a run fail.
//
// The overload scenario (RunOverload, OverloadConfig, OverloadReport) is
// shaped differently, as open-loop load must be: a fixed pool of
// connections (SDK retries and pacing off), a closed-loop phase that
// measures the capacity C, then a dispatcher that issues request i at
// start + i/rate (Due) whatever the replies do, at 0.8 × C and 10 × C. It
// samples the tiers' memory from their /metrics and judges the run against
// issue 3's criteria (goodput, p99 of served requests, exactly one reply).
//
// The line scenario (RunLine, LineConfig, LineReport) is issue 4's: many
// bots connect at once to a gate whose admission line is active and wait to
// be admitted. It judges that none was lost, that the gate released them in
// the order they arrived (counted only for pairs whose order is sure from
// the bots' side, against release times bounded with the gate's own
// waited_ms, so that jitter in delivering the pushes is not mistaken for
// disorder), and that the pace the bots saw was the configured one, before
// and after a change made through the gate's admin API (Admin) mid-run.
//
// The hold scenario (RunHold, HoldConfig, HoldReport) is the memory
// benchmark's load: many connections held open (waiting in the gate's line,
// or bare WebSockets to any server), with the server's resident memory read
// before and during the hold (ReadRSS) and reported per connection.
//
// With a RunFile (CreateRunFile) each scenario also writes the common NDJSON
// run file of levee/loadtest/report: per second what its record.Recorder
// counted (requests for smoke and overload; players arrived, connected,
// waiting, admitted, failed, dropped and left for line and hold), the
// servers' levels it sampled, its phases and its report's criteria.
package loadtest
