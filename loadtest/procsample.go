package loadtest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/process"
)

// Names of the rows the sampler adds to the -metrics-urls targets: the load
// tool itself and the whole machine (CPU only: every process on it).
const (
	SelfName = "loadtest (self)"
	HostName = "machine (all processes)"
)

// ProcessUsage is what the sampler saw of one process: its memory, its
// goroutines and the CPU it used.
type ProcessUsage struct {
	Name            string  `json:"name"`
	URL             string  `json:"url"` // "self" for the load tool
	Samples         int     `json:"samples"`
	Errors          int     `json:"errors"` // scrapes that failed
	LastError       string  `json:"last_error,omitempty"`
	RSSStart        float64 `json:"rss_start_bytes"`
	RSSMax          float64 `json:"rss_max_bytes"`
	RSSEnd          float64 `json:"rss_end_bytes"`
	GoroutinesStart float64 `json:"goroutines_start"`
	GoroutinesMax   float64 `json:"goroutines_max"`
	GoroutinesEnd   float64 `json:"goroutines_end"`
	// Per phase name, over the samples taken while the phase ran (its
	// window and drain): the largest RSS, and the CPU used in cores (CPU
	// seconds per second between the phase's first and last sample).
	RSSMaxByPhase   map[string]float64 `json:"rss_max_by_phase_bytes"`
	CPUCoresByPhase map[string]float64 `json:"cpu_cores_by_phase"`
}

// cpuSpan is a phase's first and last CPU reading.
type cpuSpan struct {
	firstAt, lastAt time.Time
	first, last     float64
}

type procState struct {
	ProcessUsage
	cpu map[string]*cpuSpan
	// tier is the cluster tier the process is of (gate, logic, battle;
	// "" for none), and cpuLast its CPU seconds at cpuAt: the sampler's
	// goroutine alone uses them, for the levels.
	tier    string
	cpuLast float64
	cpuAt   time.Time
}

// procSampler scrapes every target's /metrics now and then, reads the load
// tool's own figures (gopsutil RSS and CPU times, NumGoroutine) and the
// machine's busy CPU time, and keeps per process the first, last and largest values and per phase the
// largest RSS and the CPU used.
type procSampler struct {
	client *http.Client
	self   *process.Process // nil when it cannot be read
	now    func() time.Time
	mu     sync.Mutex
	procs  []*procState
	phase  string
	// levels, when set before run, gets after every round of samples the
	// tiers' figures: "rss_<tier>_mb" (MiB) and "cpu_<tier>" (cores since
	// the process's previous sample), each summed over the tier's
	// processes.
	levels func(map[string]float64)
}

func newProcSampler(ts []MetricsTarget, allowNonlocal bool, timeout time.Duration) *procSampler {
	nd := &net.Dialer{Timeout: timeout}
	if !allowNonlocal {
		nd.Control = loopbackOnly
	}
	s := &procSampler{
		client: &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: nd.DialContext, MaxIdleConnsPerHost: 1}},
		now:    time.Now,
	}
	add := func(name, url string) {
		s.procs = append(s.procs, &procState{
			ProcessUsage: ProcessUsage{Name: name, URL: url, RSSMaxByPhase: map[string]float64{}, CPUCoresByPhase: map[string]float64{}},
			cpu:          map[string]*cpuSpan{},
			tier:         tierOf(name),
		})
	}
	for _, t := range ts {
		add(t.Name, t.URL)
	}
	if p, err := process.NewProcess(int32(os.Getpid())); err == nil {
		s.self = p
		add(SelfName, "self")
	}
	add(HostName, "host")
	return s
}

// setPhase names the phase later samples belong to ("" for none).
func (s *procSampler) setPhase(name string) {
	s.mu.Lock()
	s.phase = name
	s.mu.Unlock()
}

// sample reads every process once, one after the other.
func (s *procSampler) sample(ctx context.Context) {
	lv := map[string]float64{}
	for _, p := range s.procs {
		var vals map[string]float64
		var err error
		switch p.URL {
		case "self":
			vals, err = s.readSelf(ctx)
		case "host":
			vals, err = readHost(ctx)
		default:
			vals, err = s.scrape(ctx, p.URL)
		}
		at := s.now()
		s.record(p, vals, err, at)
		if err == nil {
			p.addLevels(lv, vals, at)
		}
	}
	if s.levels != nil && len(lv) > 0 {
		s.levels(lv)
	}
}

