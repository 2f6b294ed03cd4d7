package e2e

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leveehq/levee/gate"
	"github.com/leveehq/levee/loadtest/engine"
	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/scenario"
)

// The gate-restarted drill in small, in process: 40 players arrive in a
// second at a gate whose line lets 10 in per second; at 2 s the gate is
// stopped (every socket closed with 1012) and a new one starts on the same
// address, its line paced as before. The load tool's figures say what the
// players saw: every one was closed and redialed, the first redials spread
// over about 5 s (the SDK's [0, 5 s) spread, measured from each player's
// close), and the players who were waiting in line got their place: those
// who were playing came back with their admission passes and were let in
// at once, not put in line ahead of the waiting ones by their earlier join
// time (which the drill's line_place_lost showed before passes).
func TestGateRestartedFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s load run")
	}
	var gcfg gate.Config
	c := startTiers(t, tiers{gate: func(cfg *gate.Config) {
		cfg.LineMode, cfg.LineRate, cfg.LineInterval = "paced", 10, time.Second
		gcfg = *cfg
	}})
	gcfg.Addr = c.gate.Addr().String()

	var mu sync.Mutex
	stopGate := c.stop["gate"]
	restarts := 0
	restart := func(ctx context.Context, _ time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		if err := stopGate(); err != nil { // as on SIGTERM: 1012 to every socket
			return err
		}
		// The new gate's line is paced, slower than the old one's, so that
		// players put in line ahead of the waiting ones would still be in
		// it when those come back.
		cfg := gcfg
		cfg.LineRate = 2
		g, err := gate.New(cfg, quietLogger())
		if err != nil {
			return err
		}
		stopGate = runTier(t, g.Run)
		restarts++
		return nil
	}

	sc, err := scenario.Parse("gate-restarted-small.yaml", []byte(`
version: 1
name: gate-restarted-small
seed: 7
arrivals:
  phases:
    - {duration: 1s, players: 40}
players:
  login: {do: get_profile, request: {}}
  actions:
    - {do: get_profile, weight: 1, request: {}}
  think: 1s
client:
  request_timeout: 3s
timeline:
  - at: 2s
    fault: {do: restart, target: gate}
thresholds:
  - reconnect_spread <= 5.5s
  - line_place_lost == 0
  - line_place_kept == 1
run:
  duration: 10s
  workers: 1
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := engine.Run(context.Background(), engine.Config{
		Scenario:    sc,
		Gates:       []string{c.gateURL},
		TokenSecret: string(testSecret),
		Faults:      fault.Procs{Targets: map[string]fault.Proc{"gate": {Restart: restart}}},
		Workers:     1,
		Game:        arenaDriven(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	_ = report.WriteTable(&table, run)
	t.Logf("the run:\n%s", table.String())
	mu.Lock()
	if restarts != 1 {
		t.Fatalf("the gate was restarted %d times, want 1", restarts)
	}
	mu.Unlock()

	cnt := run.Summary.Counters
	if cnt["arrived"] != 40 {
		t.Fatalf("%d players arrived, want 40", cnt["arrived"])
	}
	// Every player was connected or in line at 2 s: each was closed once.
	if cnt[report.CounterServerCloses] != 40 {
		t.Errorf("%d server closes, want 40 (every player)", cnt[report.CounterServerCloses])
	}
	// 10 a second from 0 s: about 20 were still waiting at 2 s.
	if n := cnt[report.CounterClosesInLine]; n < 5 || n > 35 {
		t.Errorf("%d closed while waiting in line, want about 20", n)
	}
	f := run.Facts()
	for _, name := range report.RedialFigures {
		if _, ok := f.Value(name); !ok {
			t.Errorf("%s missing", name)
		}
	}
	if v, _ := f.Value("reconnect_spread"); v > 5.5 || v < 1 {
		t.Errorf("reconnect_spread %.2f s, want the SDK's spread of up to 5 s (and not all at once)", v)
	}
	rd := report.RedialsOf(cnt, nil)
	if rd.First() != 40 || rd.NoRedial != 0 {
		t.Errorf("%d first redials, %d closes without one; want 40 and 0", rd.First(), rd.NoRedial)
	}
	if rd.Kept+rd.Lost+rd.Unknown != rd.InLine {
		t.Errorf("places: %d kept + %d lost + %d not told != %d closed in line", rd.Kept, rd.Lost, rd.Unknown, rd.InLine)
	}
	if len(run.Criteria) != 3 {
		t.Errorf("%d thresholds judged, want 3", len(run.Criteria))
	}
	for _, c := range run.Criteria {
		if !c.Passed {
			t.Errorf("threshold %s failed: %g vs %g %s", c.Threshold, c.Value, c.Limit, c.Detail)
		}
	}
	if !strings.Contains(table.String(), "server closes: 40") {
		t.Errorf("the table has no first-redial section")
	}
}
