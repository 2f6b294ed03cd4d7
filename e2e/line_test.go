package e2e

import (
	"bytes"
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leveehq/levee/gate"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/lineapi"
	"github.com/leveehq/levee/loadtest/engine"
	"github.com/leveehq/levee/loadtest/lineadmin"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/scenario"
)

const lineAdminToken = "e2e-line-admin"

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestLineAdmitsInArrivalOrderAtPace is the issue-4 end-to-end test of the
// admission line, on the players engine: a scenario whose bots all arrive
// within a second (from 1 s: about 50 every 50 ms, the engine's tick) at a
// gate whose line the timeline holds (queueing from 0 s); at 5 s the timeline opens it at a pace (admin API: mode paced, N
// per second) and at 9 s doubles the pace. All are admitted in the order
// they arrived, at that pace, and nobody is lost.
//
// The line holds while the bots connect so that the pace is measured on a
// full line whatever the machine's load (on 2 shared cores 3,000
// handshakes take from half a second to several).
//
// It runs in real time on loopback, so it measures with tolerances: the
// pace is the admissions per second averaged over whole seconds (6-9 s and
// 10-12 s, the line full and the change out of them), within ±25 % of the
// configured one (the gate releases one player every 1/N s). Arrival order
// is judged (order_inversions, order_pairs) for every pair whose order is
// sure from the bots' side (one got its place before the other arrived:
// bots arriving in one tick are not ordered, hence the second's spread),
// against release times bounded with the gate's own waited_ms, so that the
// order in which the Admitted pushes reach the bots does not count. The
// timing thresholds (the pace, a status at least every 8 s: the heartbeat
// far back at a 500 ms -line-push, and 500 ms for delivery) are the
// subtest "timing", skipped with the reason when the test process itself
// was starved of CPU for more than maxStall (the order and the losses are
// always judged). See lineBots for the number of bots.
func TestLineAdmitsInArrivalOrderAtPace(t *testing.T) {
	bots := lineBots()
	pace := bots / 10 // per second: 4 s at this pace, then the rest (60 %) in 3 s at twice it
	admin, run, stall := runLine(t, bots, "queueing", pace, fmt.Sprintf(`
arrivals:
  start: 0
  phases:
    - {duration: 1s, players: 0}
    - {duration: 1s, players: %[1]d}
    - {duration: 18s, players: %[1]d}
timeline:
  - {at: 0s, line: {mode: queueing}}
  - {at: 5s, line: {mode: paced, rate: %[2]d, interval: 1s}}
  - {at: 9s, line: {rate: %[3]d}}
thresholds:
%[4]s  - avg(admitted)[6s:9s] >= 0.75 * avg(line_rate)[6s:9s]
  - avg(admitted)[6s:9s] <= 1.25 * avg(line_rate)[6s:9s]
  - avg(admitted)[10s:12s] >= 0.75 * avg(line_rate)[10s:12s]
  - avg(admitted)[10s:12s] <= 1.25 * avg(line_rate)[10s:12s]
  - max_status_gap <= %[5]v
run:
  duration: 20s
`, bots, pace, 2*pace, lineRules, maxStatusGap))
	judge(t, run, notTiming)
	checkGateLine(t, admin, bots, float64(2*pace))
	// Nobody was released before the pace started: all waited in the
	// queueing line.
	if adm := admittedBy(run, 5); adm != 0 {
		t.Errorf("%d admitted before the line was opened at 5 s", adm)
	}
	judgeTiming(t, stall, func(t *testing.T) { judge(t, run, isTiming) })
}

