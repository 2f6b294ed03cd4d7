package report

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/threshold"
)

// The synthetic run: speed 2, so a scenario minute is 30 wall seconds;
// T+0 at wall second 60 (scenario 2:00). Eight minutes, each built to have
// one status:
//
//	m0 T-2:00 normal    m1 T-1:00 queueing (players waiting)
//	m2 T+0:00 backlog (queue 150)   m3 T+1:00 failing (lost replies)
//	m4 T+2:00 failing (2 % failed)  m5 T+3:00 backlog (battle p99 250 ms)
//	m6 T+4:00 failing (p99 1.5 s)   m7 T+5:00 normal
//
// Every second: 100 sent, 10 arrived, 10 admitted (from m1), levels for
// the CPU tiers; latency 20 ms from send and 30 ms from due.
const (
	synthSpeed   = 2.0
	synthSeconds = 8 * 30
)

var synthStatuses = []string{"normal", "queueing", "backlog", "failing", "failing", "backlog", "failing", "normal"}
var synthLabels = []string{"T-2:00", "T-1:00", "T+0:00", "T+1:00", "T+2:00", "T+3:00", "T+4:00", "T+5:00"}

func synthPoint(t int) record.Point {
	m := t / 30
	p := record.Point{T: t, Counters: map[string]int64{}, Levels: map[string]float64{}, Hists: map[string]*record.Hist{}}
	c := p.Counters
	c["sent"] = 100
	c["arrived"] = 10
	ok, failed, lost := int64(100), int64(0), int64(0)
	switch m {
	case 3:
		ok, lost = 99, 1
	case 4:
		ok, failed = 98, 2
	}
	c["ok"], c["failed"], c["lost"] = ok, failed, lost
	c["profile/ok"] = ok
	c["crit/default/ok"] = ok
	if failed > 0 {
		c["profile/failed"], c["crit/default/failed"], c["reason/INTERNAL"] = failed, failed, failed
	}
	if lost > 0 {
		c["profile/lost"], c["crit/default/lost"], c["reason/timeout"] = lost, lost, lost
	}
	p.Levels["connected"] = float64(10 * (t + 1))
	p.Levels["waiting"] = 0
	if m >= 1 {
		c["admitted"] = 10
	}
	if m == 1 {
		p.Levels["waiting"] = 40
	}
	p.Levels["cpu_gate"] = 0.5
	p.Levels["cpu_logic"] = 1.0 + float64(t%3)/10 // max 1.2
	p.Levels["cpu_battle"] = 0.8
	if t == 100 {
		p.Levels["cpu_battle"] = 1.9 // cpu's max that second
	}
	p.Levels["logic_queue_depth"] = 10
	if m == 2 {
		p.Levels["logic_queue_depth"] = 150
	}
	p.Levels["battle_p99"] = 0.05
	if m == 5 {
		p.Levels["battle_p99"] = 0.25
	}
	lat, due := record.NewHist(), record.NewHist()
	d := 20 * time.Millisecond
	if m == 6 {
		d = 1500 * time.Millisecond
	}
	for range ok + failed {
		lat.Record(d)
		due.Record(d + 10*time.Millisecond)
	}
	p.Hists[record.HistLat], p.Hists[record.HistLatDue] = lat, due
	if m == 1 {
		w := record.NewHist()
		w.Record(45 * time.Second)
		p.Hists["wait"] = w
	}
	return p
}

func synthRun(t *testing.T) *Run {
	t.Helper()
	r := &Run{
		Meta: Meta{Schema: Schema, Tool: Tool, Scenario: "launch", Label: "protected", Scale: 0.1, Speed: synthSpeed,
			Started: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), T0: 60, Capacity: 100,
			Thresholds: []string{"p(50) < 500ms", "lost_replies == 0", "max(logic_queue_depth) < 500", "goodput >= 0.9 * capacity"}},
		Events: []Event{{T: 30, What: "line: queueing"}, {T: 60, What: "line: paced 100/10s"}, {T: 180, What: "line: open"}},
	}
	for s := range synthSeconds {
		r.Points = append(r.Points, synthPoint(s))
	}
	r.Summary = Summarize(r.Points)
	r.Criteria, _ = Evaluate(r, parseAll(t, r.Meta.Thresholds))
	return r
}

func parseAll(t *testing.T, ss []string) []threshold.Threshold {
	t.Helper()
	var ts []threshold.Threshold
	for _, s := range ss {
		th, err := threshold.Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		ts = append(ts, th)
	}
	return ts
}

