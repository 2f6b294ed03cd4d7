package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"levee/client/clienttest"
	"levee/loadtest/record"
	"levee/loadtest/report"
	leveev1 "levee/proto/leveev1"
)

// sumCounters totals the run file's points' counters.
func sumCounters(run *report.Run) map[string]int64 {
	c := map[string]int64{}
	for _, p := range run.Points {
		for k, v := range p.Counters {
			c[k] += v
		}
	}
	return c
}

// -run-file leaves the overload JSON report's shape and the table as they
// were, and the run file it writes is read back with its phases, the gate
// tier's levels and the same accounting as the JSON report.
func TestOverloadRunFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "protected.ndjson")
	rep, table := overloadShape(t, "-run-file", file, "-label", "protected")
	checkTableLines(t, table, overloadTableLines)

	run, err := report.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if m := run.Meta; m.Scenario != "overload" || m.Label != "protected" || m.RunID != rep["run_id"] ||
		m.Capacity != rep["capacity_per_s"] || m.Schema != report.Schema {
		t.Errorf("meta %+v", m)
	}
	var names []string
	last := 0.0
	for _, p := range run.Meta.Phases {
		names = append(names, p.Name)
		if p.From < last || p.To <= p.From {
			t.Errorf("phase %+v after %v", p, last)
		}
		last = p.To
	}
	want := []string{"capacity"}
	for i := range rep["capacity_steps"].([]any) {
		want = append(want, "search"+string(rune('1'+i)))
	}
	want = append(want, "baseline", "overload")
	if !slices.Equal(names, want) {
		t.Errorf("phases %v, want %v", names, want)
	}
	if len(run.Events) != len(want) {
		t.Errorf("events %+v", run.Events)
	}
	if len(run.Points) == 0 || float64(run.Points[len(run.Points)-1].T+1) < last {
		t.Fatalf("%d points for %v s of phases", len(run.Points), last)
	}
	gate := 0
	for _, p := range run.Points {
		if v, ok := p.Levels["rss_gate_mb"]; ok {
			gate++
			if v != 2.5e7/(1<<20) || p.Levels["cpu_gate"] != 0 {
				t.Errorf("second %d: levels %v", p.T, p.Levels)
			}
		}
	}
	if gate == 0 {
		t.Errorf("no point has the gate's RSS")
	}

	// The criteria are the overload report's.
	crits := rep["criteria"].([]any)
	if len(run.Criteria) != len(crits) {
		t.Fatalf("criteria %+v", run.Criteria)
	}
	for i, c := range crits {
		c := c.(map[string]any)
		if rc := run.Criteria[i]; rc.Threshold != c["name"] || rc.Passed != c["pass"] || rc.Detail != c["got"] {
			t.Errorf("criterion %d: %+v, report %v", i, rc, c)
		}
	}
	checkOverloadParity(t, rep, run)

	// loadtest report prints its table and writes the plots.
	html := filepath.Join(t.TempDir(), "run.html")
	var stdout, stderr bytes.Buffer
	if code := run2(t, []string{"report", "-html", html, file}, &stdout, &stderr); code != reportExit(run) {
		t.Fatalf("report: exit %d, want %d: %s", code, reportExit(run), stderr.String())
	}
	for _, w := range []string{"ok/s", "every request got exactly one reply"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, stdout.String())
		}
	}
	if b, err := os.ReadFile(html); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("html: %v, %d bytes", err, len(b))
	}
}

// reportExit is the exit code of `loadtest report` for run: 0, or
// exitThreshold when a criterion failed (on a busy machine the overload
// run's p99 may).
func reportExit(run *report.Run) int {
	for _, c := range run.Criteria {
		if !c.Passed {
			return exitThreshold
		}
	}
	return 0
}

func run2(t *testing.T, args []string, stdout, stderr *bytes.Buffer) int {
	t.Helper()
	return run(args, env(nil), stdout, stderr)
}

