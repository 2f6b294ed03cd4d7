package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Metric names the process sampler reads (the process and Go collectors every
// tier's registry has).
const (
	MetricRSS        = "process_resident_memory_bytes"
	MetricGoroutines = "go_goroutines"
	MetricCPU        = "process_cpu_seconds_total"
)

// ErrMetrics reports a /metrics page that could not be read.
var ErrMetrics = errors.New("loadtest: metrics")

// ParseMetrics reads Prometheus text exposition from r and returns the
// values of the unlabelled samples named in names (a name missing from the
// page is missing from the map). Comments, other metrics and labelled
// series are skipped.
func ParseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if !ok || !want[name] {
			continue
		}
		fields := strings.Fields(rest) // value [timestamp]
		if len(fields) == 0 {
			return nil, fmt.Errorf("%w: %q has no value", ErrMetrics, name)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrMetrics, name, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMetrics, err)
	}
	return out, nil
}

// MetricsTarget is one process's /metrics page.
type MetricsTarget struct {
	Name string // e.g. "gate"; the URL's host:port when not given
	URL  string
}

// ParseMetricsTargets reads the -metrics-urls list: each entry is a URL or
// name=URL, http or https, on a loopback host literal or a name (resolved
// when the run starts).
func ParseMetricsTargets(list []string) ([]MetricsTarget, error) {
	var out []MetricsTarget
	seen := map[string]bool{}
	for _, e := range list {
		name, raw, named := strings.Cut(e, "=")
		if !named || strings.Contains(name, "/") {
			name, raw = "", e
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("-metrics-urls: %q: %v", e, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, fmt.Errorf("-metrics-urls: %q: scheme must be http or https", e)
		}
		if u.Hostname() == "" {
			return nil, fmt.Errorf("-metrics-urls: %q: no host", e)
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !isLoopback(ip) {
			return nil, fmt.Errorf("%w: -metrics-urls: %q is not loopback", ErrNonLocal, e)
		}
		if name == "" {
			name = u.Host
		}
		if seen[name] {
			return nil, fmt.Errorf("-metrics-urls: name %q given twice", name)
		}
		seen[name] = true
		out = append(out, MetricsTarget{Name: name, URL: raw})
	}
	return out, nil
}

// checkMetricsTargets resolves every target's host and refuses any that is
// not loopback.
func checkMetricsTargets(ctx context.Context, ts []MetricsTarget, res Resolver) error {
	for _, t := range ts {
		if err := checkLoopbackURL(ctx, "-metrics-urls", t.URL, res); err != nil {
			return err
		}
	}
	return nil
}