var rowRE = regexp.MustCompile(`^\s*(T[+-]\d+:\d\d|\d\d:\d\d)\s+(.*\S)\s+(normal|queueing|backlog|failing)\s*$`)

// tableRows returns the label, fields and status of each minute row.
func tableRows(t *testing.T, out string) (labels []string, fields [][]string, statuses []string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels = append(labels, m[1])
		fields = append(fields, strings.Fields(m[2]))
		statuses = append(statuses, m[3])
	}
	return
}

func TestTableRowsAndStatuses(t *testing.T) {
	r := synthRun(t)
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	labels, fields, statuses := tableRows(t, out)
	if strings.Join(labels, " ") != strings.Join(synthLabels, " ") {
		t.Errorf("labels %v, want %v\n%s", labels, synthLabels, out)
	}
	if strings.Join(statuses, " ") != strings.Join(synthStatuses, " ") {
		t.Errorf("statuses %v, want %v\n%s", statuses, synthStatuses, out)
	}
	// Columns: arrived connected waiting admitted cpu×3 queue battle ok/s refused/s lost.
	want := [][]string{
		{"300", "300", "0", "0", "0.50", "1.20", "0.80", "10", "50ms", "100.0", "0.0", "0"},
		{"600", "600", "40", "300", "0.50", "1.20", "0.80", "10", "50ms", "100.0", "0.0", "0"},
		{"900", "900", "0", "600", "0.50", "1.20", "0.80", "150", "50ms", "100.0", "0.0", "0"},
		{"1200", "1200", "0", "900", "0.50", "1.20", "1.90", "10", "50ms", "99.0", "0.0", "30"},
	}
	for i, w := range want {
		if i >= len(fields) || strings.Join(fields[i], " ") != strings.Join(w, " ") {
			t.Errorf("row %d: %v, want %v", i, fields[min(i, len(fields)-1)], w)
		}
	}
	for _, s := range []string{
		"send", "due", "wait", "45.0", // wait row: 45 s
		"profile", "crit/default", "reasons: INTERNAL 60 timeout 30",
		"✓ p(50) < 500ms", "✗ lost_replies == 0", "✓ max(logic_queue_depth) < 500",
		"launch (protected): scale 0.1, speed 2, 240 s of wall time",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
}

func TestTableLabelsWithoutT0(t *testing.T) {
	r := synthRun(t)
	r.Meta.T0 = 0
	r.Meta.Speed = 0.5 // a scenario minute is 120 wall seconds: two rows
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	labels, fields, _ := tableRows(t, b.String())
	if strings.Join(labels, " ") != "00:00 01:00" {
		t.Fatalf("labels %v\n%s", labels, b.String())
	}
	if fields[0][0] != "1200" || fields[1][0] != "2400" {
		t.Errorf("arrived %v %v", fields[0][0], fields[1][0])
	}
}

func TestFacts(t *testing.T) {
	r := synthRun(t)
	f := r.Facts()
	const sent = 100 * synthSeconds
	lost, failed := 30.0, 60.0
	scalars := map[string]float64{
		"sent": sent, "ok": sent - lost - failed, "answered": sent - lost, "failed": failed, "lost_replies": lost,
		"refused": 0, "business": 0, "error_rate": (failed + lost) / sent, "refused_rate": 0,
		"arrived": 10 * synthSeconds, "admitted": 10 * (synthSeconds - 30), "connected": 10 * synthSeconds,
		"goodput": (sent - lost - failed) / synthSeconds, "capacity": 100, "duration": synthSeconds,
		"left": 0, "dial_failures": 0, "reconnects": 0,
	}
	for name, want := range scalars {
		got, ok := f.Value(name)
		if !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, %v; want %v", name, got, ok, want)
		}
	}
	if got, ok := f.Value("max_wait"); !ok || math.Abs(got-45) > 0.05 {
		t.Errorf("max_wait = %v, %v", got, ok)
	}
	for _, name := range threshold.Scalars {
		if strings.HasPrefix(name, "fault_") || slices.Contains(RedialFigures, name) || slices.Contains(lineScalars, name) || strings.HasPrefix(name, "rss_") {
			continue // only runs with faults (drill_test.go), server closes (redial_test.go), a line (line_test.go) or a pid probed (memory_test.go) have them
		}
		// The ledger's and the attempts figures need their counters
		// (TestLedgerAndAttemptsFacts).
		if _, ok := f.Value(name); !ok && !strings.HasPrefix(name, "ledger_") && !strings.HasPrefix(name, "replay_") && !strings.Contains(name, "attempts") {
			t.Errorf("scalar %s missing", name)
		}
	}
	for _, name := range threshold.SeriesNames {
		// mix_served needs the run's mix (TestMixServed), server_rss_mb a pid.
		if _, ok := f.Series(name); !ok && !strings.HasPrefix(name, "rss_") && !strings.HasPrefix(name, "gate_") && name != "attempts" && name != "mix_served" && name != "server_rss_mb" {
			t.Errorf("series %s missing", name)
		}
	}
	if _, ok := f.Value("nonsense"); ok {
		t.Error("an unknown scalar has a value")
	}
	at := func(name string, i int) float64 {
		t.Helper()
		s, ok := f.Series(name)
		if !ok || len(s) != synthSeconds {
			t.Fatalf("series %s: %d entries, %v", name, len(s), ok)
		}
		return s[i]
	}
	if at("cpu", 100) != 1.9 || at("cpu", 0) != 1.0 || at("cpu", 1) != 1.1 {
		t.Errorf("cpu = %v %v %v, want the max of the tiers", at("cpu", 100), at("cpu", 0), at("cpu", 1))
	}
	if at("rps", 5) != 100 || at("goodput", 95) != 99 || at("admitted", 0) != 0 || at("admitted", 31) != 10 {
		t.Error("per-second counts wrong")
	}
	if at("waiting", 40) != 40 || at("connected", 9) != 100 || at("logic_queue_depth", 70) != 150 {
		t.Error("levels wrong")
	}
	if p := at("p99", 0); math.Abs(p-0.020) > 0.0001 {
		t.Errorf("p99 second 0 = %v", p)
	}
	if p := at("p99", 190); math.Abs(p-1.5) > 0.002 {
		t.Errorf("p99 second 190 = %v", p)
	}
	if !math.IsNaN(at("rss_gate_mb", 0)) {
		t.Error("a level never set is not NaN")
	}
	if q, ok := f.Quantile(0.5); !ok || math.Abs(q-0.020) > 0.0001 {
		t.Errorf("p50 = %v %v", q, ok)
	}
	if q, _ := f.Quantile(0.99); math.Abs(q-1.5) > 0.002 { // 30 of 240 s at 1.5 s
		t.Errorf("p99 = %v", q)
	}
	empty := (&Run{}).Facts()
	for _, name := range []string{"error_rate", "refused_rate", "capacity", "goodput", "max_wait", "connected"} {
		if _, ok := empty.Value(name); ok {
			t.Errorf("empty run has %s", name)
		}
	}
	if _, ok := empty.Quantile(0.99); ok {
		t.Error("empty run has a quantile")
	}
}

