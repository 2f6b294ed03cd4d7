package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/testwait"
	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/scenario"
	"github.com/leveehq/levee/loadtest/target"
	"github.com/leveehq/levee/loadtest/threshold"
)

// The operator's timeline: each step goes to every gate's admin API at its
// time, with the rate scaled; a step whose condition fails on the last
// minute is skipped and says why.
func TestTimeline(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		bodies = append(bodies, m)
		mu.Unlock()
	}))
	defer srv.Close()
	cond, err := threshold.Parse("max(logic_queue_depth) < 400")
	if err != nil {
		t.Fatal(err)
	}
	p := &plan{speed: 5, t0: time.Minute, timeline: []step{
		{at: 0, label: "T-5:00", mode: "queueing"},
		{at: time.Minute, label: "T+0:00", mode: "paced", rate: 100, interval: 2 * time.Second},
		{at: 2 * time.Minute, label: "T+5:00", mode: "paced", rate: 200, interval: 2 * time.Second,
			sc: scenario.Action{Conds: []threshold.Threshold{cond}}},
	}}
	tl := newTimeline(p, []string{srv.URL, srv.URL}, "tok", target.HTTPClient(5*time.Second, false), nil, nil)
	ctx := context.Background()
	// A step's event comes from poll when it finished in time, else from
	// finish: take both.
	evs := tl.poll(ctx, 0, nil)
	evs = append(evs, tl.finish()...)
	if len(evs) != 1 || !strings.Contains(evs[0].What, "mode queueing (2 gates)") {
		t.Fatalf("first step: %+v", evs)
	}
	if evs := tl.poll(ctx, 59*time.Second, nil); len(evs) != 0 {
		t.Fatalf("a step ran early: %v", evs)
	}
	evs = tl.poll(ctx, time.Minute, nil)
	if evs = append(evs, tl.finish()...); len(evs) != 1 || !strings.Contains(evs[0].What, "100 per 2s") || !strings.Contains(evs[0].What, "50 each") {
		t.Fatalf("second step: %+v", evs)
	}
	// The last 12 wall seconds (a scenario minute at speed 5) had a queue
	// of 450: not healthy.
	var pts []record.Point
	for i := range 30 {
		q := 10.0
		if i >= 20 {
			q = 450
		}
		pts = append(pts, record.Point{T: i, Levels: map[string]float64{"logic_queue_depth": q}})
	}
	evs = tl.poll(ctx, 2*time.Minute, pts)
	if len(evs) != 1 || !strings.Contains(evs[0].What, "skipped, not healthy: max(logic_queue_depth) < 400") {
		t.Fatalf("third step: %+v", evs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 4 {
		t.Fatalf("%d admin calls, want 4 (2 steps x 2 gates): %v", len(bodies), bodies)
	}
	// The release rate is the cluster's: each of the 2 gates gets half.
	if bodies[2]["mode"] != "paced" || bodies[2]["rate"] != float64(50) || bodies[2]["interval"] != "2s" {
		t.Errorf("paced body = %v, want rate 50 (100 over 2 gates)", bodies[2])
	}
}

// A gate that refuses the change is reported, not hidden.
func TestTimelineReportsFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad mode", http.StatusBadRequest)
	}))
	defer srv.Close()
	p := &plan{speed: 1, timeline: []step{{at: 0, label: "0:00", mode: "open"}}}
	tl := newTimeline(p, []string{srv.URL}, "", target.HTTPClient(5*time.Second, false), nil, nil)
	evs := tl.poll(context.Background(), 0, nil)
	evs = append(evs, tl.finish()...)
	if len(evs) != 1 || !strings.Contains(evs[0].What, "failed on 1 of 1 gates") || !strings.Contains(evs[0].What, "bad mode") {
		t.Fatalf("events: %+v", evs)
	}
}

func TestPerGate(t *testing.T) {
	for _, c := range []struct{ rate, n, want int }{{100, 1, 100}, {100, 5, 20}, {1000, 3, 333}, {2, 5, 1}, {0, 5, 0}} {
		if got := perGate(c.rate, c.n); got != c.want {
			t.Errorf("perGate(%d, %d) = %d, want %d", c.rate, c.n, got, c.want)
		}
	}
}