// tierOf is the cluster tier a -metrics-urls name is of: "gate", "logic"
// or "battle", also with a suffix after a dash ("battle-1"); "" for other
// names.
func tierOf(name string) string {
	tier, _, _ := strings.Cut(name, "-")
	switch tier {
	case "gate", "logic", "battle":
		return tier
	}
	return ""
}

// addLevels adds a tier process's sample to lv (see procSampler.levels).
func (p *procState) addLevels(lv, vals map[string]float64, at time.Time) {
	if p.tier == "" {
		return
	}
	if rss, ok := vals[MetricRSS]; ok {
		lv["rss_"+p.tier+"_mb"] += rss / (1 << 20)
	}
	if cpu, ok := vals[MetricCPU]; ok {
		if !p.cpuAt.IsZero() && at.After(p.cpuAt) {
			lv["cpu_"+p.tier] += (cpu - p.cpuLast) / at.Sub(p.cpuAt).Seconds()
		}
		p.cpuLast, p.cpuAt = cpu, at
	}
}

func (s *procSampler) readSelf(ctx context.Context) (map[string]float64, error) {
	mi, err := s.self.MemoryInfoWithContext(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{MetricRSS: float64(mi.RSS), MetricGoroutines: float64(runtime.NumGoroutine())}
	if t, err := s.self.TimesWithContext(ctx); err == nil {
		out[MetricCPU] = t.User + t.System
	}
	return out, nil
}

// readHost reads the machine's busy CPU time, all CPUs together.
func readHost(ctx context.Context) (map[string]float64, error) {
	ts, err := cpu.TimesWithContext(ctx, false)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("%w: no CPU times", ErrMetrics)
	}
	t := ts[0]
	return map[string]float64{MetricCPU: t.User + t.System + t.Nice + t.Irq + t.Softirq + t.Steal}, nil
}

func (s *procSampler) scrape(ctx context.Context, rawURL string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: HTTP %d", ErrMetrics, rawURL, resp.StatusCode)
	}
	return ParseMetrics(io.LimitReader(resp.Body, 8<<20), MetricRSS, MetricGoroutines, MetricCPU)
}

func (s *procSampler) record(p *procState, vals map[string]float64, err error, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		p.Errors++
		p.LastError = err.Error()
		return
	}
	rss, okR := vals[MetricRSS]
	g, okG := vals[MetricGoroutines]
	cpu, okC := vals[MetricCPU]
	if !okR && !okG && !okC {
		p.Errors++
		p.LastError = fmt.Sprintf("none of %s, %s, %s on the page", MetricRSS, MetricGoroutines, MetricCPU)
		return
	}
	first := p.Samples == 0
	p.Samples++
	if okR {
		if first {
			p.RSSStart = rss
		}
		p.RSSEnd = rss
		p.RSSMax = max(p.RSSMax, rss)
		if s.phase != "" {
			p.RSSMaxByPhase[s.phase] = max(p.RSSMaxByPhase[s.phase], rss)
		}
	}
	if okG {
		if first {
			p.GoroutinesStart = g
		}
		p.GoroutinesEnd = g
		p.GoroutinesMax = max(p.GoroutinesMax, g)
	}
	if okC && s.phase != "" {
		sp := p.cpu[s.phase]
		if sp == nil {
			sp = &cpuSpan{firstAt: at, first: cpu}
			p.cpu[s.phase] = sp
		}
		sp.lastAt, sp.last = at, cpu
	}
}

// run samples now and then every interval until ctx ends, then once more
// (with a fresh short context) so the end state is seen. The returned channel
// is closed when it has stopped.
func (s *procSampler) run(ctx context.Context, interval time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.sample(ctx)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				s.sample(fctx)
				cancel()
				return
			case <-t.C:
				s.sample(ctx)
			}
		}
	}()
	return done
}

// report copies what was seen.
func (s *procSampler) report() []ProcessUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ProcessUsage, len(s.procs))
	for i, p := range s.procs {
		out[i] = p.ProcessUsage
		out[i].RSSMaxByPhase = maps.Clone(p.RSSMaxByPhase)
		out[i].CPUCoresByPhase = map[string]float64{}
		for name, sp := range p.cpu {
			if d := sp.lastAt.Sub(sp.firstAt).Seconds(); d > 0 {
				out[i].CPUCoresByPhase[name] = (sp.last - sp.first) / d
			}
		}
	}
	return out
}