// The ledger figures are there (zeros too) once a check counted itself;
// the attempts figures come from the attempts/N counters, merged over
// seconds and processes.
func TestLedgerAndAttemptsFacts(t *testing.T) {
	pts := []record.Point{
		{T: 0, Counters: map[string]int64{"attempts/1": 8, "attempts/2": 2}},
		{T: 1},
		{T: 2, Counters: map[string]int64{"attempts/1": 1, "attempts/4": 1, "ledger_checks": 2, "ledger_players": 7, "ledger_acked": 30}},
	}
	f := (&Run{Points: pts}).Facts()
	for name, want := range map[string]float64{"attempts_per_request": (8 + 4 + 1 + 4) / 12.0, "max_attempts": 4,
		"ledger_players": 7, "ledger_acked": 30, "ledger_lost": 0, "ledger_doubled": 0, "ledger_phantom": 0,
		"ledger_unresolved": 0, "ledger_mismatch": 0, "ledger_unchecked": 0} {
		if got, ok := f.Value(name); !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, %v; want %v", name, got, ok, want)
		}
	}
	s, ok := f.Series("attempts")
	if !ok || len(s) != 3 || s[0] != 1.2 || !math.IsNaN(s[1]) || s[2] != 2.5 {
		t.Errorf("attempts series = %v, %v", s, ok)
	}
	rp := (&Run{Points: []record.Point{{T: 0, Counters: map[string]int64{"replay_checks": 1, "replay_checked": 5, "replay_failed": 1}}}}).Facts()
	for name, want := range map[string]float64{"replay_checked": 5, "replay_fresh": 0, "replay_failed": 1, "replay_unchecked": 0} {
		if got, ok := rp.Value(name); !ok || got != want {
			t.Errorf("%s = %v, %v; want %v", name, got, ok, want)
		}
	}
	none := (&Run{Points: []record.Point{{T: 0, Counters: map[string]int64{"sent": 3}}}}).Facts()
	for _, name := range []string{"ledger_lost", "ledger_players", "attempts_per_request", "max_attempts", "replay_checked", "replay_fresh"} {
		if _, ok := none.Value(name); ok {
			t.Errorf("a run without a ledger or attempts has %s", name)
		}
	}
}

