package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/pgtest"
	"github.com/leveehq/levee/internal/promtext"
	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/loadtest/engine"
	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/probe"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/scenario"
)

// Logic on PostgreSQL with shards that move (issue 23), as binaries on
// loopback: one battle, a gate and up to three logic processes on one
// database of pgtest's shared server, with short leases so that a move
// takes about a second. Under a purchase stream with the ledger on, a
// third logic joins (TestPostgresScaleOut) or one of three is SIGKILLed
// and not brought back (TestPostgresLogicKilled): every request gets one
// reply, the ledger shows nothing lost, doubled or applied unacknowledged,
// and the shards did move.

// pgShards is the cluster's shard count: enough that three processes each
// hold some under rendezvous hashing, few enough to move in a tick.
const pgShards = 32

// The leases: a dead process's shards are free after pgLeaseTTL and taken
// within a renew period after that.
const (
	pgLeaseTTL   = "2s"
	pgLeaseRenew = "400ms"
)

// The logic metrics the tests read (logic/lease): shards this process
// holds, and its shard moves by reason (acquired, released, lost).
const (
	metricShardsHeld = "logic_shards_held"
	metricShardMoves = "logic_shard_moves_total"
)

// pgScenario buys, fights and reads profiles at about 100 requests/s for
// 20 s with the ledger on; the fault step (timeline[0]) is the test's.
const pgScenario = `
version: 1
name: %s
arrivals:
  phases:
    - {duration: 1s, players: 20}
    - {duration: 19s, players: 20}
players:
  login: {do: get_profile, request: {}}
  actions:
    - {do: buy_item, weight: 6, request: {item_id: potion, quantity: 1}}
    - {do: get_profile, weight: 2, request: {}}
    - {do: start_battle, weight: 2, request: {battle_id: "{{job_id}}", units: 2, ticks: 10}}
  think: 200ms
  think_jitter: 0.5
client:
  request_timeout: 2s
ledger: true
timeline:
  - at: 8s
    fault: {do: %s, target: logic-3}
    note: %s
run:
  duration: 20s
  drain: 4s
thresholds:
  - lost_replies == 0
  - duplicate_replies == 0
  - unhinted_refusals == 0
  - ledger_players == 20
  - ledger_lost == 0
  - ledger_doubled == 0
  - ledger_phantom == 0
  - ledger_unresolved == 0
  - ledger_mismatch == 0
  - ledger_acked > 0
`

// pgLogic is one logic process of the cluster.
type pgLogic struct {
	name, grpc, ops string
	s               *supervised
}

type pgCluster struct {
	gate, secret string
	logics       []*pgLogic
}

// startPgCluster starts battle, then logic-1..3 on one fresh database (the
// first `running` of them now, the rest ready for a fault's start), then
// the gate with the running ones as its entry points (-logic-addrs), and
// waits until the running ones hold every shard between them. In
// TestPostgresLogicKilled the one killed stays among the gate's entry
// points: the shards whose entry it was enter by the next live one.
func startPgCluster(t *testing.T, running int) *pgCluster {
	t.Helper()
	binDir(t)
	url := pgtest.Database(t)
	b1, b1ops := freePort(t), freePort(t)
	supervise(t, "battle", "battle-1", b1, "-grpc-addr", b1, "-ops-addr", b1ops)
	c := &pgCluster{secret: "pg-test-secret"}
	var entry []string
	for i := 1; i <= 3; i++ {
		l := &pgLogic{name: fmt.Sprintf("logic-%d", i), grpc: freePort(t), ops: freePort(t)}
		args := []string{"-store", "postgres", "-postgres-url", url, "-shards", strconv.Itoa(pgShards),
			"-grpc-addr", l.grpc, "-ops-addr", l.ops, "-advertise-addr", l.grpc, "-node-id", l.name,
			"-lease-ttl", pgLeaseTTL, "-lease-renew", pgLeaseRenew, "-battle-addrs", b1}
		if i <= running {
			l.s = supervise(t, "logic", l.name, l.grpc, args...)
			entry = append(entry, l.grpc)
		} else {
			l.s = notStarted(t, "logic", l.name, l.grpc, args...)
		}
		c.logics = append(c.logics, l)
	}
	gw, ggrpc, gops := freePort(t), freePort(t), freePort(t)
	supervise(t, "gate", "gate", ggrpc, "-addr", gw, "-grpc-addr", ggrpc, "-ops-addr", gops,
		"-logic-addrs", strings.Join(entry, ","), "-shards", strconv.Itoa(pgShards), "-token-secret", c.secret)
	c.gate = "ws://" + gw + "/ws"
	c.waitShards(t, c.logics[:running])
	return c
}

// held is what each of ls holds (-1: its page did not answer).
func held(ls []*pgLogic) []float64 {
	out := make([]float64, len(ls))
	for i, l := range ls {
		v, err := metricValue(l.ops, metricShardsHeld, "", "")
		if err != nil {
			v = -1
		}
		out[i] = v
	}
	return out
}

