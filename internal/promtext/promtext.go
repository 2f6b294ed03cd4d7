// Package promtext reads the tiers' Prometheus text exposition pages, for
// the gate's auto mode (gate/autopace) and the load tool's probe
// (loadtest/probe): fetch a page with a bound on its size, parse it with
// expfmt, sum a family over its series, and work with a histogram's
// cumulative buckets: summed over series, the difference between two
// readings, and a quantile as Prometheus' histogram_quantile gives it.
package promtext

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MaxPage bounds what is read of one page.
const MaxPage = 8 << 20

// ErrFetch wraps every failure to read a page.
var ErrFetch = errors.New("metrics page")

// Families is a parsed page: metric families by name.
type Families map[string]*dto.MetricFamily

// Fetch reads and parses the page at url; errors name the url.
func Fetch(ctx context.Context, c *http.Client, url string) (Families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFetch, url, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFetch, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: HTTP %d", ErrFetch, url, resp.StatusCode)
	}
	fams, err := Parse(io.LimitReader(resp.Body, MaxPage))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFetch, url, err)
	}
	return fams, nil
}

// Parse reads a text exposition page.
func Parse(r io.Reader) (Families, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	return Families(fams), nil
}

// Sum is the family's gauge, counter and untyped series summed; false when
// the page has no such series.
func (f Families) Sum(name string) (float64, bool) { return f.SumWhere(name, "", "") }

// SumWhere is Sum over the series whose label is value (label "": every
// series).
func (f Families) SumWhere(name, label, value string) (float64, bool) {
	mf := f[name]
	if mf == nil {
		return 0, false
	}
	var sum float64
	known := false
	for _, m := range mf.GetMetric() {
		if label != "" && !hasLabel(m, label, value) {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		default:
			continue
		}
		known = true
	}
	return sum, known
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

// Hist returns the histogram family's buckets summed over its series (a
// series with other bounds than the first is left out); false when the
// page has no such histogram.
func (f Families) Hist(name string) (Hist, bool) {
	mf := f[name]
	if mf == nil || mf.GetType() != dto.MetricType_HISTOGRAM {
		return Hist{}, false
	}
	var h Hist
	for _, m := range mf.GetMetric() {
		h.Add(m.GetHistogram())
	}
	return h, h.Bounds != nil
}

// Hist is a histogram's cumulative buckets (upper bounds ascending, +Inf
// last) and its count.
type Hist struct {
	Bounds []float64
	Counts []float64 // cumulative, one per bound
	Count  float64
}

// Add adds a series' buckets; a series with other bounds than the first
// added is left out.
func (h *Hist) Add(d *dto.Histogram) {
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
	h.AddBuckets(bounds, counts, float64(d.GetSampleCount()))
}

// AddBuckets adds cumulative counts over bounds (and their total); other
// bounds than h's are left out.
func (h *Hist) AddBuckets(bounds, counts []float64, count float64) {
	if h.Bounds == nil {
		h.Bounds, h.Counts, h.Count = append([]float64(nil), bounds...), append([]float64(nil), counts...), count
		return
	}
	if !SameBounds(h.Bounds, bounds) || len(counts) != len(h.Counts) {
		return
	}
	for i := range counts {
		h.Counts[i] += counts[i]
	}
	h.Count += count
}

// SameBounds reports whether two histograms have the same buckets.
func SameBounds(a, b []float64) bool {
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

// Sub is h minus an earlier reading of the same histogram: the
// observations in between. A first reading (prev empty), other buckets,
// or one after a restart (the count went down) gives false.
func (h Hist) Sub(prev Hist) (Hist, bool) {
	if prev.Bounds == nil || !SameBounds(prev.Bounds, h.Bounds) || h.Count < prev.Count {
		return Hist{}, false
	}
	d := Hist{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts)), Count: h.Count - prev.Count}
	for i := range h.Counts {
		d.Counts[i] = math.Max(h.Counts[i]-prev.Counts[i], 0)
	}
	return d, true
}

// Quantile estimates the q-quantile as histogram_quantile does: linear
// within the bucket it falls in (from 0 in the first); in the +Inf bucket,
// the highest finite bound. No observations gives false.
func (h Hist) Quantile(q float64) (float64, bool) {
	n := len(h.Counts)
	if n == 0 || h.Counts[n-1] <= 0 {
		return 0, false
	}
	rank := q * h.Counts[n-1]
	i := sort.Search(n, func(i int) bool { return h.Counts[i] >= rank })
	if i >= n {
		i = n - 1
	}
	if math.IsInf(h.Bounds[i], 1) {
		if i == 0 {
			return 0, false
		}
		return h.Bounds[i-1], true
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = h.Bounds[i-1], h.Counts[i-1]
	}
	in := h.Counts[i] - below
	if in <= 0 {
		return h.Bounds[i], true
	}
	return lo + (h.Bounds[i]-lo)*(rank-below)/in, true
}
