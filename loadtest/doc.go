// Package loadtest is Levee's load tool: loadtestcmd.Main(game, ...) plays
// scenarios of any game's actions against a cluster on this machine and
// reports, with figures and plots, what the cluster did (cmd/loadtest is
// arena's). This package holds no code; the tool is its subpackages, each
// with one job:
//
//   - scenario reads the scenario language (strict YAML, the embedded
//     presets of scenarios; the language is scenarios/README.md): who
//     arrives when (arrival), what the players do (the game's actions with
//     request templates, reqtmpl, checked against its declaration), the
//     pool of connections
//     of an open-loop test, the operator's timeline, the thresholds;
//   - engine plays a scenario: players arrive on its curve (an open
//     model), wait in the gates' lines, play the action mix with think
//     times, drop and come back; or a fixed pool of connections is offered
//     requests at start + i/rate whatever the replies do (the overload
//     test); the timeline changes the lines through the gates' admin API
//     (lineadmin) and injects faults (fault); a probe reads the servers'
//     /metrics (probe); past one process's file limit the players are
//     spread over worker processes;
//   - capacity is the search for the requests/s a cluster serves of a mix
//     (loadtest capacity): a closed loop's estimate, then stepped open-loop
//     rates by a pure step rule, one engine run per step;
//   - record counts every request once (its outcome class by Classify,
//     latency from send and from when it was due) into per-second points;
//   - report is the run file (NDJSON) and what is made of it: the table,
//     the HTML plots, comparisons, the figures the thresholds read (also
//     over a window of the run) and the drills' RELIABILITY.md;
//   - threshold parses and evaluates the pass rules ("p(99)[overload] <= 3 *
//     p(99)[baseline]");
//   - audit is how a game's own check plugs in (arena's ledger,
//     examples/arena/arenaledger, checks that every acknowledged mutation
//     is in the players' state exactly once);
//   - loadtestcmd is the command line a game's loadtest binary runs;
//   - target keeps the load on loopback and dials from 127.0.0.x source
//     addresses.
//
// Every load is bounded in count and time and stops by itself; a target
// that is not loopback is refused before anything is sent.
package loadtest
