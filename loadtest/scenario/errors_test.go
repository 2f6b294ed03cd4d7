package scenario

import (
	"errors"
	"strings"
	"testing"

	"github.com/leveehq/levee/loadtest/threshold"
)

// TestBadFiles checks that each kind of bad scenario is rejected with a
// message naming the file, the line and the field.
func TestBadFiles(t *testing.T) {
	fs := files(map[string]string{
		"dir/launch.csv":  "time,players\n0,200\n60,5000\n",
		"dir/bad.csv":     "time,players\n0,200\n60,5000\nsoon,6000\n",
		"dir/prom.json":   `{"status":"success","data":{"resultType":"vector","result":[]}}`,
		"dir/broken.json": `{"status":"success","data":`,
	})
	for _, tc := range []struct {
		name string
		in   string
		sets []string
		want string
	}{
		{"bad duration", `arrivals:
  start: 200
  phases:
    - {duration: 2m, players: 5000}
    - {duration: 3m, players: 30000}
    - duration: ten
      players: 80000
players:
  actions: [{do: profile, weight: 1}]
`, nil, `launch.yaml:6: arrivals.phases[2].duration: "ten" is not a duration (e.g. 500ms, 10s, 5m, 1m30s)`},
		{"negative duration", "t0: -5m\n" + minimal, nil, "launch.yaml:1: t0: must be >= 0, got -5m"},
		{"unknown field", minimal + "  thinks: 30s\n", nil,
			"launch.yaml:7: players.thinks: unknown field; the fields here are login, actions, think, think_jitter, session, reconnect, json"},
		{"unknown top field", "senario: x\n" + minimal, nil, "launch.yaml:1: senario: unknown field; the fields here are version, name, description, engine, scale, speed, seed, t0, capacity, offered, arrivals, pool, players, client, timeline, thresholds, run, ledger, replay_check"},
		{"derived field", "curve: x\n" + minimal, nil, "launch.yaml:1: curve: unknown field; the fields here are version, name, description, engine, scale, speed, seed, t0, capacity, offered, arrivals, pool, players, client, timeline, thresholds, run, ledger, replay_check"},
		{"given twice", "scale: 1\nscale: 2\n" + minimal, nil, "launch.yaml:2: scale: given twice (also on line 1)"},
		{"wrong type number", "scale: big\n" + minimal, nil, `launch.yaml:1: scale: "big" is not a number`},
		{"wrong type list", minimal + "  think: [1, 2]\n", nil, "launch.yaml:7: players.think: want a duration (e.g. 10s), got a list"},
		{"wrong type mapping", "players: [1]\narrivals: {csv: x.csv}\n", nil, "launch.yaml:1: players: want a mapping of fields, got a list"},
		{"wrong type int", minimal + "run: {workers: 2.5}\n", nil, `launch.yaml:7: run.workers: "2.5" is not a whole number`},
		{"wrong type uint", minimal + "seed: -1\n", nil, `launch.yaml:7: seed: "-1" is not a whole number >= 0`},
		{"not a mapping", "- a\n- b\n", nil, "launch.yaml:1: want a scenario (a mapping of fields), got a list"},
		{"yaml syntax", "arrivals:\n  phases: [\n", nil, "launch.yaml:2: did not find expected node content"},
		{"two documents", minimal + "---\nscale: 2\n", nil, "launch.yaml:7: more than one YAML document; a scenario is one"},
		{"missing arrivals", "players:\n  actions: [{do: profile, weight: 1}]\n", nil, "launch.yaml: arrivals: required: give one of phases, csv or prometheus"},
		{"missing actions", "arrivals:\n  phases: [{duration: 1m, players: 5}]\nplayers:\n  think: 1s\n", nil, "launch.yaml:3: players.actions: required: at least one action ({do: ACTION, weight: W, request: {...}})"},
		{"missing phase duration", "arrivals:\n  phases:\n    - {players: 5}\n" + minimal[len("arrivals:\n  phases:\n    - {duration: 1m, players: 100}\n"):], nil,
			"launch.yaml:3: arrivals.phases[0].duration: required (how long the ramp to the target takes, e.g. 2m)"},
		{"missing phase target", "arrivals:\n  phases:\n    - {duration: 1m}\n" + minimal[len("arrivals:\n  phases:\n    - {duration: 1m, players: 100}\n"):], nil,
			"launch.yaml:3: arrivals.phases[0]: required: players (present at the phase's end) or rate (arrivals/s at its end)"},
		{"zero phase duration", "arrivals:\n  phases:\n    - {duration: 0s, players: 5}\n" + minimal[len("arrivals:\n  phases:\n    - {duration: 1m, players: 100}\n"):], nil,
			"launch.yaml:3: arrivals.phases[0].duration: must be > 0, got 0s"},
		{"missing do", minimal + "    - {weight: 1}\n", nil, "launch.yaml:7: players.actions[1].do: required: the game's action name"},
		{"missing weight", minimal + "    - {do: battle}\n", nil, "launch.yaml:7: players.actions[1].weight: required: a weight > 0 (the action's share of the mix)"},
		{"zero weight", minimal + "    - {do: battle, weight: 0}\n", nil, "launch.yaml:7: players.actions[1].weight: must be > 0, got 0"},
		{"out-of-range share", minimal + "  reconnect: 1.5\n", nil, "launch.yaml:7: players.reconnect: must be a share in [0, 1], got 1.5"},
		{"out-of-range jitter", minimal + "  think_jitter: -0.1\n", nil, "launch.yaml:7: players.think_jitter: must be a share in [0, 1], got -0.1"},
		{"scale", "scale: 0\n" + minimal, nil, "launch.yaml:1: scale: must be in (0, 10], got 0"},
		{"speed", "speed: 101\n" + minimal, nil, "launch.yaml:1: speed: must be in (0, 100], got 101"},
		{"workers", minimal + "run:\n  workers: 65\n", nil, "launch.yaml:8: run.workers: must be in 0..64, got 65"},
		{"max_requests", minimal + "run:\n  max_requests: 0\n", nil, "launch.yaml:8: run.max_requests: must be in 1..10000000, got 0"},
		{"peak", "scale: 10\narrivals:\n  phases: [{duration: 1m, players: 200000}]\nplayers:\n  actions: [{do: profile, weight: 1}]\n", nil,
			"launch.yaml:2: arrivals: peak players 200000 x scale 10 = 2000000, at most 1000000"},
		{"both players and rate", "arrivals:\n  phases:\n    - {duration: 1m, players: 5, rate: 2}\n" + minimal[len("arrivals:\n  phases:\n    - {duration: 1m, players: 100}\n"):], nil,
			"launch.yaml:3: arrivals.phases[0].rate: players and rate both given; a phase has one target"},
		{"mixed kinds", `arrivals:
  phases:
    - {duration: 1m, rate: 5}
    - duration: 1m
      players: 100
players:
  actions: [{do: profile, weight: 1}]
`, nil, "launch.yaml:5: arrivals.phases[1].players: phases mix players and rate (phases[0] has rate); use one kind"},
		{"two arrival sources", `arrivals:
  phases: [{duration: 1m, players: 5}]
  csv: launch.csv
players:
  actions: [{do: profile, weight: 1}]
`, nil, "launch.yaml:3: arrivals.csv: two arrival sources (phases and csv); give one"},
		{"start without phases", "arrivals:\n  start: 5\n  csv: launch.csv\nplayers:\n  actions: [{do: profile, weight: 1}]\n", nil,
			"launch.yaml:2: arrivals.start: only with phases (a file's curve starts at its first row)"},
		{"template range", minimal + "    - {do: buy_item, weight: 1, request: {quantity: {$range: [3, 1]}}}\n", nil,
			"launch.yaml:7: players.actions[1].request.quantity: $range [3, 1]: LO must be <= HI"},
		{"template placeholder", minimal + "    - do: start_battle\n      weight: 1\n      request:\n        battle_id: \"{{battle}}\"\n", nil,
			"launch.yaml:10: players.actions[1].request.battle_id: unknown placeholder {{battle}}; want {{player_id}}, {{seq}}, {{job_id}}, {{run_id}}"},
		{"template not a mapping", minimal + "    - {do: get_profile, weight: 1, request: [1]}\n", nil,
			"launch.yaml:7: players.actions[1].request: want a mapping of the request's fields (e.g. {} or {name: value})"},
		{"login weight", minimal + "  login: {do: get_profile, weight: 1}\n", nil, "launch.yaml:7: players.login.weight: not for the login (it is made once, first)"},
		{"criticality", minimal + "    - {do: battle, weight: 1, criticality: urgent}\n", nil,
			`launch.yaml:7: players.actions[1].criticality: unknown criticality "urgent"; want critical, default or sheddable`},
		{"policy", minimal + "client: {policy: smart}\n", nil, `launch.yaml:7: client.policy: unknown policy "smart"; want sdk, naive or bare`},
		{"naive retry", minimal + "client:\n  policy: naive\n  retry: {attempts: 3}\n", nil,
			"launch.yaml:9: client.retry: only with policy sdk (the naive and bare clients neither retry nor pace)"},
		{"bare actions", minimal + "client: {policy: bare}\n", nil, "launch.yaml:5: players.actions: not with client.policy bare (its connections make no request)"},
		{"retry cap", minimal + "client:\n  retry: {base: 1s, cap: 100ms}\n", nil, "launch.yaml:8: client.retry.cap: must be >= base (1s), got 100ms"},
		{"unknown threshold figure", minimal + "thresholds:\n  - p(99) < 500ms\n  - latency < 1s\n", nil,
			`launch.yaml:9: thresholds[1]: threshold: "latency < 1s": unknown figure "latency"; the figures are p(N), ` + strings.Join(threshold.Scalars, ", ") + ` and AGG(series) with AGG one of ` + strings.Join(threshold.Aggregates, ", ") + ` over ` + strings.Join(threshold.SeriesNames, ", ")},
		{"bad threshold syntax", minimal + "thresholds: [\"p(99) << 500ms\"]\n", nil,
			`launch.yaml:7: thresholds[0]: threshold: "p(99) << 500ms": want a figure (e.g. p(99), error_rate, max(cpu)), got "< 500ms"`},
		{"bad if", minimal + "timeline:\n  - at: 10s\n    line: {mode: open}\n    if: [\"max(cpu) < 0.8\", \"cpu < 0.8\"]\n", nil,
			`launch.yaml:10: timeline[0].if[1]: threshold: "cpu < 0.8": cpu is a per-second series: use max(cpu), min(cpu), avg(cpu) or last(cpu)`},
		{"bad timeline at", "t0: 5m\n" + minimal + "timeline:\n  - at: T+five\n    line: {mode: open}\n", nil,
			`launch.yaml:9: timeline[0].at: "T+five" is not T±DURATION (T-5m, T+0, T+15m): "five" is not a duration (e.g. 500ms, 10s, 5m, 1m30s)`},
		{"bad timeline at word", minimal + "timeline:\n  - at: soon\n    line: {mode: open}\n", nil,
			`launch.yaml:8: timeline[0].at: "soon" is not T±DURATION (T-5m, T+0, T+15m) or a duration from the start`},
		{"timeline before start", "t0: 2m\n" + minimal + "timeline:\n  - at: T-5m\n    line: {mode: open}\n", nil,
			"launch.yaml:9: timeline[0].at: T-5m is before the start (t0 is 2m0s)"},
		{"timeline order", "t0: 5m\n" + minimal + "timeline:\n  - {at: T+5m, line: {mode: open}}\n  - {at: T+0, line: {mode: closed}}\n", nil,
			"launch.yaml:10: timeline[1].at: T+0 is before timeline[0]'s T+5m; keep the timeline in order"},
		{"timeline missing at", minimal + "timeline:\n  - line: {mode: open}\n", nil,
			"launch.yaml:8: timeline[0].at: required: T-5m, T+0, T+15m (from t0) or a duration from the start"},
		{"timeline missing line", minimal + "timeline:\n  - at: 10s\n    note: hi\n", nil,
			"launch.yaml:8: timeline[0]: required: line (a line change: mode, rate, interval) or fault (kill, pause, restart, cpu, cut, fill or start)"},
		{"line and fault", minimal + "timeline:\n  - at: 10s\n    line: {mode: open}\n    fault: {do: kill, target: logic}\n", nil,
			"launch.yaml:10: timeline[0].fault: a step is a line change or a fault, not both; make it two steps"},
		{"fault kind", minimal + "timeline:\n  - at: 10s\n    fault: {do: nuke, target: logic}\n", nil,
			`launch.yaml:9: timeline[0].fault.do: unknown fault "nuke"; want kill, pause, restart, cpu, cut, fill or start`},
		{"fault no do", minimal + "timeline:\n  - at: 10s\n    fault: {target: logic}\n", nil,
			"launch.yaml:9: timeline[0].fault.do: required: kill, pause, restart, cpu, cut, fill or start"},
		{"fault no target", minimal + "timeline:\n  - at: 10s\n    fault:\n      do: kill\n", nil,
			"launch.yaml:9: timeline[0].fault.target: required: what to hurt (a compose service name: gate, logic, battle-1)"},
		{"fault unknown field", minimal + "timeline:\n  - at: 10s\n    fault:\n      do: kill\n      signal: TERM\n", nil,
			"launch.yaml:11: timeline[0].fault.signal: unknown field; the fields here are do, target, for, grace, factor, path"},
		{"fault for missing", minimal + "timeline:\n  - at: 10s\n    fault: {do: pause, target: battle-1}\n", nil,
			"launch.yaml:9: timeline[0].fault.for: required for pause: how long (e.g. 20s)"},
		{"fault for zero", minimal + "timeline:\n  - at: 10s\n    fault:\n      do: cut\n      target: logic\n      for: 0\n", nil,
			"launch.yaml:12: timeline[0].fault.for: must be > 0"},
		{"fault for on kill", minimal + "timeline:\n  - at: 10s\n    fault:\n      do: kill\n      target: logic\n      for: 5s\n", nil,
			"launch.yaml:12: timeline[0].fault.for: not for kill: it is over when the target is back"},
		{"fault factor missing", minimal + "timeline:\n  - at: 10s\n    fault: {do: cpu, target: battle-1, for: 10s}\n", nil,
			"launch.yaml:9: timeline[0].fault.factor: required for cpu: the share of the CPU limit left, in (0, 1) (0.2 takes 80 % away)"},
		{"fault factor range", minimal + "timeline:\n  - at: 10s\n    fault:\n      do: cpu\n      target: battle-1\n      for: 10s\n      factor: 1.5\n", nil,
			"launch.yaml:13: timeline[0].fault.factor: must be in (0, 1), got 1.5"},
		{"fault factor on pause", minimal + "timeline:\n  - at: 10s\n    fault:\n      do: pause\n      target: b\n      for: 10s\n      factor: 0.5\n", nil,
			"launch.yaml:13: timeline[0].fault.factor: only for cpu"},
		{"fault path missing", minimal + "timeline:\n  - at: 10s\n    fault: {do: fill, target: logic, for: 10s}\n", nil,
			"launch.yaml:9: timeline[0].fault.path: required for fill: the absolute path inside the target whose filesystem fills (e.g. /data)"},
		{"fault path relative", minimal + "timeline:\n  - at: 10s\n    fault:\n      do: fill\n      target: logic\n      for: 10s\n      path: data\n", nil,
			`launch.yaml:13: timeline[0].fault.path: must be absolute, got "data"`},
		{"fault path on cut", minimal + "timeline:\n  - at: 10s\n    fault:\n      do: cut\n      target: logic\n      for: 10s\n      path: /data\n", nil,
			"launch.yaml:13: timeline[0].fault.path: only for fill"},
		{"fault grace on kill", minimal + "timeline:\n  - at: 10s\n    fault:\n      do: kill\n      target: logic\n      grace: 5s\n", nil,
			"launch.yaml:12: timeline[0].fault.grace: only for restart"},
		{"fault past the end", minimal + "run: {duration: 5m}\ntimeline:\n  - at: 4m\n    fault: {do: pause, target: b, for: 2m}\n", nil,
			"launch.yaml:10: timeline[0].fault.for: the fault lasts until 6m0s, after the end of the run (run.duration 5m0s)"},
		{"timeline after end", minimal + "run: {duration: 5m}\ntimeline:\n  - {at: 6m, line: {mode: open}}\n", nil,
			"launch.yaml:9: timeline[0].at: 6m is at or after the end of the run (run.duration 5m0s)"},
		{"unknown line mode", minimal + "timeline:\n  - at: 10s\n    line: {mode: fast}\n", nil,
			`launch.yaml:9: timeline[0].line.mode: unknown line mode "fast"; want open, queueing, paced, closed or auto`},
		{"line rate", minimal + "timeline:\n  - at: 10s\n    line:\n      mode: paced\n      rate: 0\n", nil,
			"launch.yaml:11: timeline[0].line.rate: must be >= 1 (players per interval), got 0"},
		{"line interval", minimal + "timeline:\n  - at: 10s\n    line: {mode: paced, rate: 5, interval: 2h}\n", nil,
			"launch.yaml:9: timeline[0].line.interval: must be in 1ms..1h0m0s, got 2h0m0s"},
		{"line nothing", minimal + "timeline:\n  - at: 10s\n    line: {}\n", nil, "launch.yaml:9: timeline[0].line: changes nothing; give mode, rate or interval"},
		{"csv file missing", "arrivals:\n  csv: nope.csv\nplayers:\n  actions: [{do: profile, weight: 1}]\n", nil,
			"launch.yaml:2: arrivals.csv: open dir/nope.csv: file does not exist"},
		{"bad csv row", "arrivals:\n  csv: bad.csv\nplayers:\n  actions: [{do: profile, weight: 1}]\n", nil,
			`launch.yaml:2: arrivals.csv: bad.csv: row 4: time "soon" is not a number, duration or RFC 3339 time`},
		{"bad prometheus json", "arrivals:\n  prometheus: broken.json\nplayers:\n  actions: [{do: profile, weight: 1}]\n", nil,
			"launch.yaml:2: arrivals.prometheus: broken.json: not a Prometheus query_range answer: unexpected EOF"},
		{"prometheus vector", "arrivals:\n  prometheus: prom.json\nplayers:\n  actions: [{do: profile, weight: 1}]\n", nil,
			`launch.yaml:2: arrivals.prometheus: prom.json: data.resultType "vector", want "matrix" (a query_range answer)`},
		{"version", "version: 2\n" + minimal, nil, "launch.yaml:1: version: must be 1, got 2"},
		{"engine", "engine: chaos\n" + minimal, nil, `launch.yaml:1: engine: unknown engine "chaos"; the one engine is players (leave it out)`},
		{"retired engine", "engine: smoke\n" + minimal, nil, "launch.yaml:1: engine: engine smoke is gone: the smoke preset runs on the players engine (loadtest run smoke); leave engine out"},

		// Overrides.
		{"bad override value", minimal, []string{"players.think=ten"}, `launch.yaml: --set players.think: "ten" is not a duration (e.g. 500ms, 10s, 5m, 1m30s)`},
		{"bad override range", minimal, []string{"scale=20"}, "launch.yaml: --set scale: must be in (0, 10], got 20"},
		{"bad override path", minimal, []string{"players.thinks=2s"}, "launch.yaml: --set players.thinks: unknown field; the fields here are login, actions, think, think_jitter, session, reconnect, json"},
		{"bad override syntax", minimal, []string{"players..think=2s"}, "launch.yaml: --set players..think: bad path; want names and [index]es like arrivals.phases[1].players"},
		{"override without =", minimal, []string{"scale"}, "launch.yaml: --set scale: want path=value, e.g. players.think=2s"},
		{"override index past end", minimal, []string{"arrivals.phases[1].players=500"}, "launch.yaml: --set arrivals.phases[1].players: index 1 is past the end of arrivals.phases (1 entries)"},
		{"override index on mapping", minimal, []string{"players[0]=1"}, "launch.yaml: --set players[0]: players is not a list"},
		{"override into scalar", minimal, []string{"players.think.x=1"}, "launch.yaml: --set players.think: want a duration (e.g. 10s), got a mapping"},
		{"override into set scalar", minimal + "  think: 2s\n", []string{"players.think.x=1"}, "launch.yaml: --set players.think.x: players.think is not a mapping"},
		{"override a mapping", minimal, []string{"players=1"}, "launch.yaml: --set players: players is a mapping; set a value inside it"},
		{"override creates bad", minimal, []string{"arrivals.csv=launch.csv"}, "launch.yaml: --set arrivals.csv: two arrival sources (phases and csv); give one"},
		{"override threshold", minimal + "thresholds: [\"p(99) < 1s\"]\n", []string{"thresholds[0]=p(99) < 1 s"}, `launch.yaml: --set thresholds[0]: threshold: "p(99) < 1 s": unexpected "s" at the end`},
	} {
		_, err := Parse("dir/launch.yaml", []byte(tc.in), tc.sets, fs)
		var e *Error
		switch {
		case err == nil:
			t.Errorf("%s: no error, want %s", tc.name, tc.want)
		case !errors.As(err, &e):
			t.Errorf("%s: %T %v is not an *Error", tc.name, err, err)
		case err.Error() != "dir/"+tc.want:
			t.Errorf("%s:\n got %s\nwant dir/%s", tc.name, err, tc.want)
		}
	}
}
