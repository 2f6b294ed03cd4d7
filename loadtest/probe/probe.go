// Package probe reads the servers' own figures from their /metrics pages
// while a load test runs: the gates' connections and waiting players, the
// logic shards' queue depth, battle's p99 latency and every tier's CPU and
// resident memory. It parses the Prometheus text exposition with expfmt
// (histograms included), as the gate's auto-pacer does.
//
// A Probe is used by one goroutine: call Sample once a second or so; rates
// (CPU) and the battle p99 come from the difference between samples.
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Tiers a target may belong to.
const (
	Gate   = "gate"
	Logic  = "logic"
	Battle = "battle"
)

// Level names a Sample returns (the keys of record.Point.Levels).
const (
	GateConnections = "gate_connections"  // sum of gate_active_connections
	GateWaiting     = "gate_waiting"      // sum of gate_line_waiting
	LogicQueueDepth = "logic_queue_depth" // sum over shards and logic processes
	BattleP99       = "battle_p99"        // seconds, over the last Window, all battle processes
	LogicCommitP99  = "logic_commit_p99"  // seconds, over the last Window: a commit's write and fsync
	// "cpu_<tier>" (cores: CPU seconds per second, summed over the tier's
	// processes) and "rss_<tier>_mb" (MiB, summed) for every tier probed.
)

// Window is how far back the battle p99 looks: the latency histogram's
// increase over about this long, as rate(...[5s]) would.
const Window = 5 * time.Second

// maxPage bounds what is read of one /metrics page.
const maxPage = 8 << 20

// ErrProbe reports a page that could not be read.
var ErrProbe = errors.New("probe")

// Target is one process's /metrics page.
type Target struct {
	Tier string // gate, logic or battle
	URL  string // http://127.0.0.1:8082/metrics
}

// ParseTargets reads "tier=URL" entries (a bare URL is refused: the tier
// decides what is read).
func ParseTargets(list []string) ([]Target, error) {
	var out []Target
	for _, e := range list {
		tier, u, ok := strings.Cut(e, "=")
		if !ok || (tier != Gate && tier != Logic && tier != Battle) {
			return nil, fmt.Errorf("metrics target %q: want gate=URL, logic=URL or battle=URL", e)
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("metrics target %q: the URL must be http or https", e)
		}
		out = append(out, Target{Tier: tier, URL: u})
	}
	return out, nil
}

// Probe samples a set of targets.
type Probe struct {
	targets []Target
	client  *http.Client
	prev    []*reading // last good reading per target
	windows map[string]*window
	errs    []string
}

type reading struct {
	at    time.Time
	cpu   float64 // process_cpu_seconds_total
	hasCP bool
}

type histPoint struct {
	at     time.Time
	bounds []float64
	counts []float64 // cumulative
}

// New returns a probe of targets; client nil means one with a 900 ms
// timeout.
func New(targets []Target, client *http.Client) *Probe {
	if client == nil {
		client = &http.Client{Timeout: 900 * time.Millisecond}
	}
	return &Probe{targets: targets, client: client, prev: make([]*reading, len(targets)), windows: map[string]*window{}}
}

// Errors returns the scrape errors seen so far (at most one per target and
// kind of error), for the report's warnings.
func (p *Probe) Errors() []string { return p.errs }

// Sample scrapes every target at once and returns the levels, at now. A
// target that fails leaves its figures out.
func (p *Probe) Sample(ctx context.Context, now time.Time) map[string]float64 {
	pages := make([]page, len(p.targets))
	errs := make([]error, len(p.targets))
	var wg sync.WaitGroup
	for i, t := range p.targets {
		wg.Go(func() { pages[i], errs[i] = p.fetch(ctx, t.URL) })
	}
	wg.Wait()
	out := map[string]float64{}
	sums := map[string]*histPoint{} // level -> histogram summed over the tier
	sumHist := func(level string, h *histPoint) {
		if h == nil {
			return
		}
		if cur := sums[level]; cur == nil {
			sums[level] = &histPoint{at: now, bounds: h.bounds, counts: append([]float64(nil), h.counts...)}
		} else if sameBounds(cur.bounds, h.bounds) {
			for j := range cur.counts {
				cur.counts[j] += h.counts[j]
			}
		}
	}
	for i, t := range p.targets {
		if errs[i] != nil {
			p.noteErr(errs[i].Error())
			continue
		}
		pg := pages[i]
		switch t.Tier {
		case Gate:
			add(out, GateConnections, pg, "gate_active_connections")
			add(out, GateWaiting, pg, "gate_line_waiting")
		case Logic:
			add(out, LogicQueueDepth, pg, "logic_queue_depth")
			sumHist(LogicCommitP99, pg.hists["logic_commit_duration_seconds"])
		case Battle:
			sumHist(BattleP99, pg.hists["battle_latency_seconds"])
		}
		if v, ok := pg.values["process_resident_memory_bytes"]; ok {
			out["rss_"+t.Tier+"_mb"] += v / (1 << 20)
		}
		if v, ok := pg.values["process_cpu_seconds_total"]; ok {
			if prev := p.prev[i]; prev != nil && prev.hasCP && now.After(prev.at) && v >= prev.cpu {
				out["cpu_"+t.Tier] += (v - prev.cpu) / now.Sub(prev.at).Seconds()
			}
			p.prev[i] = &reading{at: now, cpu: v, hasCP: true}
		}
	}
	for level, h := range sums {
		w := p.windows[level]
		if w == nil {
			w = &window{}
			p.windows[level] = w
		}
		if q, ok := w.p99(*h); ok {
			out[level] = q
		}
	}
	return out
}

