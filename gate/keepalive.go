package gate

import (
	"context"
	"time"
)

// keepalive is the one goroutine that pings every connection each
// PingInterval, and first extends the read deadline of every connection
// that answered its previous ping, so a player that stops answering is
// dropped at most 2 x PingInterval + PongTimeout after its last pong.
func (s *Server) keepalive(ctx context.Context) {
	t := s.clock.NewTicker(s.cfg.PingInterval)
	defer t.Stop()
	var batch []*conn
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		batch = s.snapshot(batch[:0])
		for _, c := range batch {
			if ctx.Err() != nil {
				return
			}
			c.ping(time.Now().Add(s.cfg.WriteTimeout))
		}
		clear(batch) // do not keep closed connections reachable until the next tick
	}
}
