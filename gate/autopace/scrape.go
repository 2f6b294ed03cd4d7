package autopace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/leveehq/levee/internal/promtext"
)

// The metrics auto mode reads from the tiers below (names the seed fixes).
const (
	metricQueueDepth    = "logic_queue_depth"
	metricBattleLatency = "battle_latency_seconds"
)

// ErrScrape wraps every scrape failure.
var ErrScrape = errors.New("autopace: scrape")

// Scraper reads the tiers' /metrics pages for auto mode: the sum of
// logic_queue_depth over every page, and, per page, the battle p99 over the
// time since the previous scrape, from the change in the
// battle_latency_seconds histogram's buckets. One goroutine (the Loop's)
// uses it.
type Scraper struct {
	client *http.Client
	urls   []string
	prev   map[string]promtext.Hist // the last histogram read from each URL
}

// NewScraper is a scraper of urls.
func NewScraper(urls []string) *Scraper {
	// A transport of its own, so that Close can drop its idle connections.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &Scraper{client: &http.Client{Transport: tr}, urls: urls, prev: map[string]promtext.Hist{}}
}

// Close drops the idle keep-alive connections (the loop has ended).
func (sc *Scraper) Close() { sc.client.CloseIdleConnections() }

// Scrape reads every URL once (one after another; there are a handful)
// into the queue depth (known when some page had logic_queue_depth), the
// battle p99 (known when some page had battles since its previous scrape)
// and the errors; the backpressure is left unknown.
func (sc *Scraper) Scrape(ctx context.Context) Signals {
	var res Signals
	var p99 float64
	for _, u := range sc.urls {
		page, err := sc.fetch(ctx, u)
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
			continue
		}
		if page.depthKnown {
			res.QueueDepth += page.depth
			res.QueueKnown = true
		}
		if page.hist == nil {
			continue
		}
		delta, ok := page.hist.Sub(sc.prev[u])
		sc.prev[u] = *page.hist
		if !ok {
			continue
		}
		if q, ok := delta.Quantile(0.99); ok {
			p99 = math.Max(p99, q)
			res.P99Known = true
		}
	}
	if res.P99Known {
		res.BattleP99 = time.Duration(p99 * float64(time.Second))
	}
	return res
}

// page is what one /metrics page says.
type page struct {
	depth      float64
	depthKnown bool
	hist       *promtext.Hist
}

func (sc *Scraper) fetch(ctx context.Context, u string) (page, error) {
	fams, err := promtext.Fetch(ctx, sc.client, u)
	if err != nil {
		return page{}, fmt.Errorf("%w: %w", ErrScrape, err)
	}
	return pageOf(fams), nil
}

// parsePage reads Prometheus text exposition: logic_queue_depth summed over
// its series, and battle_latency_seconds' buckets summed over its series.
func parsePage(r io.Reader) (page, error) {
	fams, err := promtext.Parse(r)
	if err != nil {
		return page{}, err
	}
	return pageOf(fams), nil
}

func pageOf(fams promtext.Families) page {
	var p page
	p.depth, p.depthKnown = fams.Sum(metricQueueDepth)
	if h, ok := fams.Hist(metricBattleLatency); ok {
		p.hist = &h
	}
	return p
}
