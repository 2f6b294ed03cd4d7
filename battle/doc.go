// Package battle is Levee's battle tier: a stateless gRPC service that runs
// a game's compute jobs (declared with game.Job) and costs real CPU, so it
// scales out on its latency. Jobs
// should be deterministic: logic may run one again after a failure and
// applies the first result it gets.
//
// The service is levee.v2.Jobs: Run(JobRequest{job, key, request}) looks
// the job up by its declared name (an unknown one is UNKNOWN_MESSAGE, as
// Unimplemented), decodes the request as the job's request message (one
// that does not decode is BAD_REQUEST) and returns the job's reply,
// encoded, in JobReply.reply. The job's own game errors (game.Invalid,
// Reject, NotFound, Forbidden) travel with their code, message and reason
// (in the status details' leveev2.Error); any other error is INTERNAL. A
// job that panics fails its own call with INTERNAL, is logged with its
// name and key and counted (battle_job_panics_total); the tier goes on.
//
// The tier protects itself (level 3 of Levee's backpressure), the same way
// for every job. A CPU sampler (levee/internal/cpu) measures the
// utilisation of the CPUs the process may use. Each valid request whose
// caller is still there then goes through:
//
//   - the jittered throttle (seed 004): above -throttle-cpu (85 %) it waits a
//     random 0..-throttle-max-delay (100 ms), and is dropped without running
//     if its caller goes meanwhile; the wait holds no in-flight slot;
//   - adaptive shedding (seed 001, levee/internal/shed): above -shed-cpu
//     (80 %), with a cool-off, a request beyond maxPass × minRTT in flight
//     (over a 5 s window, over every job) is refused, sheddable ones first
//     and critical ones never (the class, levee/internal/priority, comes
//     from the incoming levee-criticality gRPC metadata: the gate's
//     decision from the action's declared class, passed on by logic; none
//     means default);
//   - the hard cap of -max-in-flight jobs, for every criticality, as the
//     last line.
//
// A refusal is RESOURCE_EXHAUSTED at once, with a retry delay of 100–200 ms
// in its status details with the in-flight count and fill ratio as a
// leveev2.Backpressure (apperr.Overloaded). The caller's deadline and
// cancellation end the job's context (a job should look at it).
// -protection turns all of it off (and the tier then runs every valid
// request to the end, even for a caller that has gone); -throttle,
// -adaptive-shed and -in-flight-cap turn off one each.
//
// Metrics: battle_latency_seconds{game_job} (the autoscaler's histogram:
// summed over jobs, it is the tier's; by game_job, each job's p99),
// battle_inflight, battle_requests_total{outcome}, battle_shed_total{reason,
// criticality}, battle_throttle_delay_seconds, battle_cpu_utilization,
// battle_adaptive_limit and battle_job_panics_total{game_job}. The job's
// label is game_job, not job: Prometheus keeps job for the scrape job.
// battle_pressure, the HPA's second signal, is a recording rule over these
// counters (deploy/prometheus/rules), unchanged.
//
// Package battle/battlecmd is the command (flags, BATTLE_* variables,
// signals) for a game's own binary.
package battle
