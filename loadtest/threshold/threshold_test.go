package threshold

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// facts is a fake run.
type facts struct {
	scalars map[string]float64
	series  map[string][]float64
	lat     map[float64]float64 // q -> seconds
}

func (f facts) Value(n string) (float64, bool) { v, ok := f.scalars[n]; return v, ok }

func (f facts) Series(n string) ([]float64, bool) { v, ok := f.series[n]; return v, ok }

func (f facts) Quantile(q float64) (float64, bool) { v, ok := f.lat[q]; return v, ok }

var nan = math.NaN()

func run() facts {
	return facts{
		scalars: map[string]float64{"sent": 1000, "error_rate": 0.004, "lost_replies": 0, "admitted": 500, "arrived": 500,
			"goodput": 950, "capacity": 1000, "failed": 3, "max_wait": 42.5, "refused_rate": 0.0},
		series: map[string][]float64{
			"logic_queue_depth": {nan, 10, 250, nan, 499, 30},
			"cpu":               {0.2, 0.79, nan, 0.5},
			"waiting":           {nan, nan},
			"p99":               {0.1, 0.2, 0.3, nan},
		},
		lat: map[float64]float64{0.99: 0.5, 0.5: 0.0123},
	}
}

func TestEval(t *testing.T) {
	f := run()
	for _, tc := range []struct {
		in           string
		pass         bool
		value, limit float64
		detail       string
	}{
		{"p(99) < 500ms", false, 0.5, 0.5, "p(99) = 500ms, want < 500ms"}, // boundary
		{"p(99) <= 500ms", true, 0.5, 0.5, ""},
		{"p(99) < 0.5001s", true, 0.5, 0.5001, ""},
		{"p(50) < 20ms", true, 0.0123, 0.02, "p(50) = 12.3ms, want < 20ms"},
		{"p(99)<1s", true, 0.5, 1, ""},
		{"error_rate < 0.01", true, 0.004, 0.01, "error_rate = 0.004, want < 0.01"},
		{"error_rate < 0.4%", false, 0.004, 0.004, ""},
		{"error_rate <= 0.4%", true, 0.004, 0.004, ""},
		{"lost_replies == 0", true, 0, 0, ""},
		{"lost_replies != 0", false, 0, 0, ""},
		{"failed > 2", true, 3, 2, ""},
		{"failed >= 4", false, 3, 4, ""},
		{"max(logic_queue_depth) < 500", true, 499, 500, "max(logic_queue_depth) = 499, want < 500"},
		{"max(logic_queue_depth) < 499", false, 499, 499, ""},
		{"min(logic_queue_depth) == 10", true, 10, 10, ""},
		{"avg(logic_queue_depth) == 197.25", true, 197.25, 197.25, ""},
		{"last(logic_queue_depth) == 30", true, 30, 30, ""},
		{"last(p99) == 0.3", true, 0.3, 0.3, ""}, // NaN at the end skipped
		{"max(cpu) < 0.8", true, 0.79, 0.8, ""},
		{"max(p99) < 250ms", false, 0.3, 0.25, "max(p99) = 300ms, want < 250ms"},
		{"admitted == arrived", true, 500, 500, "admitted = 500, want == 500 (arrived)"},
		{"goodput >= 0.9 * capacity", true, 950, 900, "goodput = 950, want >= 900 (0.9 * capacity)"},
		{"goodput >= 0.96*capacity", false, 950, 960, ""},
		{"max_wait < 1m", true, 42.5, 60, "max_wait = 42.5s, want < 1m0s"},
		{"max_wait < 2 * max(p99)", false, 42.5, 0.6, ""},
		{"refused_rate == 0", true, 0, 0, ""},
	} {
		th, err := Parse(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		r := th.Eval(f)
		if r.Passed != tc.pass || !near(r.Value, tc.value) || !near(r.Limit, tc.limit) || (tc.detail != "" && r.Detail != tc.detail) {
			t.Errorf("%q: %+v, want pass %v value %v limit %v detail %q", tc.in, r, tc.pass, tc.value, tc.limit, tc.detail)
		}
		if r.Threshold != th.String() {
			t.Errorf("%q: Result.Threshold %q", tc.in, r.Threshold)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestMissing(t *testing.T) {
	f := run()
	for in, want := range map[string]string{
		"ok > 0":                       "no figure for ok",
		"max(waiting) == 0":            "no figure for max(waiting)", // all NaN
		"max(rss_gate_mb) < 100":       "no figure for max(rss_gate_mb)",
		"p(90) < 1s":                   "no figure for p(90)",
		"admitted >= 0.5 * reconnects": "no figure for reconnects",
	} {
		r := mustParse(t, in).Eval(f)
		if r.Passed || r.Detail != want || r.Value != 0 || r.Limit != 0 {
			t.Errorf("%q: %+v, want failed with %q", in, r, want)
		}
	}
	// A NaN scalar counts as missing, not as a comparison that fails silently.
	f.scalars["error_rate"] = nan
	if r := mustParse(t, "error_rate < 0.01").Eval(f); r.Passed || r.Detail != "no figure for error_rate" {
		t.Errorf("NaN scalar: %+v", r)
	}
	if r := (Threshold{}).Eval(f); r.Passed {
		t.Error("the zero Threshold passed")
	}
}

func mustParse(t *testing.T, s string) Threshold {
	t.Helper()
	th, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func TestUnits(t *testing.T) {
	for in, want := range map[string]float64{
		"p(99) < 500ms": 0.5, "p(99) < 2s": 2, "p(99) < 1m": 60, "p(99) < 1h": 3600, "p(99) < 250us": 0.00025,
		"p(99) < 250µs": 0.00025, "error_rate < 95%": 0.95, "error_rate < 1e-3": 0.001, "error_rate < .5": 0.5,
		"failed > -1": -1, "p(99) < 1.5s": 1.5,
	} {
		th := mustParse(t, in)
		if th.rhs.factor != want {
			t.Errorf("%q: limit %v, want %v", in, th.rhs.factor, want)
		}
	}
}

func TestStringNames(t *testing.T) {
	for in, want := range map[string]struct {
		s     string
		names []string
	}{
		"p(99)<500ms":             {"p(99) < 500ms", []string{"p(99)"}},
		"  max( cpu ) <   0.8 ":   {"max(cpu) < 0.8", []string{"cpu"}},
		"goodput>=0.9*capacity":   {"goodput >= 0.9 * capacity", []string{"goodput", "capacity"}},
		"admitted == arrived":     {"admitted == arrived", []string{"admitted", "arrived"}},
		"max(p99) < 2 * max(p99)": {"max(p99) < 2 * max(p99)", []string{"p99"}},
		"error_rate < 1%":         {"error_rate < 1%", []string{"error_rate"}},
		"max_wait < p(99.9)":      {"max_wait < p(99.9)", []string{"max_wait", "p(99.9)"}},
	} {
		th := mustParse(t, in)
		if th.String() != want.s || !slices.Equal(th.Names(), want.names) {
			t.Errorf("%q: String %q Names %v, want %q %v", in, th.String(), th.Names(), want.s, want.names)
		}
		// The canonical form parses to the same threshold.
		if again := mustParse(t, th.String()); again != th {
			t.Errorf("%q: reparsed %+v != %+v", in, again, th)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                             "empty",
		"p(99)":                        "no comparison after p(99)",
		"p(99) ~ 5":                    `want a comparison (< <= > >= == !=) after p(99), got "~ 5"`,
		"p(99) <":                      "nothing after the comparison",
		"p(99) < 500 ms":               `unexpected "ms" at the end`,
		"p(99) < 500xs":                `unknown unit "xs" in "500xs"`,
		"p(0) < 1s":                    `p(N): N must be a number in (0, 100], got "0"`,
		"p(101) < 1s":                  `got "101"`,
		"p(x) < 1s":                    `p(N): "x" is not a number`,
		"p(99 < 1s":                    "want ) after p(",
		"latency < 1s":                 `unknown figure "latency"; the figures are p(N), sent, answered`,
		"cpu < 0.8":                    "cpu is a per-second series: use max(cpu)",
		"max(cpus) < 0.8":              `unknown series "cpus" in max(); the series are connected, waiting`,
		"mean(cpu) < 0.8":              `unknown function "mean"; want p(N) or one of max, min, avg, median, last`,
		"goodput >= 0.9 * capacty":     `unknown figure "capacty"`,
		"goodput >= 0.9s * capacity":   `a factor has no unit, got "0.9s"`,
		"goodput >= 0.9 *":             "want a figure",
		"< 5":                          `want a figure (e.g. p(99), error_rate, max(cpu)), got "< 5"`,
		"error_rate < 1..2":            `"1..2" is not a number`,
		"error_rate < 1e999":           `"1e999" is not a number`,
		"error_rate < 0.01 and ok > 0": `unexpected "and ok > 0" at the end`,
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}

func TestEvalAll(t *testing.T) {
	f := run()
	ts := []Threshold{mustParse(t, "p(99) <= 500ms"), mustParse(t, "lost_replies == 0")}
	rs, ok := EvalAll(ts, f)
	if !ok || len(rs) != 2 || !rs[0].Passed || !rs[1].Passed {
		t.Fatalf("%+v %v", rs, ok)
	}
	rs, ok = EvalAll(append(ts, mustParse(t, "ok > 0")), f)
	if ok || len(rs) != 3 || rs[2].Passed {
		t.Fatalf("%+v %v", rs, ok)
	}
	if _, ok := EvalAll(nil, f); !ok {
		t.Fatal("no thresholds failed")
	}
}

func TestWindowSyntax(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"avg(admitted)[10s:40s] >= 90", "avg(admitted)[10s:40s] >= 90"},
		{"avg(admitted) [ 10s : 40s ] >= 90", "avg(admitted)[10s:40s] >= 90"},
		{"goodput[overload] >= 0.9 * capacity", "goodput[overload] >= 0.9 * capacity"},
		{"p(99)[overload] <= 3 * p(99)[baseline]", "p(99)[overload] <= 3 * p(99)[baseline]"},
		{"median(cpu_gate)[:1m] < 0.5", "median(cpu_gate)[:1m0s] < 0.5"},
		{"max(rps)[1m30s:] > 0", "max(rps)[1m30s:] > 0"},
		{"ok[search-1] > 0", "ok[search-1] > 0"},
	} {
		th, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := th.String(); got != tc.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, msg string }{
		{"goodput[] > 0", "empty window"},
		{"goodput[10s:5s] > 0", "TO (5s) must be after FROM (10s)"},
		{"goodput[ten:] > 0", `FROM "ten" is not a duration`},
		{"goodput[:-1s] > 0", "TO must be >= 0"},
		{"goodput[:] > 0", "whole run"},
		{"goodput[a b] > 0", `"a b" is not a phase name`},
		{"goodput[10s > 0", "want ] after the window"},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want an ErrSyntax containing %q", tc.in, err, tc.msg)
		}
	}
}

func TestMedian(t *testing.T) {
	f := run()
	for _, tc := range []struct {
		in    string
		value float64
	}{
		{"median(logic_queue_depth) > 0", 140}, // 10, 30, 250, 499
		{"median(cpu) > 0", 0.5},               // 0.2, 0.5, 0.79
	} {
		th, err := Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if res := th.Eval(f); math.Abs(res.Value-tc.value) > 1e-9 {
			t.Errorf("%s = %v, want %v", tc.in, res.Value, tc.value)
		}
	}
	if _, ok := median([]float64{nan, nan}); ok {
		t.Error("median of no samples is ok")
	}
}

// Facts that cannot be windowed make a windowed threshold fail, saying so.
func TestWindowNeedsWindowedFacts(t *testing.T) {
	th, err := Parse("goodput[10s:20s] > 1")
	if err != nil {
		t.Fatal(err)
	}
	res := th.Eval(run())
	if res.Passed || !strings.Contains(res.Detail, "cannot be read over a window") {
		t.Errorf("windowed on plain facts: %+v", res)
	}
}
