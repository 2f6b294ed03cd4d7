// Package battle is Levee's battle tier: a stateless gRPC service that runs
// deterministic battle simulations (the same request gives the same reply, to
// the bit) and costs real CPU, so it scales out on its latency.
//
// The tier protects itself: a hard cap on simulations in flight answers the
// overflow at once with RESOURCE_EXHAUSTED and a retry delay, deadlines and
// cancellations from the caller stop a running simulation, and the
// battle_latency_seconds histogram feeds the autoscaler.
package battle