func TestEvaluate(t *testing.T) {
	r := synthRun(t)
	cs, passed := Evaluate(r, parseAll(t, []string{"p(50) < 500ms", "max(logic_queue_depth) < 500", "goodput >= 0.9 * capacity"}))
	if !passed || len(cs) != 3 {
		t.Fatalf("want all to pass: %+v", cs)
	}
	if cs[2].Value < 99 || cs[2].Limit != 90 {
		t.Errorf("goodput criterion %+v", cs[2])
	}
	cs, passed = Evaluate(r, parseAll(t, []string{"p(99) < 500ms", "lost_replies == 0", "max(logic_queue_depth) < 100"}))
	if passed {
		t.Fatal("want failures")
	}
	for _, c := range cs {
		if c.Passed {
			t.Errorf("%s passed: %+v", c.Threshold, c)
		}
	}
	if cs[1].Value != 30 {
		t.Errorf("lost_replies value %v", cs[1].Value)
	}
	r.Meta.Capacity = 0
	cs, passed = Evaluate(r, parseAll(t, []string{"goodput >= 0.9 * capacity"}))
	if passed || !strings.Contains(cs[0].Detail, "capacity") {
		t.Errorf("missing capacity: %+v", cs)
	}
}

// writeRun writes r as a run file.
func writeRun(t *testing.T, r *Run) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := NewWriter(&b, r.Meta)
	if err != nil {
		t.Fatal(err)
	}
	ei := 0
	for _, p := range r.Points {
		for ei < len(r.Events) && r.Events[ei].T <= float64(p.T) {
			if err := w.Event(r.Events[ei]); err != nil {
				t.Fatal(err)
			}
			ei++
		}
		if err := w.Point(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.End(r.Summary, r.Criteria, r.Warnings); err != nil {
		t.Fatal(err)
	}
	if err := w.Point(r.Points[0]); !errors.Is(err, ErrEnded) {
		t.Errorf("Point after End: %v", err)
	}
	return b.Bytes()
}

func tableOf(t *testing.T, r *Run) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRoundTrip(t *testing.T) {
	r := synthRun(t)
	data := writeRun(t, r)
	if n := bytes.Count(data, []byte("\n")); n != 1+len(r.Events)+len(r.Points)+1 {
		t.Errorf("%d lines", n)
	}
	if !bytes.HasPrefix(data, []byte(`{"type":"meta","schema":1,"tool":"levee-loadtest"`)) {
		t.Errorf("first line: %.80s", data)
	}
	back, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Points) != len(r.Points) || len(back.Events) != len(r.Events) || len(back.Warnings) != 0 {
		t.Fatalf("read %d points, %d events, warnings %v", len(back.Points), len(back.Events), back.Warnings)
	}
	if back.Meta.Label != "protected" || back.Meta.T0 != 60 || !back.Meta.Started.Equal(r.Meta.Started) {
		t.Errorf("meta %+v", back.Meta)
	}
	if got, want := tableOf(t, back), tableOf(t, r); got != want {
		t.Errorf("table differs after the round trip:\n%s\nwant\n%s", got, want)
	}
	again := Summarize(back.Points)
	if again.Latency != r.Summary.Latency || again.LatencyDue != r.Summary.LatencyDue || again.Elapsed != r.Summary.Elapsed {
		t.Errorf("summary from read points differs: %+v vs %+v", again.Latency, r.Summary.Latency)
	}
	for k, v := range r.Summary.Counters {
		if again.Counters[k] != v || back.Summary.Counters[k] != v {
			t.Errorf("counter %s: %d / %d, want %d", k, again.Counters[k], back.Summary.Counters[k], v)
		}
	}
}