// checkOverloadParity compares the run file's counters with the JSON
// report's totals over every phase.
func checkOverloadParity(t *testing.T, rep map[string]any, run *report.Run) {
	t.Helper()
	phases := []any{rep["capacity_phase"]}
	for _, st := range rep["capacity_steps"].([]any) {
		phases = append(phases, st.(map[string]any)["phase"])
	}
	phases = append(phases, rep["baseline_phase"], rep["overload_phase"])
	want := map[string]int64{}
	for _, p := range phases {
		p := p.(map[string]any)
		want["sent"] += int64(num(t, p["sent"], "sent"))
		want["ok"] += int64(num(t, p["ok"], "ok"))
		want["business"] += int64(sumObj(t, p["business"], "business"))
		want["refused"] += int64(sumObj(t, p["overload"], "overload"))
		want["failed"] += int64(sumObj(t, p["failed"], "failed"))
		want["lost"] += int64(sumObj(t, p["lost"], "lost"))
		want["critical"] += int64(num(t, p["critical"].(map[string]any)["sent"], "critical.sent"))
	}
	got := sumCounters(run)
	for _, k := range []string{"sent", "ok", "business", "refused", "failed", "lost"} {
		if got[k] != want[k] {
			t.Errorf("run file %s %d, JSON report %d", k, got[k], want[k])
		}
		if run.Summary.Counters[k] != got[k] {
			t.Errorf("summary %s %d, points %d", k, run.Summary.Counters[k], got[k])
		}
	}
	crit := int64(0)
	for _, c := range []record.Class{record.OK, record.Business, record.Refused, record.Failed, record.Lost} {
		crit += got["crit/critical/"+c.String()]
	}
	if crit != want["critical"] || got["reason/unfinished"] != 0 || got[record.CounterUnmatched] != 0 {
		t.Errorf("critical %d, JSON %d; counters %v", crit, want["critical"], got)
	}
	if n := len(run.Points); n > 0 && run.Points[n-1].Levels[record.LevelOutstanding] != 0 {
		t.Errorf("outstanding at the end: %v", run.Points[n-1].Levels)
	}
	if run.Summary.Latency.Count != got["ok"]+got["business"] {
		t.Errorf("latency count %d, served %d", run.Summary.Latency.Count, got["ok"]+got["business"])
	}
}

// With refusals and silences, the run file's refused and lost are the
// JSON report's, and two runs compare.
func TestOverloadRunFileParity(t *testing.T) {
	var n, silent atomic.Int64
	g := clienttest.NewGate([]byte("s3cret"), func(c *clienttest.Conn) {
		p := &leveev1.Player{Id: c.Player, Gold: clienttest.StartGold, Inventory: map[string]uint32{}}
		k := 0
		for {
			f, err := c.Recv()
			if err != nil {
				return
			}
			var out any
			switch i := n.Add(1); {
			case i%5 == 0:
				out = &leveev1.Error{Code: leveev1.ErrorCode_ERROR_CODE_BUSY, RetryAfterMs: 20}
			case i%37 == 0 && silent.Add(1) <= 4:
				continue
			default:
				out = clienttest.GameReply(p, f, &k)
			}
			if c.Send(clienttest.Reply(f, out)) != nil {
				return
			}
		}
	})
	defer g.Close()
	dir := t.TempDir()
	var runs []string
	for _, label := range []string{"a", "b"} {
		file, out := filepath.Join(dir, label+".ndjson"), filepath.Join(dir, label+".json")
		var stdout, stderr bytes.Buffer
		code := run2(t, append(overloadArgs(g.URL()), "-request-timeout", "300ms", "-reply-grace", "100ms",
			"-json-out", out, "-run-file", file, "-label", label), &stdout, &stderr)
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("exit %d: %v: %s", code, err, stderr.String())
		}
		rep := checkShape(t, data, "testdata/overload_report.shape")
		r, err := report.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		checkOverloadParity(t, rep, r)
		if c := sumCounters(r); c["refused"] == 0 || c["reason/BUSY"] != c["refused"] {
			t.Errorf("%s: counters %v", label, c)
		}
		runs = append(runs, file)
	}
	if silent.Load() == 0 {
		t.Fatal("the gate was never silent")
	}
	html := filepath.Join(dir, "compare.html")
	var stdout, stderr bytes.Buffer
	if code := run2(t, []string{"compare", "-html", html, runs[0], runs[1]}, &stdout, &stderr); code != 0 {
		t.Fatalf("compare: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "a") || !strings.Contains(stdout.String(), "b") {
		t.Errorf("compare:\n%s", stdout.String())
	}
	if _, err := os.Stat(html); err != nil {
		t.Error(err)
	}
}