// window is a histogram's recent samples, for its quantile over Window.
type window struct{ pts []histPoint }

// p99 keeps h in the window and returns the 0.99 quantile of the increase
// since the oldest point in it (histogram_quantile's linear interpolation
// within a bucket); false when nothing was observed.
func (w *window) p99(h histPoint) (float64, bool) {
	w.pts = append(w.pts, h)
	cut := 0
	for cut < len(w.pts)-1 && h.at.Sub(w.pts[cut+1].at) >= Window {
		cut++
	}
	w.pts = w.pts[cut:]
	old := w.pts[0]
	if len(w.pts) < 2 {
		return 0, false
	}
	if !sameBounds(old.bounds, h.bounds) {
		w.pts = w.pts[len(w.pts)-1:] // other buckets: start again
		return 0, false
	}
	delta := make([]float64, len(h.counts))
	for i := range delta {
		delta[i] = h.counts[i] - old.counts[i]
		if delta[i] < 0 { // a restart reset the counters
			w.pts = w.pts[len(w.pts)-1:]
			return 0, false
		}
	}
	return Quantile(0.99, h.bounds, delta)
}

// Quantile is histogram_quantile over cumulative bucket counts with upper
// bounds (the last +Inf): false when the total is 0. A quantile in the +Inf
// bucket is the largest finite bound.
func Quantile(q float64, bounds, cum []float64) (float64, bool) {
	n := len(cum)
	if n == 0 || cum[n-1] <= 0 {
		return 0, false
	}
	rank := q * cum[n-1]
	i := sort.SearchFloat64s(cum, rank)
	if i >= n {
		i = n - 1
	}
	if math.IsInf(bounds[i], 1) {
		if i == 0 {
			return 0, false
		}
		return bounds[i-1], true
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = bounds[i-1], cum[i-1]
	}
	in := cum[i] - below
	if in <= 0 {
		return bounds[i], true
	}
	return lo + (bounds[i]-lo)*(rank-below)/in, true
}

func (p *Probe) noteErr(msg string) {
	for _, e := range p.errs {
		if e == msg {
			return
		}
	}
	if len(p.errs) < 20 {
		p.errs = append(p.errs, msg)
	}
}

func add(out map[string]float64, key string, pg page, name string) {
	if v, ok := pg.values[name]; ok {
		out[key] += v
	}
}

func sameBounds(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// page is one scrape: every gauge, counter and untyped family summed over
// its series, and every histogram's buckets summed over its series.
type page struct {
	values map[string]float64
	hists  map[string]*histPoint
}

func (p *Probe) fetch(ctx context.Context, u string) (page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return page{}, fmt.Errorf("%w: %s: %w", ErrProbe, u, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := p.client.Do(req)
	if err != nil {
		return page{}, fmt.Errorf("%w: %s: %w", ErrProbe, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return page{}, fmt.Errorf("%w: %s: HTTP %d", ErrProbe, u, resp.StatusCode)
	}
	pg, err := Parse(io.LimitReader(resp.Body, maxPage))
	if err != nil {
		return page{}, fmt.Errorf("%w: %s: %w", ErrProbe, u, err)
	}
	return pg, nil
}

// Parse reads a text exposition page.
func Parse(r io.Reader) (page, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return page{}, err
	}
	pg := page{values: map[string]float64{}, hists: map[string]*histPoint{}}
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				pg.values[name] += m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				pg.values[name] += m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				pg.values[name] += m.GetUntyped().GetValue()
			case m.GetHistogram() != nil:
				addHist(pg.hists, name, m.GetHistogram())
			}
		}
	}
	return pg, nil
}

func addHist(hs map[string]*histPoint, name string, d *dto.Histogram) {
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
	h := hs[name]
	if h == nil {
		hs[name] = &histPoint{bounds: bounds, counts: counts}
		return
	}
	if !sameBounds(h.bounds, bounds) {
		return // a series with other buckets is left out
	}
	for i := range counts {
		h.counts[i] += counts[i]
	}
}