func TestReadErrors(t *testing.T) {
	good := writeRun(t, synthRun(t))
	lines := strings.SplitAfter(string(good), "\n")
	cases := map[string]struct {
		in   string
		want string
	}{
		"bad JSON on line 3":  {lines[0] + lines[1] + "{\"type\":\"point\",\"t\":\n" + lines[3], "line 3: bad JSON"},
		"missing meta":        {strings.Join(lines[1:], ""), "line 1: missing meta line"},
		"empty":               {"", "missing meta line"},
		"newer schema":        {strings.Replace(lines[0], `"schema":1`, `"schema":2`, 1) + lines[1], "line 1: run file schema 2 was written by a newer loadtest"},
		"unknown type":        {lines[0] + `{"type":"bogus"}` + "\n" + lines[1], `line 2: unknown line type "bogus"`},
		"points out of order": {lines[0] + lines[2] + lines[2], "line 3: point for second"},
		"after end":           {string(good) + lines[2], "after the end line"},
		"second meta":         {lines[0] + lines[0], "line 2: a second meta line"},
		"bad histogram":       {lines[0] + `{"type":"point","t":0,"h":{"lat":"xx"}}` + "\n", "line 2: bad point line"},
	}
	for name, c := range cases {
		_, err := Read(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", name, err, c.want)
		}
	}
	// Read of a file names it.
	path := filepath.Join(t.TempDir(), "run.ndjson")
	if err := os.WriteFile(path, []byte(cases["bad JSON on line 3"].in), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), "run.ndjson:3: bad JSON") {
		t.Errorf("ReadFile: %v", err)
	}
}

func TestReadInterrupted(t *testing.T) {
	r := synthRun(t)
	good := string(writeRun(t, r))
	cut := good[:strings.LastIndex(good, `{"type":"end"`)]
	back, err := Read(strings.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Warnings) != 1 || back.Warnings[0] != Interrupted {
		t.Errorf("warnings %v", back.Warnings)
	}
	if back.Summary.Counters["sent"] != 100*synthSeconds || len(back.Criteria) != 4 {
		t.Errorf("summary %v, criteria %+v", back.Summary.Counters["sent"], back.Criteria)
	}
	// A crash mid-line: the partial last line is dropped with a warning.
	partial := cut + `{"type":"point","t":240,"c":{"se`
	back, err = Read(strings.NewReader(partial))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Points) != synthSeconds || len(back.Warnings) != 2 || !strings.Contains(back.Warnings[0], "truncated last line") {
		t.Errorf("%d points, warnings %v", len(back.Points), back.Warnings)
	}
}

func TestCompare(t *testing.T) {
	a := synthRun(t)
	b := synthRun(t)
	b.Meta.Label = "unprotected"
	b.Criteria[0].Passed = false
	var out bytes.Buffer
	if err := WriteCompare(&out, a, b); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"protected", "unprotected", "thresholds passed", "3/4", "2/4", "p99 (due)", "peak cpu battle", "peak logic queue depth", "launch (unprotected): scale"} {
		if !strings.Contains(s, want) {
			t.Errorf("compare lacks %q:\n%s", want, s)
		}
	}
	if _, _, st := tableRows(t, s); len(st) != 16 {
		t.Errorf("%d minute rows, want both runs' 8", len(st))
	}
	if strings.Contains(s, "peak offered") {
		t.Errorf("compare shows a multiple the runs do not have:\n%s", s)
	}
	if err := WriteCompare(&out); err == nil {
		t.Error("compare of nothing")
	}
	// Sized runs (launch-compare's) show their capacity and the multiple.
	for _, r := range []*Run{a, b} {
		r.Meta.Capacity, r.Meta.Offered, r.Meta.OfferedRate = 950, 3, 2850
	}
	out.Reset()
	if err := WriteCompare(&out, a, b); err != nil {
		t.Fatal(err)
	}
	s = out.String()
	for _, want := range []string{"capacity (requests/s)", "950", "peak offered (x capacity)", "capacity 950.0 requests/s; peak offered load 2850.0 requests/s = 3.00 x capacity (offered: 3)"} {
		if !strings.Contains(s, want) {
			t.Errorf("compare of sized runs lacks %q:\n%s", want, s)
		}
	}
}

var svgRE = regexp.MustCompile(`<svg id="plot-(\w+)"`)

