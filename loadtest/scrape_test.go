package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const metricsPage = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
# HELP go_memstats_alloc_bytes Number of bytes allocated in heap and currently in use.
go_memstats_alloc_bytes 1.234e+06
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 2.5726976e+07
process_resident_memory_bytes_total{x="y"} 7
gate_active_connections 200
logic_queue_depth{shard="3"} 17
`

func TestParseMetrics(t *testing.T) {
	got, err := ParseMetrics(strings.NewReader(metricsPage), MetricRSS, MetricGoroutines, "logic_queue_depth", "absent")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[MetricRSS] != 25726976 || got[MetricGoroutines] != 42 {
		t.Fatalf("got %v", got)
	}
	// A timestamp after the value is allowed.
	got, err = ParseMetrics(strings.NewReader("go_goroutines 7 1700000000000\n"), MetricGoroutines)
	if err != nil || got[MetricGoroutines] != 7 {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseMetrics(strings.NewReader("go_goroutines many\n"), MetricGoroutines); !errors.Is(err, ErrMetrics) {
		t.Fatalf("bad value: %v", err)
	}
}

func TestParseMetricsTargets(t *testing.T) {
	ts, err := ParseMetricsTargets([]string{"gate=http://127.0.0.1:8082/metrics", "http://localhost:9000/metrics", "http://[::1]:1/m"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 3 || ts[0].Name != "gate" || ts[0].URL != "http://127.0.0.1:8082/metrics" || ts[1].Name != "localhost:9000" {
		t.Fatalf("targets %+v", ts)
	}
	for _, c := range []struct{ in, want string }{
		{"http://10.0.0.1:9090/metrics", "loopback"},
		{"x=http://8.8.8.8/metrics", "loopback"},
		{"ftp://127.0.0.1/metrics", "scheme"},
		{"http:///metrics", "no host"},
	} {
		if _, err := ParseMetricsTargets([]string{c.in}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.in, err)
		}
	}
	if _, err := ParseMetricsTargets([]string{"a=http://127.0.0.1:1/", "a=http://127.0.0.1:2/"}); err == nil {
		t.Error("a name given twice was accepted")
	}
	// Names resolve to loopback or are refused when the run starts (the
	// rule is target.CheckHTTP's, tested there with names that resolve
	// anywhere).
	mts := []MetricsTarget{{URL: "http://localhost:1/"}, {URL: "http://10.1.2.3:1/"}}
	if err := checkMetricsTargets(context.Background(), mts, net.DefaultResolver); !errors.Is(err, ErrNonLocal) || !strings.Contains(err.Error(), "-metrics-urls") {
		t.Errorf("10.1.2.3: %v, want ErrNonLocal naming -metrics-urls", err)
	}
	if err := checkMetricsTargets(context.Background(), mts[:1], net.DefaultResolver); err != nil {
		t.Errorf("localhost: %v", err)
	}
}

// The sampler keeps the first, last and largest values, per phase the
// largest RSS and the CPU used, and counts failed scrapes.
func TestProcSampler(t *testing.T) {
	var rss, cpuMs atomic.Int64
	rss.Store(100 << 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "go_goroutines 10\nprocess_resident_memory_bytes %d\nprocess_cpu_seconds_total %g\n",
			rss.Load(), float64(cpuMs.Load())/1000)
	}))
	defer srv.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer broken.Close()

	s := newProcSampler([]MetricsTarget{{Name: "gate", URL: srv.URL + "/metrics"}, {Name: "broken", URL: broken.URL}}, false, time.Second)
	now := t0
	s.now = func() time.Time { return now }
	ctx := context.Background()
	s.sample(ctx)
	s.setPhase(PhaseOverload)
	rss.Store(300 << 20)
	cpuMs.Store(10_000)
	now = now.Add(time.Second)
	s.sample(ctx)
	rss.Store(250 << 20)
	cpuMs.Store(13_000) // 3 CPU seconds in 2 s
	now = now.Add(2 * time.Second)
	s.sample(ctx)
	s.setPhase("")
	rss.Store(200 << 20)
	now = now.Add(time.Second)
	s.sample(ctx)

	procs := s.report()
	g, b, self, host := procs[0], procs[1], procs[2], procs[3]
	if host.Name != HostName || host.Samples != 4 || host.Errors != 0 {
		t.Fatalf("host %+v", host)
	}
	if g.Samples != 4 || g.RSSStart != 100<<20 || g.RSSMax != 300<<20 || g.RSSEnd != 200<<20 ||
		g.RSSMaxByPhase[PhaseOverload] != 300<<20 || g.GoroutinesMax != 10 || g.Errors != 0 {
		t.Fatalf("gate %+v", g)
	}
	if len(g.CPUCoresByPhase) != 1 || g.CPUCoresByPhase[PhaseOverload] != 1.5 {
		t.Fatalf("gate cpu %v", g.CPUCoresByPhase)
	}
	if b.Samples != 0 || b.Errors != 4 || !strings.Contains(b.LastError, "500") {
		t.Fatalf("broken %+v", b)
	}
	if self.Name != SelfName || self.Samples != 4 || self.RSSMax <= 0 || self.GoroutinesMax < 1 {
		t.Fatalf("self %+v", self)
	}
	if _, ok := self.CPUCoresByPhase[PhaseOverload]; !ok {
		t.Fatalf("self cpu %v", self.CPUCoresByPhase)
	}
}
