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
	exp := d.start.Add(d.p.end + d.p.drain + 10*time.Minute)
	figures := d.audit.Check(ctx, audit.CheckConfig{
		Timeout: auditCheckTime,
		Call:    d.p.timeout,
		Clock:   d.cfg.clock,
		Log:     d.cfg.log,
		Dial: func(ctx context.Context, id string) (audit.Conn, error) {
			tok, err := token.Sign(d.cfg.secret, id, exp)
			if err != nil {
				return nil, err
			}
			// No SDK retries, budget or pacing: the check retries by
			// itself, within its own time, and the run's budget may be
			// spent.
			opts := client.Options{Game: d.p.game.Game, Dialer: d.cfg.dialer, Logger: d.cfg.log, Clock: d.cfg.clock, NoPacing: true, NoRetry: true}
			c, err := client.DialRetry(ctx, d.gateOf(id), client.StaticToken(tok), opts)
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

// gateOf is the gate player id plays on: player n ("p-<run>-<n>") dials
// gates[n % len].
func (d *driver) gateOf(id string) string {
	n, _ := strconv.Atoi(id[strings.LastIndex(id, "-")+1:])
	return d.cfg.gates[n%len(d.cfg.gates)]
}
