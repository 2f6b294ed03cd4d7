package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/examples/arena/arenaclient"
	"github.com/leveehq/levee/examples/arena/arenaledger"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/loadtest/engine"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/scenario"
	"github.com/leveehq/levee/logic"
)

// ledgerScenario buys, fights and reads profiles at about 60 requests/s
// for 6 s, with the ledger on and its thresholds.
const ledgerScenario = `
version: 1
name: ledger-restart
arrivals:
  phases:
    - {duration: 500ms, players: 12}
    - {duration: 6s, players: 12}
players:
  login: {do: get_profile, request: {}}
  actions:
    - {do: buy_item, weight: 3, request: {item_id: potion, quantity: 1}}
    - {do: start_battle, weight: 1, request: {battle_id: "{{job_id}}", units: 2, ticks: 10}}
    - {do: get_profile, weight: 1, request: {}}
  think: 200ms
client:
  request_timeout: 1s
ledger: true
run:
  duration: 6500ms
  drain: 3s
thresholds:
  - ledger_players == 12
  - ledger_lost == 0
  - ledger_doubled == 0
  - ledger_phantom == 0
  - ledger_mismatch == 0
  - ledger_unresolved == 0
  - ledger_unchecked == 0
  - max_attempts <= 10
`

// Logic is stopped and started again on the same data in the middle of a
// purchase stream: the requests cut off are resent with their ids on the
// next connection, and after the run every player's profile matches the
// load tool's ledger: nothing acknowledged lost, nothing applied twice.
func TestLedgerAcrossLogicRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s load run")
	}
	dataDir := t.TempDir()
	var lcfg logic.Config
	c := startTiers(t, tiers{battles: 1, dataDir: dataDir, logic: func(cfg *logic.Config) {
		cfg.GRPCAddr = freePort(t)
		cfg.ShutdownGrace = time.Second
		lcfg = *cfg
	}})
	sc, err := scenario.Parse("ledger-restart.yaml", []byte(ledgerScenario), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The fault, on the run's schedule: 2 s in, logic goes down; 2 s
	// later (longer than a request's timeout) it comes back on its data
	// and address.
	restarted := make(chan error, 1)
	fault := time.AfterFunc(2*time.Second, func() {
		if err := c.stop["logic"](); err != nil {
			restarted <- err
			return
		}
		select {
		case <-time.After(2 * time.Second): // the outage
			restarted <- startLogic(t, c, lcfg)
		case <-ctx.Done():
			restarted <- ctx.Err()
		}
	})
	defer fault.Stop()

	run, err := engine.Run(ctx, engine.Config{Scenario: sc, Name: "ledger-restart", Gates: []string{c.gateURL},
		TokenSecret: string(testSecret), Workers: 1, Log: quietLogger(), Game: arenaDriven()})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-restarted:
		if err != nil {
			t.Fatalf("restarting logic: %v", err)
		}
	default:
		t.Fatal("the run ended before logic was restarted")
	}
	sum := run.Summary.Counters
	t.Logf("sent %d ok %d refused %d failed %d lost %d resends %d; ledger players %d acked %d unresolved %d; attempts %v",
		sum["sent"], sum["ok"], sum["refused"], sum["failed"], sum["lost"], sum["resends"],
		sum["ledger_players"], sum["ledger_acked"], sum["ledger_unresolved"], attemptCounts(sum))
	for _, cr := range run.Criteria {
		if !cr.Passed {
			t.Errorf("%s: %s", cr.Threshold, cr.Detail)
		}
	}
	if sum["ledger_acked"] < 50 {
		t.Errorf("only %d mutations acknowledged: the run did too little to show anything", sum["ledger_acked"])
	}
	if sum["failed"]+sum["lost"]+sum["refused"] == 0 {
		t.Error("no request was refused, failed or lost: logic's outage did not reach the players")
	}
	if sum["ledger_checks"] != 1 {
		t.Errorf("ledger_checks = %d, want 1 (one load process)", sum["ledger_checks"])
	}
	if v, ok := run.Facts().Value("attempts_per_request"); !ok || v < 1 {
		t.Errorf("attempts_per_request = %v, %v", v, ok)
	}
}

func attemptCounts(c map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range c {
		if _, ok := record.AttemptsOf(k); ok {
			out[k] = v
		}
	}
	return out
}

// startLogic starts logic again with cfg (its address and data).
func startLogic(t *testing.T, c *cluster, cfg logic.Config) error {
	l, err := logic.New(cfg, quietLogger())
	if err != nil {
		return err
	}
	c.stop["logic2"] = runTier(t, l.Run)
	return nil
}

// A purchase applied twice behind the ledger's back (the same purchase
// sent again as a new request, recorded once) is found by the check of a
// real cluster as one doubled, and an honest player passes.
func TestLedgerFindsPlantedDouble(t *testing.T) {
	c := startTiers(t, tiers{})
	l := arenaledger.NewLedger()
	dialAs := func(ctx context.Context, id string) (*client.Client, error) {
		tok, err := token.Sign(testSecret, id, time.Now().Add(time.Hour))
		if err != nil {
			return nil, err
		}
		return client.DialRetry(ctx, c.gateURL, client.StaticToken(tok), arenaclient.Options(client.Options{}))
	}
	ctx := ctxT(t)
	for _, id := range []string{"honest", "doubled"} {
		cl, err := dialAs(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		start, err := arenaclient.Profile(cl)
		if err != nil {
			t.Fatal(err)
		}
		l.Snapshot(id, start, cl.Welcome().GetVersion())
		for range 3 {
			var info client.CallInfo
			r, replayed, err := arenaclient.BuyItem(client.WithCallInfo(ctx, &info), cl, "potion", 1)
			l.Purchase(id, info.RequestID, "potion", 1, info.Attempts, r, replayed, err)
			if err != nil {
				t.Fatal(err)
			}
		}
		if id == "doubled" {
			if _, _, err := arenaclient.BuyItem(ctx, cl, "potion", 1); err != nil { // not in the ledger
				t.Fatal(err)
			}
		}
		_ = cl.Close()
	}
	results := map[string]arenaledger.Result{}
	f := l.Check(ctx, arenaledger.CheckConfig{
		Dial:   func(ctx context.Context, id string) (arenaledger.Conn, error) { return dialAs(ctx, id) },
		Report: func(id string, r arenaledger.Result) { results[id] = r },
	})
	want := arenaledger.Figures{Players: 2, Acked: 6, Doubled: 1}
	if f != want {
		t.Fatalf("figures %+v, want %+v; results %+v", f, want, results)
	}
	if !results["honest"].OK() || results["doubled"].Doubled != 1 {
		t.Fatalf("results %+v", results)
	}
}
