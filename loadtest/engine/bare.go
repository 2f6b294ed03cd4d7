package engine

import (
	"context"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/loadtest/report"
)

// playBare is one player of client policy bare: a plain WebSocket
// connection to its gate's URL (any server: no Levee protocol, no token,
// no request), read until the player's life ends; the memory comparison
// against cmd/barews. It counts arrived, connected while up (dial_failures
// when the upgrade fails), left at the end, and server_closes when the
// server ended it first.
func (d *driver) playBare(live context.Context, pl *player) {
	rec := d.rec
	rec.Add("arrived", 1)
	life, endLife := pl.life(live)
	defer endLife()
	g := d.cfg.gates[pl.n%len(d.cfg.gates)]
	ws, resp, err := d.cfg.dialerFor(g).DialContext(life, g, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if life.Err() == nil {
			rec.Add("dial_failures", 1)
		}
		return
	}
	rec.Add("connected", 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}()
	select {
	case <-life.Done():
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
			d.cfg.clock.Now().Add(time.Second))
	case <-readDone:
		if life.Err() == nil {
			rec.Add(report.CounterServerCloses, 1)
		}
	}
	ws.Close()
	<-readDone
	rec.Add("connected", -1)
	rec.Add("left", 1)
}