func htmlOf(t *testing.T, runs ...*Run) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, runs...); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestHTML(t *testing.T) {
	r := synthRun(t)
	s := htmlOf(t, r)
	ids := svgRE.FindAllStringSubmatch(s, -1)
	if len(ids) != len(charts) || strings.Count(s, "<svg") != len(charts) || strings.Count(s, "</svg>") != len(charts) {
		t.Fatalf("%d plots, want %d", len(ids), len(charts))
	}
	for i, c := range charts {
		if ids[i][1] != c.id {
			t.Errorf("plot %d is %s, want %s", i, ids[i][1], c.id)
		}
	}
	for _, bad := range []string{"http://", "https://", "<script", "<link", "@import", "url("} {
		if strings.Contains(s, bad) {
			t.Errorf("HTML contains %q", bad)
		}
	}
	for _, want := range []string{"line: paced 100/10s", "scenario minutes from T+0", "Logic queue depth", "<pre>", "✗ lost_replies == 0"} {
		if !strings.Contains(s, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	b := synthRun(t)
	b.Meta.Label = "unprotected"
	both := htmlOf(t, r, b)
	if strings.Count(both, "<svg") != len(charts) {
		t.Errorf("compare: %d plots", strings.Count(both, "<svg"))
	}
	for _, want := range []string{"protected: p99 from send", "unprotected: p99 from send", "unprotected: line: open"} {
		if !strings.Contains(both, want) {
			t.Errorf("compare HTML lacks %q", want)
		}
	}
	if err := WriteHTML(&bytes.Buffer{}); err == nil {
		t.Error("HTML of nothing")
	}
	// A run with no server figures still draws every plot.
	bare := &Run{Meta: Meta{Scenario: "smoke"}, Points: []record.Point{{T: 0, Counters: map[string]int64{"sent": 1, "ok": 1}}}}
	if s := htmlOf(t, bare); strings.Count(s, "<svg") != len(charts) || !strings.Contains(s, "no data") {
		t.Error("bare run's plots")
	}
}

// Faults in the report: the table lists every event with its kind and,
// for a fault that lasted, its span, and counts the skipped ones; the
// plots draw faults in red and shade a fault's duration.
func TestFaultEvents(t *testing.T) {
	r := synthRun(t)
	r.Events = append(r.Events,
		Event{T: 120, Kind: EventFault, What: "T+0:00 fault pause battle-1 for 20s"},
		Event{T: 121, Kind: EventFault, What: "T+0:00 pause battle-1: battle-1 paused (docker pause)"},
		Event{T: 120, End: 140, Kind: EventFault, What: "T+0:00 fault pause battle-1 for 20s: over after 20.0 s"},
		Event{T: 150, Kind: EventFault, What: "T+0:30 fault kill logic: skipped, no fault injector: run with -faults docker:PROJECT"},
	)
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"\ntimeline\n",
		"  at T-1:00         -      line: queueing\n",
		"  at T+2:00         fault  T+0:00 fault pause battle-1 for 20s\n",
		"  at T+2:02         fault  T+0:00 pause battle-1: battle-1 paused (docker pause)\n",
		"  at T+2:00-T+2:40  fault  T+0:00 fault pause battle-1 for 20s: over after 20.0 s\n",
		"1 fault step(s) skipped: no fault was injected for them\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	withFaults := htmlOf(t, r)
	r.Events = r.Events[:3]
	without := htmlOf(t, r)
	const red, band = "#C81E1E", "fill-opacity"
	if strings.Contains(without, red) || strings.Contains(without, band) {
		t.Fatal("fault colours in a run without faults")
	}
	// Per plot: 3 red dashed lines and their 3 labels (start, message,
	// skipped), and one band (the pause from start to end).
	if n := strings.Count(withFaults, red); n != len(charts)*6 {
		t.Errorf("%d red marks, want %d", n, len(charts)*6)
	}
	if n := strings.Count(withFaults, band); n != len(charts) {
		t.Errorf("%d shaded bands, want %d", n, len(charts))
	}
}

// The run file keeps an event's kind and end, and leaves them out when
// unset (the format of files without faults is unchanged).
func TestEventKindRoundTrip(t *testing.T) {
	r := synthRun(t)
	r.Events = []Event{{T: 30, What: "legacy phase"}, {T: 40, Kind: EventLine, What: "mode open"},
		{T: 50, End: 63.5, Kind: EventFault, What: "fault kill battle-1: over after 13.5 s"}}
	data := writeRun(t, r)
	if !bytes.Contains(data, []byte(`{"type":"event","t":30,"what":"legacy phase"}`+"\n")) ||
		!bytes.Contains(data, []byte(`{"type":"event","t":50,"what":"fault kill battle-1: over after 13.5 s","kind":"fault","end":63.5}`)) {
		t.Errorf("event lines:\n%s", data)
	}
	back, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Events, r.Events) {
		t.Errorf("events %+v, want %+v", back.Events, r.Events)
	}
}
