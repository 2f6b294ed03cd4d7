// Package battle is Levee's battle tier: a stateless gRPC service that runs
// deterministic battle simulations (the same request gives the same reply, to
// the bit) and costs real CPU, so it scales out on its latency.
//
// The tier protects itself (level 3 of Levee's backpressure). A CPU sampler
// (levee/internal/cpu) measures the utilisation of the CPUs the process may
// use. Each valid request whose caller is still there then goes through:
//
//   - the jittered throttle (seed 004): above -throttle-cpu (85 %) it waits a
//     random 0..-throttle-max-delay (100 ms), and is dropped unsimulated if
//     its caller goes meanwhile; the wait holds no in-flight slot;
//   - adaptive shedding (seed 001, levee/internal/shed): above -shed-cpu
//     (80 %), with a cool-off, a request beyond maxPass × minRTT in flight
//     (over a 5 s window) is refused, sheddable ones first and critical ones
//     never (the class, levee/internal/priority, comes from the incoming
//     levee-criticality gRPC metadata: the gate's decision, passed on by
//     logic; none means default);
//   - the hard cap of -max-in-flight simulations, for every criticality, as
//     the last line.
//
// A refusal is RESOURCE_EXHAUSTED at once, with a retry delay of 100–200 ms
// in its status details with the in-flight count and fill ratio as a
// leveev2.Backpressure (apperr.Overloaded). Deadlines and cancellations from the caller stop a
// running simulation. -protection turns all of it off (and the tier then
// simulates every valid request to the end, even for a caller that has
// gone); -throttle, -adaptive-shed and -in-flight-cap turn off one each.
//
// Metrics: battle_latency_seconds (the autoscaler's histogram),
// battle_inflight, battle_requests_total{outcome}, battle_shed_total{reason,
// criticality}, battle_throttle_delay_seconds, battle_cpu_utilization and
// battle_adaptive_limit.
package battle
