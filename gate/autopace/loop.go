package autopace

import (
	"context"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

// Applier is the gate's side of auto mode, its admission line: each
// interval it gets the signals read at now and, in auto mode, steps its
// Pace and applies the rate decided.
type Applier interface {
	Apply(now time.Time, sig Signals)
}

// maxScrapeTime bounds one round of scrapes.
const maxScrapeTime = 5 * time.Second

// Loop reads the tiers' health every interval and hands it to its
// Applier. It runs for the life of the gate's Run (also outside auto mode,
// so that GET /admin/line shows the signals and a switch to auto starts
// from fresh ones).
type Loop struct {
	clock    clock.Clock
	interval time.Duration
	scraper  *Scraper // nil: no /metrics pages to read
	pressure *Pressure
	apply    Applier
}

// NewLoop is a loop reading urls (none: only the backpressure) and
// pressure every interval of clk, for apply.
func NewLoop(clk clock.Clock, interval time.Duration, urls []string, pressure *Pressure, apply Applier) *Loop {
	l := &Loop{clock: clk, interval: interval, pressure: pressure, apply: apply}
	if len(urls) > 0 {
		l.scraper = NewScraper(urls)
	}
	return l
}

// Run reads and applies every interval until ctx is done.
func (l *Loop) Run(ctx context.Context) {
	t := l.clock.NewTicker(l.interval)
	defer t.Stop()
	if l.scraper != nil {
		defer l.scraper.Close()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			sig := l.Read(ctx)
			l.apply.Apply(l.clock.Now(), sig)
		}
	}
}

// Read reads one interval's signals: the /metrics pages (bounded by the
// interval, at most 5 s) and the backpressure since the previous Read.
func (l *Loop) Read(ctx context.Context) Signals {
	var sig Signals
	if l.scraper != nil {
		sctx, cancel := context.WithTimeout(ctx, min(l.interval, maxScrapeTime))
		sig = l.scraper.Scrape(sctx)
		cancel()
	}
	sig.Backpressure, sig.BPKnown = l.pressure.Fold()
	return sig
}
