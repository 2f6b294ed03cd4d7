package scenario

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/loadtest/arrival"
)

// files is a fake file system for csv/prometheus paths.
func files(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if s, ok := m[p]; ok {
			return []byte(s), nil
		}
		return nil, &os.PathError{Op: "open", Path: p, Err: os.ErrNotExist}
	}
}

const minimal = `arrivals:
  phases:
    - {duration: 1m, players: 100}
players:
  actions:
    - {do: profile, weight: 1}
`

func TestDefaults(t *testing.T) {
	s, err := Parse("dir/min.yaml", []byte(minimal), nil, files(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Scenario{Version: 1, Name: "min", Engine: "players", Scale: 1, Speed: 1}
	if s.Version != want.Version || s.Name != want.Name || s.Engine != want.Engine || s.Scale != 1 || s.Speed != 1 || s.File != "dir/min.yaml" {
		t.Fatalf("%+v", s)
	}
	if s.Client.Policy != "sdk" || s.Client.RequestTimeout != Duration(5*time.Second) {
		t.Fatalf("client %+v", s.Client)
	}
	// run.duration = max(curve end 1m, no actions) + 1m; drain = 5s + 2s.
	if s.Run != (Run{Duration: Duration(2 * time.Minute), Drain: Duration(7 * time.Second), MaxRequests: 10_000_000}) {
		t.Fatalf("run %+v", s.Run)
	}
	if a := s.Players.Actions[0]; a.Criticality != "" || a.Request == nil || !a.Request.Fixed() || a.Action != nil {
		t.Fatalf("profile %+v", a)
	}
	if s.Curve.Kind() != arrival.Players || s.Curve.At(30*time.Second) != 50 {
		t.Fatalf("curve %v", s.Curve.Points())
	}
	if s.WorkerCount() != 1 {
		t.Fatalf("workers %d", s.WorkerCount())
	}
	// An empty file is a scenario without arrivals.
	if _, err := Parse("e.yaml", nil, nil, nil); err == nil || err.Error() != "e.yaml: arrivals: required: give one of phases, csv or prometheus" {
		t.Fatalf("empty: %v", err)
	}
}

func TestActionDefaults(t *testing.T) {
	in := minimal + `    - {do: purchase, weight: 2}
    - {do: battle, weight: 3, request: {units: {$range: [4, 8]}}, criticality: sheddable}
  login: {do: profile}
timeline:
  - {at: 30s, line: {mode: open}}
  - {at: 3m, line: {rate: 5}}
`
	s, err := Parse("a.yaml", []byte(in), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	acts := s.Players.Actions
	for i, want := range []struct {
		do, crit string
		w        float64
		draws    bool
	}{{"profile", "", 1, false}, {"purchase", "", 2, false}, {"battle", "sheddable", 3, true}} {
		a := acts[i]
		if a.Do != want.do || a.Weight != want.w || a.Criticality != want.crit || a.Request == nil || a.Request.Draws() != want.draws {
			t.Errorf("actions[%d] = %+v, want %+v", i, a, want)
		}
	}
	if l := s.Players.Login; l == nil || l.Do != "profile" || l.Request == nil {
		t.Errorf("login %+v", l)
	}
	// The last action (3m) is after the curve's end (1m): duration 3m + 1m.
	if s.Run.Duration != Duration(4*time.Minute) || s.Timeline[0].Offset != 30*time.Second {
		t.Fatalf("run %+v timeline %+v", s.Run, s.Timeline)
	}
}

func TestLaunchPreset(t *testing.T) {
	s, err := Load("launch", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.File != "preset:launch" || s.Name != "launch" || s.T0 != Duration(5*time.Minute) || s.Engine != "players" {
		t.Fatalf("%+v", s)
	}
	// 200 online until T+0, then 5,000 at T+1, 30,000 at T+2, 80,000 at
	// T+5 (10 minutes from the start).
	for _, at := range []struct {
		t time.Duration
		v float64
	}{{0, 200}, {5 * time.Minute, 200}, {6 * time.Minute, 5000}, {7 * time.Minute, 30000}, {10 * time.Minute, 80000}} {
		if got := s.Curve.At(at.t); got != at.v {
			t.Errorf("At(%v) = %v, want %v", at.t, got, at.v)
		}
	}
	offs := []time.Duration{0, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute}
	modes := []string{"queueing", "paced", "paced", "open"}
	if len(s.Timeline) != 4 {
		t.Fatalf("timeline %+v", s.Timeline)
	}
	for i, a := range s.Timeline {
		if a.Offset != offs[i] || a.Line.Mode != modes[i] {
			t.Errorf("timeline[%d] = %+v", i, a)
		}
	}
	if len(s.Timeline[2].Conds) != 2 || s.Timeline[2].Conds[1].String() != "p(99) < 500ms" {
		t.Fatalf("if: %+v", s.Timeline[2].Conds)
	}
	if len(s.Checks) != 5 || s.Checks[4].String() != "admitted == arrived" {
		t.Fatalf("checks %v", s.Checks)
	}
	if s.Run.Duration != Duration(21*time.Minute) || s.WorkerCount() != 6 {
		t.Fatalf("run %+v workers %d", s.Run, s.WorkerCount())
	}
	// At scale 0.1 and speed 10: 8,000 players, 10 min -> 1 min, 126 s of wall time.
	small, err := Load("launch", []string{"scale=0.1", "speed=10"})
	if err != nil {
		t.Fatal(err)
	}
	w := small.WallCurve()
	if w.Peak() != 8000 || w.End() != time.Minute || small.WallDuration() != 126*time.Second || small.WorkerCount() != 1 {
		t.Fatalf("small: peak %v end %v wall %v workers %d", w.Peak(), w.End(), small.WallDuration(), small.WorkerCount())
	}
	if l := small.WallLine(*small.Timeline[1].Line); l.Rate != 100 || l.Interval != Duration(time.Second) || l.Mode != "paced" {
		t.Fatalf("wall line %+v", l)
	}
	if l := small.WallLine(LineChange{Rate: 3}); l.Rate != 1 {
		t.Fatalf("a scaled rate is at least 1: %+v", l)
	}
}

func TestPresets(t *testing.T) {
	ps := Presets()
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
		if p.Description == "" {
			t.Errorf("%s: no description", p.Name)
		}
		s, err := Load(p.Name, nil)
		if err != nil {
			t.Errorf("%s: %v", p.Name, err)
			continue
		}
		if s.Name != p.Name || s.File != "preset:"+p.Name {
			t.Errorf("%s: name %q file %q", p.Name, s.Name, s.File)
		}
		if s.Engine != EnginePlayers {
			t.Errorf("%s: engine %s", p.Name, s.Engine)
		}
	}
	if strings.Join(names, " ") != "hold hold-bare hold-line launch line overload smoke" {
		t.Fatalf("presets %v", names)
	}
	smoke, err := Load("smoke", []string{"players.think=1s"})
	if err != nil || smoke.Players.Think != Duration(time.Second) || smoke.Curve.Peak() != 300 {
		t.Fatalf("smoke with players.think=1s: %+v, %v", smoke, err)
	}
}

// The engines that are gone are refused, naming the preset that took
// their place; so is their settings mapping.
func TestRetiredEngines(t *testing.T) {
	for _, e := range []string{"smoke", "overload", "line", "hold"} {
		_, err := Parse("o.yaml", []byte("engine: "+e+"\n"+minimal), nil, nil)
		if err == nil || !strings.Contains(err.Error(), "o.yaml:1: engine: engine "+e+" is gone: the "+e+" preset runs on the players engine (loadtest run "+e+")") {
			t.Errorf("engine %s: %v", e, err)
		}
	}
	if _, err := Parse("o.yaml", []byte("engine: fast\n"+minimal), nil, nil); err == nil || !strings.Contains(err.Error(), `unknown engine "fast"; the one engine is players`) {
		t.Errorf("engine fast: %v", err)
	}
	if _, err := Parse("o.yaml", []byte(minimal+"settings:\n  conns: \"50\"\n"), nil, nil); err == nil || !strings.Contains(err.Error(), "settings: unknown field") {
		t.Errorf("settings: %v", err)
	}
}

func TestExamples(t *testing.T) {
	for _, name := range []string{"replay-csv", "replay-prometheus", "ramp-rate"} {
		s, err := Load("../scenarios/examples/"+name+".yaml", nil)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		switch name {
		case "replay-csv", "replay-prometheus":
			if s.Curve.End() != 20*time.Minute || math.Abs(s.Curve.At(10*time.Minute)-80000) > 3200 {
				t.Errorf("%s: end %v, At(10m) %v", name, s.Curve.End(), s.Curve.At(10*time.Minute))
			}
			small, err := Load("../scenarios/examples/"+name+".yaml", []string{"scale=0.05", "speed=4"})
			if err != nil {
				t.Fatal(err)
			}
			w := small.WallCurve()
			if w.End() != 5*time.Minute || math.Abs(w.At(150*time.Second)-s.Curve.At(10*time.Minute)*0.05) > 1e-6 {
				t.Errorf("%s: scaled end %v", name, w.End())
			}
		case "ramp-rate":
			// 0 -> 50/s over 2m (3,000), 50/s for 5m (15,000), 50 -> 0 over 1m (1,500).
			if s.Curve.Kind() != arrival.Rate || s.Curve.Arrivals(8*time.Minute) != 19500 || s.PeakPlayers() != 19500 {
				t.Errorf("%s: arrivals %v", name, s.Curve.Arrivals(8*time.Minute))
			}
		}
	}
}

func TestOverrides(t *testing.T) {
	s, err := Load("launch", []string{
		"scale=0.1", "players.think=2s", "arrivals.phases[1].players=500", "thresholds[0]=p(99) < 1s",
		"seed=42", "client.retry.base=50ms", "timeline[2].if[0]=max(cpu) < 0.9", "name = small launch",
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Scale != 0.1 || s.Players.Think != Duration(2*time.Second) || s.Curve.At(6*time.Minute) != 500 ||
		s.Checks[0].String() != "p(99) < 1s" || s.Seed != 42 || s.Client.Retry.Base != Duration(50*time.Millisecond) ||
		s.Timeline[2].Conds[0].String() != "max(cpu) < 0.9" || s.Name != "small launch" {
		t.Fatalf("%+v", s)
	}
	// A missing mapping is created.
	o, err := Parse("o.yaml", []byte(minimal), []string{"client.retry.base=50ms", "client.retry.cap=1s"}, nil)
	if err != nil || o.Client.Retry.Base != Duration(50*time.Millisecond) || o.Client.Retry.Cap != Duration(time.Second) {
		t.Fatalf("%v %v", o, err)
	}
}

// ledger is a top-level true/false, off by default; anything else is an
// error naming the field.
func TestLedgerField(t *testing.T) {
	s, err := Load("launch", nil)
	if err != nil || s.Ledger {
		t.Fatalf("launch: ledger %v, %v", s.Ledger, err)
	}
	s, err = Load("launch", []string{"ledger=true"})
	if err != nil || !s.Ledger {
		t.Fatalf("ledger=true: %v, %v", s.Ledger, err)
	}
	_, err = Load("launch", []string{"ledger=yes"})
	if err == nil || !strings.Contains(err.Error(), "ledger") || !strings.Contains(err.Error(), "true or false") {
		t.Fatalf("ledger=yes: %v", err)
	}
}

func TestErrorsAreErrors(t *testing.T) {
	_, err := Parse("x.yaml", []byte("scale: 20\n"+minimal), nil, nil)
	var e *Error
	if !errors.As(err, &e) || e.File != "x.yaml" || e.Line != 1 || e.Path != "scale" || e.Msg != "must be in (0, 10], got 20" {
		t.Fatalf("%#v", err)
	}
	_, err = Load("no-such-preset", nil)
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "neither a preset (hold, hold-bare, hold-line, launch, line, overload, smoke) nor a file") {
		t.Fatalf("%v", err)
	}
	_, err = Load("nowhere/x.yaml", nil)
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("%v", err)
	}
}

func TestAliases(t *testing.T) {
	in := "t0: &t 5m\n" + minimal + "run: {duration: *t}\ntimeline:\n  - {at: &z T-5m, line: {mode: queueing}}\n  - {at: *z, line: {mode: open}}\n"
	s, err := Parse("a.yaml", []byte(in), []string{"timeline[1].at=T-1m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The override replaces the alias, not the anchored value it shared.
	if s.Run.Duration != Duration(5*time.Minute) || s.Timeline[0].At != "T-5m" || s.Timeline[1].Offset != 4*time.Minute {
		t.Fatalf("%+v %+v", s.Run, s.Timeline)
	}
	_, err = Parse("a.yaml", []byte(minimal+"client:\n  policy: sdk\n  policy: naive\n"), nil, nil)
	if err == nil || err.Error() != "a.yaml:9: client.policy: given twice (also on line 8)" {
		t.Fatalf("%v", err)
	}
}

// Fault steps: defaults filled (grace 10s), for in wall time at the run's
// speed, conditions and notes as for line steps, and the run lasts past
// the last fault's end.
func TestFaultSteps(t *testing.T) {
	in := "speed: 2\n" + minimal + `timeline:
  - {at: 20s, fault: {do: kill, target: battle-1}, note: crash}
  - {at: 30s, fault: {do: restart, target: gate}, if: ["max(logic_queue_depth) < 100"]}
  - {at: 40s, fault: {do: cpu, target: battle-1, factor: 0.2, for: 10s}}
  - {at: 50s, fault: {do: fill, target: logic, path: /data, for: 4m}}
`
	s, err := Parse("f.yaml", []byte(in), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tl := s.Timeline
	if tl[0].Fault.Do != "kill" || tl[0].Note != "crash" || tl[0].Line != nil {
		t.Errorf("kill step %+v", tl[0])
	}
	if tl[1].Fault.Grace != Duration(10*time.Second) || len(tl[1].Conds) != 1 {
		t.Errorf("restart step %+v", tl[1])
	}
	f := s.WallFault(*tl[2].Fault)
	if f.For != 5*time.Second || f.Factor != 0.2 || f.Target != "battle-1" {
		t.Errorf("cpu at speed 2: %+v, want for 5s", f)
	}
	// The fill ends at 50s + 4m, after the curve (1m): run.duration 4m50s + 1m.
	if s.Run.Duration != Duration(5*time.Minute+50*time.Second) {
		t.Errorf("run.duration %v", s.Run.Duration)
	}
}

// offered sizes the run from the capacity: scale = offered x capacity x
// think / (peak players x speed), so that the peak offered load is offered
// x capacity requests per wall second.
func TestOffered(t *testing.T) {
	const in = `arrivals:
  phases:
    - {duration: 5s, players: 300}
players:
  actions:
    - {do: profile, weight: 1}
  think: 500ms
offered: 0.75
`
	s, err := Parse("d.yaml", []byte(in), []string{"capacity=142"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 0.75 x 142 = 106.5/s; 300 players at one request per 0.5 s offer 600/s.
	if want := 106.5 / 600; math.Abs(s.Scale-want) > 1e-12 {
		t.Errorf("scale = %v, want %v", s.Scale, want)
	}
	if got := s.OfferedRate(); math.Abs(got-106.5) > 1e-9 {
		t.Errorf("offered rate = %v, want 106.5", got)
	}
	// Speed makes each player's requests come faster: a smaller scale.
	s, err = Parse("d.yaml", []byte(in), []string{"capacity=142", "speed=2"}, nil)
	if err != nil || math.Abs(s.Scale-106.5/1200) > 1e-12 || math.Abs(s.OfferedRate()-106.5) > 1e-9 {
		t.Errorf("at speed 2: scale %v, offered %v, %v", s.Scale, s.OfferedRate(), err)
	}
	// Without a capacity the file is read (its scale stays 1); the engine
	// refuses to run it.
	s, err = Parse("d.yaml", []byte(in), nil, nil)
	if err != nil || s.Scale != 1 || s.Offered != 0.75 {
		t.Errorf("no capacity: %v %v", s, err)
	}
	for _, tc := range []struct {
		sets []string
		msg  string
	}{
		{[]string{"capacity=142", "scale=0.5"}, "offered: sets scale from capacity: give scale or offered, not both"},
		{[]string{"offered=0"}, "offered: must be in (0, 1000], got 0"},
		{[]string{"offered=-1"}, "offered: must be in (0, 1000], got -1"},
		{[]string{"players.think=0"}, "offered: needs players.think > 0"},
		{[]string{"capacity=1000000"}, "needs scale 1.25e+03, want (0, 10]"},
	} {
		_, err := Parse("d.yaml", []byte(in), tc.sets, nil)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: %v, want %q", tc.sets, err, tc.msg)
		}
	}
	rate := strings.Replace(in, "players: 300", "rate: 30", 1)
	if _, err := Parse("d.yaml", []byte(rate), []string{"capacity=142"}, nil); err == nil || !strings.Contains(err.Error(), "needs a players curve") {
		t.Errorf("rate curve: %v", err)
	}
}
