package gate

import (
	"context"
	"math"
	"sync/atomic"
	"time"
)

// pressureMeter collects the backpressure ratio logic puts on its replies
// (and on its refusals). The request path adds to two counters; once per
// auto interval the auto loop folds the interval's mean into an EWMA.
type pressureMeter struct {
	sum atomic.Uint64 // ratios × pressureScale
	n   atomic.Uint64

	ewma  float64 // auto loop only
	known bool
}

const (
	pressureScale = 1e6
	pressureAlpha = 0.5 // weight of the newest interval
)

func (p *pressureMeter) observe(ratio float64) {
	if !(ratio >= 0) { // NaN too
		ratio = 0
	}
	p.sum.Add(uint64(math.Min(ratio, 1) * pressureScale))
	p.n.Add(1)
}

// fold folds the mean since the previous fold into the EWMA and returns
// it; false when no reply carried a ratio in the interval (the signal is
// then left out, rather than judged on stale data).
func (p *pressureMeter) fold() (float64, bool) {
	n := p.n.Swap(0)
	sum := p.sum.Swap(0)
	if n == 0 {
		return p.ewma, false
	}
	mean := float64(sum) / pressureScale / float64(n)
	if !p.known {
		p.ewma, p.known = mean, true
	} else {
		p.ewma = pressureAlpha*mean + (1-pressureAlpha)*p.ewma
	}
	return p.ewma, true
}

// maxScrapeTime bounds one round of scrapes.
const maxScrapeTime = 5 * time.Second

// autoLoop reads the tiers' health every -auto-interval and, in auto mode,
// lets the auto pacer set the release rate. It runs for the life of Run
// (also outside auto mode, so that GET /admin/line shows the signals and a
// switch to auto starts from fresh ones).
func (s *Server) autoLoop(ctx context.Context) {
	t := s.clock.NewTicker(s.cfg.AutoInterval)
	defer t.Stop()
	if s.scraper != nil {
		defer s.scraper.close()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			s.autoStep(ctx, s.clock.Now())
		}
	}
}

// autoStep is one turn of the auto loop.
func (s *Server) autoStep(ctx context.Context, now time.Time) {
	var sig autoSignals
	if s.scraper != nil {
		sctx, cancel := context.WithTimeout(ctx, min(s.cfg.AutoInterval, maxScrapeTime))
		res := s.scraper.scrape(sctx)
		cancel()
		sig.QueueDepth, sig.QueueKnown = res.QueueDepth, res.QueueKnown
		sig.BattleP99, sig.P99Known = res.BattleP99, res.P99Known
		sig.Errors = res.Errors
	}
	sig.Backpressure, sig.BPKnown = s.pressure.fold()

	l := s.line
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
	d := l.pace.step(now, sig)
	s.m.line.autoVerdict(d.Verdict)
	if !d.Changed {
		return
	}
	interval := l.q.Stats(now).Rate.Interval
	r := rateFor(d.Rate, interval)
	if err := l.q.SetRate(r.N, r.Interval, now); err != nil {
		s.log.Error("auto pace: setting the rate", "rate", r.String(), "err", err)
		l.pace.rate = d.Old
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
		"logic_queue_depth", signalValue(sig.QueueKnown, sig.QueueDepth),
		"battle_p99_ms", signalValue(sig.P99Known, float64(sig.BattleP99.Milliseconds())),
		"backpressure", signalValue(sig.BPKnown, sig.Backpressure))
	l.poke()
}

// signalValue is a signal for logs and JSON: nil when unknown.
func signalValue(known bool, v float64) any {
	if !known {
		return nil
	}
	return v
}
