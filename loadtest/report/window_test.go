package report

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/threshold"
)

// windowRun is 20 seconds: 10 ok per second in 0..9 (latency 10 ms), 40
// ok per second in 10..19 (latency 100 ms), phases "calm" [0, 10) and
// "busy" [10, 20).
func windowRun() *Run {
	r := &Run{Meta: Meta{Schema: Schema, Tool: Tool, Phases: []Phase{{Name: "calm", From: 0, To: 10}, {Name: "busy", From: 10, To: 20}}}}
	for s := range 20 {
		n, lat := int64(10), 10*time.Millisecond
		if s >= 10 {
			n, lat = 40, 100*time.Millisecond
		}
		h := record.NewHist()
		for range n {
			h.Record(lat)
		}
		r.Points = append(r.Points, record.Point{T: s, Counters: map[string]int64{"sent": n, "ok": n, "admitted": int64(s)},
			Hists: map[string]*record.Hist{record.HistLat: h}})
	}
	r.Summary = Summarize(r.Points)
	return r
}

func evalOn(t *testing.T, r *Run, s string) threshold.Result {
	t.Helper()
	th, err := threshold.Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return th.Eval(r.Facts())
}

func TestWindows(t *testing.T) {
	r := windowRun()
	for _, tc := range []struct {
		in    string
		value float64
	}{
		{"goodput >= 0", 25},
		{"goodput[busy] >= 0", 40},
		{"goodput[calm] >= 0", 10},
		{"goodput[5s:15s] >= 0", 25},
		{"goodput[15s:] >= 0", 40},   // to the end of the run: 5 seconds
		{"goodput[15s:1h] >= 0", 40}, // past the end: only the seconds the run covered
		{"ok[:10s] >= 0", 100},       // TO is not in
		{"ok[500ms:10s] >= 0", 90},   // FROM rounds up to whole seconds
	} {
		res := evalOn(t, r, tc.in)
		if !res.Passed || math.Abs(res.Value-tc.value) > 1e-9 {
			t.Errorf("%s: value %v passed %v (%s); want %v", tc.in, res.Value, res.Passed, res.Detail, tc.value)
		}
	}
	// Series and quantiles over a window.
	for _, tc := range []struct {
		in    string
		value float64
	}{
		{"avg(admitted)[10s:20s] > 0", 14.5},
		{"median(admitted)[calm] > 0", 4.5},
		{"max(rps)[calm] > 0", 10},
		{"p(99)[calm] > 0", 0.010},
		{"p(99)[busy] > 0", 0.100},
	} {
		res := evalOn(t, r, tc.in)
		if !res.Passed || math.Abs(res.Value-tc.value) > tc.value*0.01 {
			t.Errorf("%s: value %v passed %v (%s); want %v", tc.in, res.Value, res.Passed, res.Detail, tc.value)
		}
	}
	// Both sides windowed: busy's p99 is 10 x calm's.
	if res := evalOn(t, r, "p(99)[busy] <= 3 * p(99)[calm]"); res.Passed {
		t.Errorf("busy p99 within 3 x calm's: %s", res.Detail)
	}
	if res := evalOn(t, r, "p(99)[busy] <= 11 * p(99)[calm]"); !res.Passed {
		t.Errorf("busy p99 not within 11 x calm's: %s", res.Detail)
	}
}

func TestWindowUnknownPhase(t *testing.T) {
	r := windowRun()
	res := evalOn(t, r, "goodput[overload] >= 1")
	if res.Passed || !strings.Contains(res.Detail, `no such phase "overload"; its phases are calm, busy`) {
		t.Errorf("unknown phase: passed %v, detail %q", res.Passed, res.Detail)
	}
	if _, err := r.Facts().(threshold.Windowed).In(threshold.Window{Phase: "nope"}); !errors.Is(err, ErrNoPhase) {
		t.Errorf("In(unknown phase) = %v, want ErrNoPhase", err)
	}
	r.Meta.Phases = nil
	if res := evalOn(t, r, "goodput[busy] >= 1"); res.Passed || !strings.Contains(res.Detail, "names no phases") {
		t.Errorf("no phases: %q", res.Detail)
	}
	// A window with no points has no quantile: the threshold fails.
	if res := evalOn(t, r, "p(99)[1h:2h] < 1s"); res.Passed || !strings.Contains(res.Detail, "no figure for p(99)[1h0m0s:2h0m0s]") {
		t.Errorf("empty window: %q", res.Detail)
	}
}
