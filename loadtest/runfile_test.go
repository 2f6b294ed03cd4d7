package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"levee/client/clienttest"
	"levee/loadtest/report"
	leveev1 "levee/proto/leveev1"
)

func TestTierOf(t *testing.T) {
	for name, want := range map[string]string{"gate": "gate", "logic": "logic", "battle": "battle", "battle-1": "battle",
		"battle-12": "battle", "gate-a": "gate", "fake": "", "battles": "", "127.0.0.1:9090": "", "": ""} {
		if got := tierOf(name); got != want {
			t.Errorf("tierOf(%q) = %q, want %q", name, got, want)
		}
	}
}

// After each round the sampler hands on the tiers' levels: RSS in MiB and
// CPU in cores since the previous sample, summed over a tier's processes;
// other targets are left out.
func TestProcSamplerLevels(t *testing.T) {
	var cpuMs atomic.Int64
	page := func(rss int) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "process_resident_memory_bytes %d\nprocess_cpu_seconds_total %g\n", rss, float64(cpuMs.Load())/1000)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	s := newProcSampler([]MetricsTarget{{Name: "gate", URL: page(10 << 20).URL}, {Name: "battle-1", URL: page(20 << 20).URL},
		{Name: "battle-2", URL: page(30 << 20).URL}, {Name: "other", URL: page(40 << 20).URL}}, false, time.Second)
	now := t0
	s.now = func() time.Time { return now }
	var got []map[string]float64
	s.levels = func(lv map[string]float64) { got = append(got, lv) }
	s.sample(context.Background())
	cpuMs.Store(500) // each process: 0.5 CPU seconds in 2 s
	now = now.Add(2 * time.Second)
	s.sample(context.Background())
	want := []map[string]float64{
		{"rss_gate_mb": 10, "rss_battle_mb": 50},
		{"rss_gate_mb": 10, "rss_battle_mb": 50, "cpu_gate": 0.25, "cpu_battle": 0.5},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("levels %v, want %v", got, want)
	}
}

