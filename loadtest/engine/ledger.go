package engine

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/loadtest/ledger"
)

// ledgerCheckTime bounds the ledger check after the drain: the resends of
// what is unresolved and the profiles read back.
const ledgerCheckTime = 30 * time.Second

// checkLedger checks this process's players against its ledger (package
// loadtest/ledger) and adds the figures to the recorder's counters, which
// sum over the load processes.
func (d *driver) checkLedger(ctx context.Context) {
	exp := d.start.Add(d.p.end + d.p.drain + 10*time.Minute)
	f := d.ledger.Check(ctx, ledger.CheckConfig{
		Timeout: ledgerCheckTime,
		Call:    d.p.timeout,
		Clock:   d.cfg.clock,
		Dial: func(ctx context.Context, id string) (ledger.Conn, error) {
			tok, err := token.Sign(d.cfg.secret, id, exp)
			if err != nil {
				return nil, err
			}
			// No SDK retries, budget or pacing: the check retries by
			// itself, within its own time, and the run's budget may be
			// spent.
			opts := client.Options{Dialer: d.cfg.dialer, Logger: d.cfg.log, Clock: d.cfg.clock, NoPacing: true, NoRetry: true}
			return client.DialRetry(ctx, d.gateOf(id), client.StaticToken(tok), opts)
		},
		Report: func(id string, r ledger.Result) {
			if !r.OK() {
				d.cfg.log.Warn("ledger check", "player", id, "lost", r.Lost, "doubled", r.Doubled,
					"phantom", r.Phantom, "mismatch", r.Why)
			}
		},
	})
	for name, n := range f.Counters() {
		d.rec.Add(name, n)
	}
	d.rec.Add(ledger.CounterChecks, 1)
}

// gateOf is the gate player id plays on: player n ("p-<run>-<n>") dials
// gates[n % len].
func (d *driver) gateOf(id string) string {
	n, _ := strconv.Atoi(id[strings.LastIndex(id, "-")+1:])
	return d.cfg.gates[n%len(d.cfg.gates)]
}