// TestLinePacedFromTheStart: the bots connect within the first second to
// a line that is paced from the start (the launch-day case: the gate's own flags, the
// timeline setting the same pace at 0 s so that the run knows it).
// Order, losses and the status pushes are judged as above; the pace is
// judged (subtest "timing/pace") over seconds 3-5, and only when every
// bot had its place in line by 3 s (before that the line lets in what
// arrives); it is skipped with the reason otherwise, which depends on how
// fast the machine lets the bots connect.
func TestLinePacedFromTheStart(t *testing.T) {
	bots := lineBots()
	pace := bots / 6 // per second: about 6 s
	_, run, stall := runLine(t, bots, "paced", pace, fmt.Sprintf(`
arrivals:
  start: 0
  phases:
    - {duration: 1s, players: %[1]d}
    - {duration: 14s, players: %[1]d}
timeline:
  - {at: 0s, line: {mode: paced, rate: %[2]d, interval: 1s}}
thresholds:
%[3]s  - max_status_gap <= %[4]v
  - avg(admitted)[3s:5s] >= 0.75 * avg(line_rate)[3s:5s]
  - avg(admitted)[3s:5s] <= 1.25 * avg(line_rate)[3s:5s]
run:
  duration: 15s
`, bots, pace, lineRules, maxStatusGap))
	judge(t, run, notTiming)
	judgeTiming(t, stall, func(t *testing.T) {
		judge(t, run, func(th string) bool { return isTiming(th) && !strings.HasPrefix(th, "avg(") })
		t.Run("pace", func(t *testing.T) {
			if joined := joinedBy(run, 3); joined < bots {
				t.Skipf("pace not judged: %d of %d bots had their places by 3 s, the line was not full from then", joined, bots)
			}
			judge(t, run, func(th string) bool { return strings.HasPrefix(th, "avg(") })
		})
	})
}

// lineRules are the thresholds every line run is judged on, timing or
// not: nobody lost, every sure pair in arrival order.
const lineRules = `  - admitted == arrived
  - dial_failures == 0
  - lost_replies == 0
  - order_pairs > 0
  - order_inversions == 0
`

// maxStatusGap is the longest a waiting bot may go without a status: the
// gate walks every 500 ms (the test's -line-push) and pushes on change,
// else at a heartbeat of 0.5 s near the front up to 7.5 s far back; 500 ms
// more for delivery.
var maxStatusGap = lineapi.MaxStatusInterval(500*time.Millisecond) + 500*time.Millisecond

// isTiming says whether a threshold judges timing (a pace, the gap
// between status pushes) rather than order or losses: a test on a starved
// machine may skip those, never the others.
func isTiming(th string) bool {
	return strings.HasPrefix(th, "avg(") || strings.HasPrefix(th, "max_status_gap")
}

func notTiming(th string) bool { return !isTiming(th) }

// maxStall is the longest scheduling stall of the test process under
// which the timing thresholds are still judged.
const maxStall = 250 * time.Millisecond

// judgeTiming runs check as the subtest "timing", which is skipped, with
// the reason, when the run's timing cannot be judged: the test process
// was starved of CPU for longer than maxStall (another test binary hogging
// the 2 cores does that; the gate's pace is exact over time, but the bots
// then see it in bursts). A skipped timing check shows as SKIP, never as a
// pass.
func judgeTiming(t *testing.T, stall time.Duration, check func(t *testing.T)) {
	t.Helper()
	t.Run("timing", func(t *testing.T) {
		if stall > maxStall {
			t.Skipf("timing not judged: this process got no CPU for %v at a stretch, more than %v (the machine is busy); order and losses were judged",
				stall.Round(time.Millisecond), maxStall)
		}
		check(t)
	})
}

// judge fails the test for every failed threshold of run that want
// selects, and when want selects none.
func judge(t *testing.T, run *report.Run, want func(threshold string) bool) {
	t.Helper()
	n := 0
	for _, c := range run.Criteria {
		if !want(c.Threshold) {
			continue
		}
		n++
		if !c.Passed {
			t.Errorf("%s: %s", c.Threshold, c.Detail)
		}
	}
	if n == 0 {
		t.Error("no threshold judged")
	}
}

// lineBots is how many bots the line tests run: 3,000; 1,000 with -short
// or under the race detector (the race detector's cost on a machine
// shared with other test binaries starves a run of 3,000).
func lineBots() int {
	if testing.Short() || raceEnabled() {
		return 1000
	}
	return 3000
}

