package report

import (
	"math"
	"strings"
	"testing"

	"github.com/leveehq/levee/loadtest/probe"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/threshold"
)

// memoryRun is a hold of 1,000 connections: 100 MiB before, the players
// up by second 3, memory growing while they dial and settling at 110 MiB
// (10 MiB for 1,000: 10,485.76 bytes each), one second lacking a sample.
func memoryRun() *Run {
	rss := []float64{101, 104, 108, 112, 111, 110, 110, -1, 110, 109, 110}
	held := []float64{0, 300, 700, 1000, 1000, 995, 1000, 1000, 1000, 1000, 1000}
	r := &Run{}
	for i := range rss {
		p := record.Point{T: i, Levels: map[string]float64{"waiting": held[i] - 10, "connected": 10}}
		if held[i] == 0 {
			p.Levels = map[string]float64{}
		}
		if rss[i] >= 0 {
			p.Levels[probe.ServerRSS] = rss[i]
		}
		r.Points = append(r.Points, p)
	}
	r.Points[0].Levels[probe.ServerRSSBefore] = 100
	return r
}

func TestMemoryFigures(t *testing.T) {
	f := memoryRun().Facts()
	// The hold: seconds 3..10 (995 >= 99 % of 1,000), 7 of them with a
	// sample: 112 111 110 110 110 109 110; its second half (the last 4):
	// 110 110 109 110, median 110.
	for name, want := range map[string]float64{"held": 1000, "rss_before_mb": 100, "rss_held_mb": 110,
		"rss_per_conn": 10 * (1 << 20) / 1000.0} {
		v, ok := f.Value(name)
		if !ok || math.Abs(v-want) > 1e-9 {
			t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
		}
	}
	rs, passed := threshold.EvalAll(mustParse(t, "rss_per_conn < 11000", "held == 1000", "max(server_rss_mb) == 112"), f)
	if !passed {
		t.Fatalf("thresholds: %+v", rs)
	}
}

func TestMemoryFiguresMissing(t *testing.T) {
	r := memoryRun()
	delete(r.Points[0].Levels, probe.ServerRSSBefore)
	f := r.Facts()
	if _, ok := f.Value("rss_per_conn"); ok {
		t.Error("rss_per_conn without a before figure")
	}
	if v, ok := f.Value("rss_held_mb"); !ok || v != 110 {
		t.Errorf("rss_held_mb = %v, %v", v, ok)
	}
	empty := (&Run{Points: []record.Point{{T: 0, Levels: map[string]float64{"waiting": 5}}}}).Facts()
	for _, n := range []string{"rss_before_mb", "rss_held_mb", "rss_per_conn"} {
		if _, ok := empty.Value(n); ok {
			t.Errorf("%s of a run without the pid's levels", n)
		}
	}
}

func mustParse(t *testing.T, ss ...string) []threshold.Threshold {
	t.Helper()
	var out []threshold.Threshold
	for _, s := range ss {
		th, err := threshold.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, th)
	}
	return out
}

func TestMemoryTable(t *testing.T) {
	var b strings.Builder
	if err := WriteTable(&b, memoryRun()); err != nil {
		t.Fatal(err)
	}
	want := "server memory (by pid): 100.0 MiB before the first player, 110.0 MiB with 1000 held (median of the hold's second half): 10.24 KiB per connection"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("table lacks %q:\n%s", want, b.String())
	}
}