// The smoke scenario's run file: same JSON shape, and the run file's
// counters are the report's.
func TestSmokeRunFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "smoke.ndjson")
	rep, table := smokeShape(t, "-run-file", file)
	checkTableLines(t, table, smokeTableLines)
	run, err := report.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if run.Meta.Scenario != "smoke" || len(run.Meta.Phases) != 1 || run.Meta.Phases[0].Name != "run" {
		t.Errorf("meta %+v", run.Meta)
	}
	got := sumCounters(run)
	for k, want := range map[string]float64{
		"sent": num(t, rep["sent"], "sent"), "ok": num(t, rep["ok"], "ok"),
		"business": sumObj(t, rep["business"], "business"), "refused": sumObj(t, rep["overload"], "overload"),
		"failed": sumObj(t, rep["failed"], "failed"), "lost": sumObj(t, rep["lost"], "lost"),
		"arrived": num(t, rep["arrived"], "arrived"), "dial_failures": sumObj(t, rep["dial_failures"], "dial_failures"),
	} {
		if got[k] != int64(want) {
			t.Errorf("run file %s %d, report %v", k, got[k], want)
		}
	}
	for name, o := range rep["ops"].(map[string]any) {
		n := int64(0)
		for _, c := range []record.Class{record.OK, record.Business, record.Refused, record.Failed, record.Lost} {
			n += got[name+"/"+c.String()]
		}
		if want := int64(num(t, o.(map[string]any)["sent"], name)); n != want {
			t.Errorf("%s: run file %d, report %d", name, n, want)
		}
	}
	// Every bot that connected has left by the end (the run is shorter
	// than a second: no point shows them connected).
	if last, ok := run.Points[len(run.Points)-1].Levels["connected"]; !ok || last != 0 {
		t.Errorf("connected at the end: %v %v", last, ok)
	}
	if len(run.Criteria) != 1 || !run.Criteria[0].Passed {
		t.Errorf("criteria %+v", run.Criteria)
	}
}

func TestRunFileRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "line", "-run-file", filepath.Join(dir, "no", "l.ndjson")}, "-run-file"},
		{[]string{"-scenario", "hold", "-run-file", filepath.Join(dir, "no", "h.ndjson")}, "-run-file"},
		{[]string{"-scenario", "hold", "-label", "x"}, "-label"},
		{[]string{"-scenario", "overload", "-label", "x"}, "-label"},
		{[]string{"-scenario", "overload", "-run-file", filepath.Join(dir, "no", "such", "dir.ndjson")}, "-run-file"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, env(nil), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr.String())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left: %v", ents)
	}
}