// waitShards waits until ls hold every shard between them, each some.
func (c *pgCluster) waitShards(t *testing.T, ls []*pgLogic) {
	t.Helper()
	var last []float64
	settled := func() bool {
		last = held(ls)
		sum := 0.0
		for _, v := range last {
			if v <= 0 {
				return false
			}
			sum += v
		}
		return sum == pgShards
	}
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.name
	}
	testwait.UntilWithin(t, 30*time.Second, fmt.Sprintf("%s to hold the %d shards between them, each some", strings.Join(names, ", "), pgShards), settled)
	t.Logf("shards held by %s: %v", strings.Join(names, ", "), last)
}

// metricValue sums the series of metric on the /metrics page at ops
// (host:port) whose label is value (label "": every series); an error when
// the page does not answer or lacks the metric.
func metricValue(ops, metric, label, value string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	fams, err := promtext.Fetch(ctx, http.DefaultClient, "http://"+ops+"/metrics")
	if err != nil {
		return 0, err
	}
	v, ok := fams.SumWhere(metric, label, value)
	if !ok {
		return 0, fmt.Errorf("%s: no %s{%s=%q}", ops, metric, label, value)
	}
	return v, nil
}

// moves is logic l's shard moves for reason (0 when it has none yet).
func moves(t *testing.T, l *pgLogic, reason string) float64 {
	t.Helper()
	v, err := metricValue(l.ops, metricShardMoves, "reason", reason)
	if err != nil && !strings.Contains(err.Error(), "no "+metricShardMoves) {
		t.Fatalf("%s: %v", l.name, err)
	}
	return v
}

// runPg plays pgScenario with fault do on logic-3 and fails the test on
// any threshold that did not hold.
func (c *pgCluster) runPg(t *testing.T, name, do, note string, target fault.Proc) *report.Run {
	t.Helper()
	sc, err := scenario.Parse(name+".yaml", fmt.Appendf(nil, pgScenario, name, do, note), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var metrics []probe.Target
	for _, l := range c.logics {
		metrics = append(metrics, probe.Target{Tier: probe.Logic, URL: "http://" + l.ops + "/metrics"})
	}
	run, err := engine.Run(ctx, engine.Config{Scenario: sc, Name: name, Gates: []string{c.gate}, TokenSecret: c.secret,
		Metrics: metrics, Workers: 1, Log: quietLogger(), Game: arenaDriven(),
		Faults: fault.Procs{Targets: map[string]fault.Proc{"logic-3": target}}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	_ = report.WriteTable(&b, run)
	var faults []string
	for _, e := range run.Events {
		if e.Kind == report.EventFault {
			faults = append(faults, e.What)
		}
	}
	if len(faults) == 0 || strings.Contains(strings.Join(faults, "\n"), "failed") {
		t.Errorf("the fault was not injected, or failed: %q", faults)
	}
	for _, cr := range run.Criteria {
		if !cr.Passed {
			t.Errorf("%s: %s (value %v %s)", name, cr.Threshold, cr.Value, cr.Detail)
		}
	}
	sum := run.Summary.Counters
	t.Logf("%s: sent %d ok %d refused %d failed %d lost %d resends %d; ledger acked %d; faults %q",
		name, sum["sent"], sum["ok"], sum["refused"], sum["failed"], sum["lost"], sum["resends"], sum["ledger_acked"], faults)
	if t.Failed() {
		t.Logf("run:\n%s", b.String())
	}
	return run
}

// A third logic process joins two under load: it takes about a third of
// the shards (the others hand them off), and no request is lost on the
// way.
func TestPostgresScaleOut(t *testing.T) {
	c := startPgCluster(t, 2)
	l3 := c.logics[2]
	c.runPg(t, "pg-scale-out", fault.Start, "a third logic joins", fault.Proc{Start: l3.s.back})
	c.waitShards(t, c.logics)
	released := moves(t, c.logics[0], "released") + moves(t, c.logics[1], "released")
	if got := moves(t, l3, "acquired"); got == 0 || released == 0 {
		t.Errorf("no shard moved to logic-3: it acquired %v, logic-1 and logic-2 released %v", got, released)
	}
}

// One of three logic processes is SIGKILLed under load and stays dead: its
// shards are taken by the other two once its leases run out, and no
// request is lost, nothing doubled.
func TestPostgresLogicKilled(t *testing.T) {
	c := startPgCluster(t, 3)
	survivors := c.logics[:2]
	before := moves(t, survivors[0], "acquired") + moves(t, survivors[1], "acquired")
	c.runPg(t, "pg-logic-killed", fault.Kill, "logic-3 crashes and is not restarted", fault.Proc{Kill: c.logics[2].s.kill})
	c.waitShards(t, survivors)
	if after := moves(t, survivors[0], "acquired") + moves(t, survivors[1], "acquired"); after <= before {
		t.Errorf("logic-1 and logic-2 acquired %v shards before the kill and %v after: the dead one's did not move", before, after)
	}
}
