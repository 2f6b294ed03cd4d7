package autopace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The metrics auto mode reads from the tiers below (names the seed fixes).
const (
	metricQueueDepth    = "logic_queue_depth"
	metricBattleLatency = "battle_latency_seconds"
)

// maxScrapeBytes bounds one /metrics page.
const maxScrapeBytes = 8 << 20

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
	prev   map[string]cumHist // the last histogram read from each URL
}

// NewScraper is a scraper of urls.
func NewScraper(urls []string) *Scraper {
	// A transport of its own, so that Close can drop its idle connections.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &Scraper{client: &http.Client{Transport: tr}, urls: urls, prev: map[string]cumHist{}}
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
		delta, ok := page.hist.sub(sc.prev[u])
		sc.prev[u] = *page.hist
		if !ok {
			continue
		}
		if q, ok := delta.quantile(0.99); ok {
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
	hist       *cumHist
}

func (sc *Scraper) fetch(ctx context.Context, u string) (page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return page{}, fmt.Errorf("%w: %s: %w", ErrScrape, u, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := sc.client.Do(req)
	if err != nil {
		return page{}, fmt.Errorf("%w: %s: %w", ErrScrape, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return page{}, fmt.Errorf("%w: %s: HTTP %d", ErrScrape, u, resp.StatusCode)
	}
	p, err := parsePage(io.LimitReader(resp.Body, maxScrapeBytes))
	if err != nil {
		return page{}, fmt.Errorf("%w: %s: %w", ErrScrape, u, err)
	}
	return p, nil
}

// parsePage reads Prometheus text exposition: logic_queue_depth summed over
// its series, and battle_latency_seconds' buckets summed over its series.
func parsePage(r io.Reader) (page, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return page{}, err
	}
	var p page
	if mf := fams[metricQueueDepth]; mf != nil {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				p.depth += m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				p.depth += m.GetUntyped().GetValue()
			default:
				continue
			}
			p.depthKnown = true
		}
	}
	if mf := fams[metricBattleLatency]; mf != nil && mf.GetType() == dto.MetricType_HISTOGRAM {
		var h cumHist
		for _, m := range mf.GetMetric() {
			h.add(m.GetHistogram())
		}
		if h.bounds != nil {
			p.hist = &h
		}
	}
	return p, nil
}

// cumHist is a histogram's cumulative buckets (upper bounds ascending, +Inf
// last) and its count.
type cumHist struct {
	bounds []float64
	counts []float64
	count  float64
}

// add adds a series' buckets; a series with other bounds than the first is
// left out.
func (h *cumHist) add(d *dto.Histogram) {
	if d == nil {
		return
	}
	bs := d.GetBucket()
	bounds := make([]float64, 0, len(bs)+1)
	counts := make([]float64, 0, len(bs)+1)
	for _, b := range bs {
		bounds = append(bounds, b.GetUpperBound())
		counts = append(counts, float64(b.GetCumulativeCount()))
	}
	if len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1) {
		bounds = append(bounds, math.Inf(1))
		counts = append(counts, float64(d.GetSampleCount()))
	}
	if h.bounds == nil {
		h.bounds, h.counts, h.count = bounds, counts, float64(d.GetSampleCount())
		return
	}
	if len(bounds) != len(h.bounds) {
		return
	}
	for i := range bounds {
		if bounds[i] != h.bounds[i] {
			return
		}
	}
	for i := range counts {
		h.counts[i] += counts[i]
	}
	h.count += float64(d.GetSampleCount())
}

// sub is h minus an earlier reading of the same histogram: the
// observations in between. A first reading, or one after a restart (the
// count went down), gives false.
func (h cumHist) sub(prev cumHist) (cumHist, bool) {
	if prev.bounds == nil || len(prev.bounds) != len(h.bounds) || h.count < prev.count {
		return cumHist{}, false
	}
	d := cumHist{bounds: h.bounds, counts: make([]float64, len(h.counts)), count: h.count - prev.count}
	for i := range h.counts {
		if h.bounds[i] != prev.bounds[i] {
			return cumHist{}, false
		}
		d.counts[i] = math.Max(h.counts[i]-prev.counts[i], 0)
	}
	return d, true
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile does:
// linear within the bucket it falls in; in the +Inf bucket, the highest
// finite bound. No observations gives false.
func (h cumHist) quantile(q float64) (float64, bool) {
	n := len(h.counts)
	if n == 0 || h.counts[n-1] <= 0 {
		return 0, false
	}
	rank := q * h.counts[n-1]
	i := sort.Search(n, func(i int) bool { return h.counts[i] >= rank })
	if i >= n-1 && math.IsInf(h.bounds[n-1], 1) {
		if n >= 2 {
			return h.bounds[n-2], true
		}
		return 0, false
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = h.bounds[i-1], h.counts[i-1]
	}
	in := h.counts[i] - below
	if in <= 0 {
		return h.bounds[i], true
	}
	return lo + (h.bounds[i]-lo)*(rank-below)/in, true
}
