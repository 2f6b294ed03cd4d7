package engine

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"levee/loadtest/record"
	"levee/loadtest/scenario"
	"levee/loadtest/threshold"
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
	tl := newTimeline(p, []string{srv.URL, srv.URL}, "tok", false)
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
	tl := newTimeline(p, []string{srv.URL}, "", false)
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