// A fault step runs off the caller's goroutine: its start is an event at
// once, what the injector emits is an event at the time it did, and the
// end is an event at the step's time that lasts until the fault was over.
// Without an injector the step is skipped and says how to get one.
func TestTimelineFaults(t *testing.T) {
	kill := fault.Fault{Do: fault.Kill, Target: "battle-1"}
	pause := fault.Fault{Do: fault.Pause, Target: "battle-1", For: 4 * time.Second}
	p := &plan{speed: 1, timeline: []step{
		{at: 10 * time.Second, label: "0:10", fault: &kill, note: "crash"},
		{at: 20 * time.Second, label: "0:20", fault: &pause},
	}}
	var mu sync.Mutex
	now := 10 * time.Second
	since := func() time.Duration { mu.Lock(); defer mu.Unlock(); return now }
	release := make(chan struct{})
	var got []fault.Fault
	inj := fault.Func(func(ctx context.Context, f fault.Fault, emit func(string)) error {
		mu.Lock()
		got = append(got, f)
		now += 3 * time.Second
		mu.Unlock()
		emit(f.Target + " back (healthy) after 3.0 s")
		if f.Do == fault.Pause {
			<-ctx.Done()
			return ctx.Err()
		}
		<-release
		return nil
	})
	tl := newTimeline(p, nil, "", nil, inj, since)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := tl.poll(ctx, 10*time.Second, nil)
	if len(evs) == 0 || evs[0] != (report.Event{T: 10, Kind: report.EventFault, What: "0:10 fault kill battle-1 (crash)"}) {
		t.Fatalf("start: %+v", evs)
	}
	testwait.Until(t, "the kill's message", func() bool {
		evs = append(evs, tl.poll(ctx, 10*time.Second, nil)...)
		return len(evs) >= 2
	})
	if evs[1] != (report.Event{T: 13, Kind: report.EventFault, What: "0:10 kill battle-1: battle-1 back (healthy) after 3.0 s"}) {
		t.Errorf("message: %+v", evs[1])
	}
	close(release)
	// The kill is over before the pause starts (the injector moves the
	// clock on at each call, so the kill's end must be read first).
	testwait.Until(t, "the kill's end", func() bool {
		evs = append(evs, tl.poll(ctx, 10*time.Second, nil)...)
		return slices.ContainsFunc(evs, func(e report.Event) bool { return e.End > 0 })
	})
	evs = append(evs, tl.poll(ctx, 20*time.Second, nil)...)
	testwait.Until(t, "the pause to start", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	cancel() // the run is stopped: the pause is cut short
	evs = append(evs, tl.finish()...)
	var ends []report.Event
	for _, e := range evs {
		if e.End > 0 {
			ends = append(ends, e)
		}
	}
	if len(ends) != 2 || ends[0] != (report.Event{T: 10, End: 13, Kind: report.EventFault, What: "0:10 fault kill battle-1 (crash): over after 3.0 s"}) ||
		ends[1].T != 20 || !strings.Contains(ends[1].What, "0:20 fault pause battle-1 for 4s: cut short") {
		t.Errorf("ends: %+v", ends)
	}

	// No injector: skipped, and says so.
	tl = newTimeline(&plan{speed: 1, timeline: []step{{at: 0, label: "0:00", fault: &kill}}}, nil, "", nil, nil, since)
	evs = append(tl.poll(context.Background(), 0, nil), tl.finish()...)
	if len(evs) != 1 || evs[0].Kind != report.EventFault || !strings.HasSuffix(evs[0].What, ": skipped, "+NoInjector) {
		t.Errorf("no injector: %+v", evs)
	}
}

// An https admin API (a gate with -tls-cert) is called trusting the run's
// CA, as the bots and the probe trust it; without it the call fails.
func TestTimelineAdminOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	p := &plan{speed: 1, timeline: []step{{at: 0, label: "T-5:00", mode: "queueing"}}}
	run := func(cfg *tls.Config) string {
		tl := newTimeline(p, []string{srv.URL}, "tok", target.HTTPSClient(5*time.Second, false, cfg), nil, nil)
		evs := append(tl.poll(context.Background(), 0, nil), tl.finish()...)
		if len(evs) != 1 {
			t.Fatalf("events %+v", evs)
		}
		return evs[0].What
	}
	if what := run(nil); !strings.Contains(what, "failed") {
		t.Fatalf("without the CA: %q", what)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	if what := run(&tls.Config{RootCAs: pool}); strings.Contains(what, "failed") || !strings.Contains(what, "mode queueing") {
		t.Fatalf("with the CA: %q", what)
	}
}
