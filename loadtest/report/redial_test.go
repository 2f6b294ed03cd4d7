package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/loadtest/record"
)

func hist(ds ...time.Duration) *record.Hist {
	h := record.NewHist()
	for _, d := range ds {
		h.Record(d)
	}
	return h
}

func TestRedialFigures(t *testing.T) {
	for _, tc := range []struct {
		name     string
		counters map[string]int64
		after    *record.Hist
		want     map[string]float64 // NaN: missing
	}{
		{
			name:     "no server close: every figure missing",
			counters: map[string]int64{"sent": 10, "reconnects": 3},
			want: map[string]float64{"reconnect_peak_ratio": math.NaN(), "reconnect_spread": math.NaN(),
				"line_place_kept": math.NaN(), "line_place_lost": math.NaN()},
		},
		{
			name: "spread evenly over 0-5 s, every place kept",
			counters: map[string]int64{"server_closes": 50, "server_closes_in_line": 20, "place_kept": 20,
				"redial_after/0": 10, "redial_after/1": 10, "redial_after/2": 10, "redial_after/3": 10, "redial_after/4": 10},
			after: hist(10*time.Millisecond, 4900*time.Millisecond),
			want: map[string]float64{"reconnect_peak_ratio": 1, "reconnect_spread": 4.9,
				"line_place_kept": 1, "line_place_lost": 0},
		},
		{
			name: "a storm: 40 of 50 in the first second; one place lost, one not told",
			counters: map[string]int64{"server_closes": 50, "server_closes_in_line": 10, "place_kept": 8, "place_lost": 1, "place_unknown": 1,
				"redial_after/0": 40, "redial_after/2": 5, "redial_after/4": 5, "redial_after/x": 99, "redial_after/-1": 99},
			after: hist(4500 * time.Millisecond),
			// 5 seconds 0..4, mean 10, peak 40.
			want: map[string]float64{"reconnect_peak_ratio": 4, "reconnect_spread": 4.5,
				"line_place_kept": 0.8, "line_place_lost": 1},
		},
		{
			name:     "closes but nobody was waiting: the line figures missing; no histogram: spread bounded by the seconds",
			counters: map[string]int64{"server_closes": 3, "redial_after/0": 1, "redial_after/1": 2},
			want: map[string]float64{"reconnect_peak_ratio": 2 / 1.5, "reconnect_spread": 2,
				"line_place_kept": math.NaN(), "line_place_lost": math.NaN()},
		},
		{
			name:     "closed, never redialed",
			counters: map[string]int64{"server_closes": 2, "server_closes_in_line": 2, "redial_none": 2, "place_unknown": 2},
			want: map[string]float64{"reconnect_peak_ratio": math.NaN(), "reconnect_spread": math.NaN(),
				"line_place_kept": 0, "line_place_lost": 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := RedialsOf(tc.counters, tc.after)
			for _, name := range RedialFigures {
				want := tc.want[name]
				got, ok := rd.Figure(name)
				switch {
				case math.IsNaN(want) && ok:
					t.Errorf("%s = %g, want missing", name, got)
				case !math.IsNaN(want) && !ok:
					t.Errorf("%s missing, want %g", name, want)
				case ok && math.Abs(got-want) > 0.01*math.Max(1, want):
					t.Errorf("%s = %g, want %g", name, got, want)
				}
			}
		})
	}
}

// The figures reach thresholds through the run's facts: the counters from
// its summary, the spread from the histograms of its points (two load
// processes' worth merged), and the table shows the histogram.
func TestRedialFactsAndTable(t *testing.T) {
	r := &Run{Meta: Meta{Scenario: "gate-restarted"}}
	for s := range 20 {
		p := record.Point{T: s, Counters: map[string]int64{"sent": 10, "ok": 10}}
		if s == 15 {
			p.Counters["server_closes"] = 6
			p.Counters["server_closes_in_line"] = 2
		}
		if s >= 15 && s < 18 {
			p.Counters["redial_after/"+string(rune('0'+s-15))] = 2
			p.Hists = map[string]*record.Hist{HistRedialAfter: hist(time.Duration(s-15)*time.Second + 700*time.Millisecond)}
		}
		if s == 17 {
			p.Counters["place_kept"] = 2
		}
		r.Points = append(r.Points, p)
	}
	r.Summary = Summarize(r.Points)
	f := r.Facts()
	for name, want := range map[string]float64{"reconnect_peak_ratio": 1, "reconnect_spread": 2.7, "line_place_kept": 1, "line_place_lost": 0} {
		got, ok := f.Value(name)
		if !ok || math.Abs(got-want) > 0.01 {
			t.Errorf("%s = %g (%v), want %g", name, got, ok, want)
		}
	}
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"server closes: 6 (2 waiting in line); first redial within 2.70s", "places in line: 2 kept, 0 lost, 0 not told again"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && strings.Contains(f[0], "-") && f[1] == "2" && strings.HasPrefix(f[2], "#") {
			rows++
		}
	}
	if rows != 3 {
		t.Errorf("%d histogram rows of 2 first redials, want 3:\n%s", rows, out)
	}

	// Without a server close the section is not there.
	quiet := drillRun(nil)
	b.Reset()
	if err := WriteTable(&b, quiet); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "server closes") {
		t.Errorf("a run without server closes shows the section:\n%s", b.String())
	}
}