// admittedBy is the players admitted in the seconds before sec.
func admittedBy(run *report.Run, sec int) int64 {
	var n int64
	for _, p := range run.Points {
		if p.T < sec {
			n += p.Counters["admitted"]
		}
	}
	return n
}

// joinedBy is the players who had their places in line (waiting, or
// already admitted from it) at the end of second sec-1.
func joinedBy(run *report.Run, sec int) int {
	for _, p := range run.Points {
		if p.T == sec-1 {
			return int(p.Levels["waiting"] + float64(admittedBy(run, sec)))
		}
	}
	return 0
}

// runLine starts a cluster whose gate's line starts in mode at pace per
// second (pushes every 500 ms, the admin API on), runs the scenario whose
// arrivals, timeline, thresholds and run are body (its players log in
// with a profile fetch and stay) on the players engine in this process,
// logs the run's table and returns the admin API, the run and the
// longest scheduling stall of this process during it.
func runLine(t *testing.T, bots int, mode string, pace int, body string) (*lineadmin.Admin, *report.Run, time.Duration) {
	t.Helper()
	c := startTiers(t, tiers{gate: func(cfg *gate.Config) {
		cfg.LinePush = 500 * time.Millisecond
		cfg.AdminToken = lineAdminToken
		cfg.LineMode, cfg.LineRate, cfg.LineInterval = mode, pace, time.Second
	}})
	sc, err := scenario.Parse("line-e2e.yaml", []byte(`version: 1
name: line-e2e
players:
  login: {do: get_profile, request: {}}
  actions:
    - {do: get_profile, weight: 1, request: {}}
  think: 1m
client:
  request_timeout: 10s
`+body), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := &lineadmin.Admin{URL: "http://" + c.gate.OpsAddr().String() + "/admin/line", Token: lineAdminToken}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stall, stopWatch := watchStalls()
	run, err := engine.Run(ctx, engine.Config{
		Scenario:    sc,
		Gates:       []string{c.gateURL},
		Admin:       []string{admin.URL},
		AdminToken:  lineAdminToken,
		TokenSecret: string(testSecret),
		Workers:     1,
		Game:        arenaDriven(),
	})
	stopWatch()
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	_ = report.WriteTable(&table, run)
	t.Logf("race detector %v, %d bots, longest stall of this process %v\n%s", raceEnabled(), bots, stall().Round(time.Millisecond), table.String())
	return admin, run, stall()
}

// watchStalls measures, until stop, the longest this process's
// goroutines went unscheduled: how late a 10 ms ticker comes.
func watchStalls() (longest func() time.Duration, stop func()) {
	var mu sync.Mutex
	var worst time.Duration
	done := make(chan struct{})
	var wg sync.WaitGroup
	clk := clock.Real{}
	wg.Go(func() {
		const every = 10 * time.Millisecond
		tk := clk.NewTicker(every)
		defer tk.Stop()
		last := clk.Now()
		for {
			select {
			case <-done:
				return
			case <-tk.C():
			}
			now := clk.Now()
			mu.Lock()
			worst = max(worst, now.Sub(last)-every)
			mu.Unlock()
			last = now
		}
	})
	var once sync.Once
	return func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return worst
		}, func() {
			once.Do(func() { close(done); wg.Wait() })
		}
}

// checkGateLine checks the gate's view after the run: everyone it
// admitted went in, nobody waits, and the configured pace is pace.
func checkGateLine(t *testing.T, admin *lineadmin.Admin, bots int, pace float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := admin.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AdmittedTotal != uint64(bots) || st.Length != 0 {
		t.Errorf("the gate's line after the run: admitted_total %v, length %v", st.AdmittedTotal, st.Length)
	}
	if ps := st.Rate.PerSecond; ps != pace {
		t.Errorf("the gate's configured pace after the run: %v/s, want %v/s", ps, pace)
	}
}
