package engine

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/leveehq/levee/client"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/loadtest/audit"
)

// auditCheckTime bounds the game's check after the drain: the resends of
// what is unresolved and the states read back.
const auditCheckTime = 30 * time.Second

// checkAudit runs the game's check of this process's players (package
// loadtest/audit) and adds its figures to the recorder's counters, which
// sum over the load processes.
func (d *driver) checkAudit(ctx context.Context) {
	figures := d.audit.Check(ctx, audit.CheckConfig{
		Timeout: auditCheckTime,
		Call:    d.p.timeout,
		Clock:   d.cfg.clock,
		Log:     d.cfg.log,
		Dial: func(ctx context.Context, id string) (audit.Conn, error) {
			c, err := d.checkDial(ctx, id)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
	})
	for name, n := range figures {
		d.rec.Add(name, n)
	}
	d.rec.Add(audit.CounterChecks, 1)
}

// checkDial connects as player id for an after-run check (the ledger's or
// the replay check), with a token valid well past the run. No SDK
// retries, budget or pacing: a check retries by itself, within its own
// time, and the run's budget may be spent.
func (d *driver) checkDial(ctx context.Context, id string) (*client.Client, error) {
	tok, err := token.SignKey(d.cfg.keyID, d.cfg.secret, id, d.start.Add(d.p.end+d.p.drain+10*time.Minute))
	if err != nil {
		return nil, err
	}
	g := d.gateOf(id)
	opts := client.Options{Game: d.p.game.Game, Dialer: d.cfg.dialerFor(g), Logger: d.cfg.log, Clock: d.cfg.clock, NoPacing: true, NoRetry: true}
	return client.DialRetry(ctx, g, client.StaticToken(tok), opts)
}

// gateOf is the gate player id plays on: player n ("p-<run>-<n>") dials
// gates[n % len].
func (d *driver) gateOf(id string) string {
	n, _ := strconv.Atoi(id[strings.LastIndex(id, "-")+1:])
	return d.cfg.gates[n%len(d.cfg.gates)]
}
