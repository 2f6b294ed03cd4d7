package gate

import (
	"context"
	"log/slog"
	"time"

	"github.com/leveehq/levee/gate/autopace"
)

// Auto mode's glue: package autopace reads the tiers' health and decides
// the rate; the line (the loop's Applier) keeps the pacer under its ctl
// lock, with the operator's settings, and applies the rate to the queue.

var _ autopace.Applier = (*line)(nil)

// autoConfig is auto mode's settings from the gate's flags.
func autoConfig(cfg Config) autopace.Config {
	return autopace.Config{
		MinRate: cfg.AutoMinRate, MaxRate: cfg.AutoMaxRate, Up: cfg.AutoUp, Down: cfg.AutoDown, Interval: cfg.AutoInterval,
		MaxQueueDepth:   float64(cfg.AutoMaxQueueDepth),
		MaxBattleP99:    cfg.AutoBattleP99,
		MaxBackpressure: cfg.AutoMaxBackpressure,
	}
}

// autoLoop runs auto mode's loop for the life of Run.
func (s *Server) autoLoop(ctx context.Context) { s.auto.Run(ctx) }

// Apply keeps the signals read at now (for GET /admin/line) and, in auto
// mode, steps the pacer and applies the rate it decided.
func (l *line) Apply(now time.Time, sig autopace.Signals) {
	s := l.s
	l.ctl.Lock()
	defer l.ctl.Unlock()
	prevErrs := len(l.signals.Errors)
	l.signals = sig
	if len(sig.Errors) > 0 && prevErrs == 0 {
		s.log.Warn("auto pace: cannot read some tier metrics; leaving them out", "errors", sig.Errors)
	}
	if !l.auto {
		return
	}
	d := l.pace.Step(now, sig)
	// Counted once the step is applied and logged, so whoever waits on
	// gate_line_auto_steps_total sees the rate and the log line too.
	defer s.m.line.autoVerdict(d.Verdict)
	if !d.Changed {
		return
	}
	interval := l.q.Stats(now).Rate.Interval
	r := autopace.RateFor(d.Rate, interval)
	if err := l.q.SetRate(r.N, r.Interval, now); err != nil {
		s.log.Error("auto pace: setting the rate", "rate", r.String(), "err", err)
		l.pace.SetRate(d.Old)
		return
	}
	s.m.line.releaseRate.Set(r.PerSecond())
	dir := "up"
	if d.Rate < d.Old {
		dir = "down"
	}
	s.m.line.autoChanges.WithLabelValues(dir).Inc()
	s.log.Info("auto pace: release rate changed",
		"old_per_second", d.Old, "new_per_second", d.Rate, "rate", r.String(),
		"verdict", d.Verdict, "reason", d.Reason,
		"logic_queue_depth", logSignal(sig.QueueKnown, sig.QueueDepth),
		"battle_p99_ms", logSignal(sig.P99Known, float64(sig.BattleP99.Milliseconds())),
		"backpressure", logSignal(sig.BPKnown, sig.Backpressure))
	l.poke()
}

// logSignal is a signal for the logs: its value, or "unknown" (a
// *float64 would print as an address).
func logSignal(known bool, v float64) slog.Value {
	if !known {
		return slog.StringValue("unknown")
	}
	return slog.Float64Value(v)
}

// signalValue is a signal for JSON: nil when unknown.
func signalValue(known bool, v float64) *float64 {
	if !known {
		return nil
	}
	return &v
}
