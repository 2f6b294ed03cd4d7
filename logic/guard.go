package logic

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Guard rails for the game's code, which Levee did not write: every call
// of a handler (Handle, Start, Apply, Key, the initial state) on a shard
// is timed per action (logic_handler_duration_seconds; the budget is 1 ms,
// the alert LeveeHandlerSlow fires on a p99 above it), and a handler that
// panics fails only its own request: INTERNAL, nothing stored or changed,
// one log line with the action and the player, and
// logic_handler_panics_total{action} counts it. The shard goes on with the
// next request.

// handlerMetrics are one action's handler series.
type handlerMetrics struct {
	duration prometheus.Observer
	panics   prometheus.Counter
}

// errPanicked is what a request whose handler panicked fails with
// (INTERNAL: it is no game error).
type errPanicked struct {
	action string
	value  any
}

func (e *errPanicked) Error() string {
	return fmt.Sprintf("the game's handler of %q failed", e.action)
}

// guard runs fn, game code for action on behalf of player, on the shard's
// goroutine: it times it and turns a panic into an error.
func (s *Server) guard(action, player string, fn func() error) (err error) {
	hm := s.handlers[action]
	start := time.Now()
	defer func() {
		if hm != nil {
			hm.duration.Observe(time.Since(start).Seconds())
		}
		if v := recover(); v != nil {
			if hm != nil {
				hm.panics.Inc()
			}
			s.log.Error("game handler panicked", "action", action, "player", player, "panic", panicText(v))
			err = &errPanicked{action: action, value: v}
		}
	}()
	return fn()
}

// panicText is a panic's value for the log line, cut to 256 bytes.
func panicText(v any) string {
	t := fmt.Sprint(v)
	if len(t) > 256 {
		t = t[:256] + "..."
	}
	return t
}