// checkLegacyRunFile checks what the line and hold run files share: the
// meta line, phases, levels back to 0 at the end, the criteria the JSON
// report's, and that `loadtest report` reads it.
func checkLegacyRunFile(t *testing.T, file, scenario string, rep map[string]any, phases ...string) *report.Run {
	t.Helper()
	run, err := report.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if m := run.Meta; m.Scenario != scenario || m.Label != "l1" || m.RunID != rep["run_id"] || m.Schema != report.Schema {
		t.Errorf("meta %+v", m)
	}
	var names []string
	for _, p := range run.Meta.Phases {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, phases) || len(run.Events) != len(phases) {
		t.Errorf("phases %v, want %v; events %+v", names, phases, run.Events)
	}
	if len(run.Points) == 0 {
		t.Fatal("no points")
	}
	for _, lv := range []string{"connected", "waiting"} {
		if v := run.Points[len(run.Points)-1].Levels[lv]; v != 0 {
			t.Errorf("%s at the end: %v", lv, v)
		}
	}
	var crits []any
	if cs, ok := rep["criteria"].([]any); ok {
		crits = cs
	}
	passed := rep["passed"].(bool)
	if len(crits) == 0 { // hold: one criterion, the verdict
		if len(run.Criteria) != 1 || run.Criteria[0].Passed != passed {
			t.Errorf("criteria %+v, passed %v", run.Criteria, passed)
		}
	} else if len(run.Criteria) != len(crits) {
		t.Errorf("criteria %+v", run.Criteria)
	} else {
		for i, c := range crits {
			c := c.(map[string]any)
			if rc := run.Criteria[i]; rc.Threshold != c["name"] || rc.Passed != c["pass"] || rc.Detail != c["got"] {
				t.Errorf("criterion %d: %+v, report %v", i, rc, c)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run2(t, []string{"report", file}, &stdout, &stderr); code != reportExit(run) || !strings.Contains(stdout.String(), "arrived") {
		t.Errorf("report: exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	return run
}

// -run-file leaves the line JSON report's shape and the table as they
// were; the run file's counters are the report's.
func TestLineRunFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "line.ndjson")
	rep, table := lineShape(t, "-run-file", file, "-label", "l1")
	checkTableLines(t, table, lineTableLines)
	run := checkLegacyRunFile(t, file, "line", rep, "dial", "pace", "close")
	got := sumCounters(run)
	for k, want := range map[string]float64{
		"arrived": num(t, rep["bots"], "bots"), "admitted": num(t, rep["admitted"], "admitted"),
		"dial_failures": sumObj(t, rep["failures"], "failures"), "left": num(t, rep["welcomed"], "welcomed"),
	} {
		if got[k] != int64(want) {
			t.Errorf("run file %s %d, report %v", k, got[k], want)
		}
	}
	if w := obj(t, rep["wait"], "wait"); run.Summary.Wait.Count != int64(num(t, w["count"], "wait.count")) {
		t.Errorf("waits %+v, report %v", run.Summary.Wait, w)
	}
}

// -run-file leaves the hold JSON report's shape and the table as they
// were; the run file's counters are the report's, the RSS samples levels.
func TestHoldRunFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hold.ndjson")
	rep, table := holdShape(t, "-run-file", file, "-label", "l1")
	checkTableLines(t, table, holdTableLines)
	run := checkLegacyRunFile(t, file, "hold", rep, "dial", "settle", "hold", "close")
	got := sumCounters(run)
	held, dropped := num(t, rep["held"], "held"), num(t, rep["dropped"], "dropped")
	for k, want := range map[string]float64{
		"arrived": num(t, rep["conns"], "conns"), "admitted": num(t, rep["admitted"], "admitted"), "dropped": dropped,
		"dial_failures": sumObj(t, rep["failures"], "failures"), "left": held - dropped,
	} {
		if got[k] != int64(want) {
			t.Errorf("run file %s %d, report %v", k, got[k], want)
		}
	}
	if p := run.Summary.Peak["rss_gate_mb"]; p <= 0 || p*(1<<20) > num(t, rep["rss_held_max_bytes"], "rss_held_max_bytes")+1 &&
		p*(1<<20) != num(t, rep["rss_before_bytes"], "rss_before_bytes") {
		t.Errorf("peak RSS %v MiB, report %v", p, rep)
	}
}