// The overload run's run file, against a gate that refuses some requests
// and never answers others: its phases are the report's, in order, and its
// counters add up to the report's totals.
func TestRunOverloadRunFile(t *testing.T) {
	var silent atomic.Int64
	fc := &frameChecker{timeoutMs: 300, battles: map[string]bool{}, refuse: func(f *leveev1.ClientFrame) (any, bool) {
		id := f.GetStartBattle().GetBattleId()
		switch {
		case strings.HasSuffix(id, "3"):
			return &leveev1.Error{Code: leveev1.ErrorCode_ERROR_CODE_BUSY, RetryAfterMs: 50}, false
		case strings.HasSuffix(id, "7") && silent.Add(1) <= 5:
			return nil, true
		}
		return nil, false
	}}
	g := startGate(t, fc.handle)
	r := newTestRunner(t, g, func(c *RunnerConfig) { c.RequestTimeout = 300 * time.Millisecond })
	cfg := smallOverload("")
	cfg.ReplyGrace = 100 * time.Millisecond
	path := filepath.Join(t.TempDir(), "run.ndjson")
	rf, err := CreateRunFile(path, report.Meta{Scenario: "overload", Label: "x"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.RunFile = rf
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	created := fi.Mode().Perm()
	rep, err := r.RunOverload(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkPhases(t, rep, cfg)

	// Before End the file is what was streamed: the meta line, the phase
	// events and the points, no end line.
	streamed, err := report.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(streamed.Meta.Phases) != 0 || len(streamed.Events) != len(rep.AllPhases()) || len(streamed.Points) == 0 ||
		!slices.Contains(streamed.Warnings, report.Interrupted) {
		t.Errorf("streamed: meta %+v, %d events, %d points, warnings %v", streamed.Meta, len(streamed.Events),
			len(streamed.Points), streamed.Warnings)
	}
	if err := rf.End(rep.RunCriteria(), rep.Warnings); err != nil {
		t.Fatal(err)
	}
	run, err := report.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != created {
		t.Errorf("mode after End %v, created %v", fi.Mode(), created)
	}
	var names, want []string
	for i, p := range run.Meta.Phases {
		names = append(names, p.Name)
		if ev := run.Events[i]; ev.What != p.Name || ev.T != p.From {
			t.Errorf("event %+v for phase %+v", ev, p)
		}
	}
	for _, p := range rep.AllPhases() {
		want = append(want, p.Name)
	}
	if !slices.Equal(names, want) || run.Meta.RunID != rep.RunID || run.Meta.Capacity != rep.Capacity {
		t.Errorf("phases %v, want %v; meta %+v", names, want, run.Meta)
	}
	// A phase runs from its start to its last reply: its window and drain.
	for i, p := range rep.AllPhases() {
		ph := run.Meta.Phases[i]
		if d := ph.To - ph.From; d < (p.Duration+p.Drained).Seconds()-0.05 {
			t.Errorf("%s: %+v shorter than window %v + drain %v", p.Name, ph, p.Duration, p.Drained)
		}
	}

	totals := map[string]int64{}
	for _, p := range rep.AllPhases() {
		totals["sent"] += int64(p.Sent)
		totals["ok"] += int64(p.OK)
		totals["business"] += int64(Sum(p.Business))
		totals["refused"] += int64(Sum(p.Overload))
		totals["failed"] += int64(Sum(p.Failed))
		totals["lost"] += int64(Sum(p.Lost))
		totals["reason/BUSY"] += int64(p.Overload["BUSY"])
		totals["reason/timeout"] += int64(p.Lost[LostTimeout])
		totals["purchase/served"] += int64(p.Critical.Served)
		totals["crit/default/refused"] += int64(Sum(p.Overload))
	}
	c := run.Summary.Counters
	c["purchase/served"] = c["purchase/ok"] + c["purchase/business"]
	for k, v := range totals {
		if c[k] != v {
			t.Errorf("run file %s %d, report %d", k, c[k], v)
		}
	}
	if c["lost"] == 0 || c["refused"] == 0 {
		t.Errorf("counters %v", c)
	}
	if len(run.Criteria) != len(rep.Criteria) || run.Criteria[len(run.Criteria)-1].Passed {
		t.Errorf("criteria %+v", run.Criteria)
	}
	if !slices.Equal(run.Warnings, rep.Warnings) && !(len(run.Warnings) == 0 && len(rep.Warnings) == 0) {
		t.Errorf("warnings %v, report %v", run.Warnings, rep.Warnings)
	}
	// Served latency from the due time only for the open loops.
	if run.Summary.LatencyDue.Count >= run.Summary.Latency.Count || run.Summary.LatencyDue.Count == 0 {
		t.Errorf("latency %+v, from due %+v", run.Summary.Latency, run.Summary.LatencyDue)
	}
}

func TestCreateRunFileRefusesBadPaths(t *testing.T) {
	for _, p := range []string{"", filepath.Join(t.TempDir(), "none", "run.ndjson")} {
		if _, err := CreateRunFile(p, report.Meta{}); err == nil || !strings.Contains(err.Error(), "-run-file") {
			t.Errorf("%q: %v", p, err)
		}
	}
}

// readRunFile ends rf with cs and warnings and reads it back.
func readRunFile(t *testing.T, rf *RunFile, path string, cs []report.Criterion, warnings []string) *report.Run {
	t.Helper()
	if err := rf.End(cs, warnings); err != nil {
		t.Fatal(err)
	}
	run, err := report.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// checkRunPhases checks that the run file's phases are names, in order,
// one after the other, each with its event.
func checkRunPhases(t *testing.T, run *report.Run, names ...string) {
	t.Helper()
	var got []string
	last := 0.0
	for i, p := range run.Meta.Phases {
		got = append(got, p.Name)
		if p.From < last || p.To < p.From {
			t.Errorf("phase %+v after %v", p, last)
		}
		last = p.To
		if i >= len(run.Events) || run.Events[i].What != p.Name || run.Events[i].T != p.From {
			t.Errorf("phase %+v: events %+v", p, run.Events)
		}
	}
	if !slices.Equal(got, names) || len(run.Events) != len(names) {
		t.Errorf("phases %v, want %v; events %+v", got, names, run.Events)
	}
}

// lastLevel is level name of the run file's last point.
func lastLevel(run *report.Run, name string) (float64, bool) {
	if len(run.Points) == 0 {
		return 0, false
	}
	v, ok := run.Points[len(run.Points)-1].Levels[name]
	return v, ok
}

// The line run's run file, with a pace change: the phases dial, pace,
// change and close; its counters are the report's.
func TestRunLineRunFile(t *testing.T) {
	fl := newFakeLine(0, 50*time.Millisecond)
	defer fl.close()
	g := clienttest.NewGateWithLine([]byte("s3cret"), fl.line, clienttest.Game)
	defer g.Close()
	adm := httptest.NewServer(http.HandlerFunc(fl.admin))
	defer adm.Close()
	cfg := DefaultLine()
	cfg.Bots, cfg.DialParallel, cfg.Bound, cfg.MaxStatusGap = 100, 8, 20*time.Second, 2*time.Second
	cfg.Admin = &Admin{URL: adm.URL, Token: "adm"}
	cfg.Start, cfg.StartWhenJoined = LineSetting{Mode: "paced", Rate: 50, Interval: time.Second}, true
	cfg.ChangeAt, cfg.Change = 200*time.Millisecond, LineSetting{Rate: 300, Interval: time.Second}
	path := filepath.Join(t.TempDir(), "line.ndjson")
	rf, err := CreateRunFile(path, report.Meta{Scenario: "line", Label: "x"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.RunFile = rf
	rep, err := testRunner(t, g.URL()).RunLine(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := readRunFile(t, rf, path, rep.RunCriteria(), rep.Warnings)
	if run.Meta.RunID != rep.RunID || run.Meta.Label != "x" {
		t.Errorf("meta %+v", run.Meta)
	}
	checkRunPhases(t, run, "dial", "pace", "change", "close")
	c := run.Summary.Counters
	for k, want := range map[string]int{"arrived": rep.Bots, "admitted": rep.Admitted, "dial_failures": Sum(rep.Failures),
		"left": rep.Welcomed, "dropped": 0} {
		if c[k] != int64(want) {
			t.Errorf("run file %s %d, report %d", k, c[k], want)
		}
	}
	if rep.Admitted != cfg.Bots || run.Summary.Wait.Count != int64(rep.Wait.Count) {
		t.Errorf("admitted %d; waits: run file %+v, report %+v", rep.Admitted, run.Summary.Wait, rep.Wait)
	}
	for _, lv := range []string{"connected", "waiting"} {
		if v, ok := lastLevel(run, lv); !ok || v != 0 {
			t.Errorf("%s at the end: %v %v", lv, v, ok)
		}
	}
	if len(run.Criteria) != len(rep.Criteria) {
		t.Fatalf("criteria %+v", run.Criteria)
	}
	for i, rc := range run.Criteria {
		if c := rep.Criteria[i]; rc.Threshold != c.Name || rc.Passed != c.Pass || rc.Detail != c.Got {
			t.Errorf("criterion %+v, report %+v", rc, c)
		}
	}
}

// The hold run's run file, against a line that admits a quarter of the
// players and drops another quarter: the phases dial, settle, hold and
// close; the counters are the report's; the RSS samples are levels.
func TestRunHoldRunFile(t *testing.T) {
	g := quarterLineGate()
	defer g.Close()
	cfg := shortHold()
	cfg.Hold = time.Second
	path := filepath.Join(t.TempDir(), "hold.ndjson")
	rf, err := CreateRunFile(path, report.Meta{Scenario: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.RunFile = rf
	rep, err := testRunner(t, g.URL()).RunHold(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := readRunFile(t, rf, path, rep.RunCriteria(), rep.Warnings)
	checkRunPhases(t, run, "dial", "settle", "hold", "close")
	c := run.Summary.Counters
	for k, want := range map[string]int{"arrived": rep.Conns, "admitted": rep.Admitted, "dropped": rep.Dropped,
		"dial_failures": Sum(rep.Failures), "left": rep.Held - rep.Dropped} {
		if c[k] != int64(want) {
			t.Errorf("run file %s %d, report %d", k, c[k], want)
		}
	}
	if rep.Admitted != 10 || rep.Dropped != 10 || run.Summary.Peak["connected"] > float64(rep.Held) {
		t.Errorf("report %+v; peak %v", rep, run.Summary.Peak)
	}
	for _, lv := range []string{"connected", "waiting"} {
		if v, ok := lastLevel(run, lv); !ok || v != 0 {
			t.Errorf("%s at the end: %v %v", lv, v, ok)
		}
	}
	rss := 0
	for _, p := range run.Points {
		if v, ok := p.Levels["rss_gate_mb"]; ok {
			rss++
			if v <= 0 || v*(1<<20) > rep.RSSHeldMax+1 && v*(1<<20) != rep.RSSBefore {
				t.Errorf("second %d: rss_gate_mb %v, report before %v, max %v", p.T, v, rep.RSSBefore, rep.RSSHeldMax)
			}
		}
	}
	if rss == 0 {
		t.Error("no point has the server's RSS")
	}
	if len(run.Criteria) != 1 || run.Criteria[0].Passed || !strings.Contains(run.Criteria[0].Detail, "dropped 10") {
		t.Errorf("criteria %+v", run.Criteria)
	}
}

// Bare connections: the server's RSS is rss_server_mb, nobody waits.
func TestRunHoldBareRunFile(t *testing.T) {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		for {
			if _, _, err := c.NextReader(); err != nil {
				c.Close()
				return
			}
		}
	}))
	defer srv.Close()
	cfg := shortHold()
	cfg.Bare, cfg.Conns, cfg.Settle = true, 5, 0
	path := filepath.Join(t.TempDir(), "bare.ndjson")
	rf, err := CreateRunFile(path, report.Meta{Scenario: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.RunFile = rf
	rep, err := testRunner(t, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws").RunHold(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := readRunFile(t, rf, path, rep.RunCriteria(), rep.Warnings)
	checkRunPhases(t, run, "dial", "hold", "close")
	if c := run.Summary.Counters; !rep.Passed || c["arrived"] != 5 || c["left"] != 5 || c["dropped"] != 0 ||
		run.Summary.Peak["waiting"] != 0 || run.Summary.Peak["rss_server_mb"] <= 0 || run.Summary.Peak["rss_gate_mb"] != 0 {
		t.Errorf("report %+v; counters %v, peak %v", rep, c, run.Summary.Peak)
	}
	if len(run.Criteria) != 1 || !run.Criteria[0].Passed {
		t.Errorf("criteria %+v", run.Criteria)
	}
}
