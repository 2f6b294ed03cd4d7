package arrival

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestReadCSV(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want []Point
	}{
		"seconds with header": {"time,players\n0,200\n60,5000\n90.5,6000\n", []Point{{0, 200}, {time.Minute, 5000}, {90500 * time.Millisecond, 6000}}},
		"no header":           {"0,1\n1,2\n", []Point{{0, 1}, {time.Second, 2}}},
		"durations, relative": {"30s,1\n1m,2\n90,3\n", []Point{{0, 1}, {30 * time.Second, 2}, {time.Minute, 3}}},
		"rfc3339":             {"timestamp,value\n2025-11-14T17:55:00Z,200\n2025-11-14T17:56:00.5Z,900\n", []Point{{0, 200}, {60500 * time.Millisecond, 900}}},
		"comments, blanks":    {"# export\n\ntime, players\n 0 , 5 \n\n10,6\n", []Point{{0, 5}, {10 * time.Second, 6}}},
	} {
		c, err := ReadCSV(strings.NewReader(tc.in))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := c.Points(); fmt.Sprint(got) != fmt.Sprint(tc.want) || c.Kind() != Players {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestReadCSVErrors(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"empty":        {"", "no rows"},
		"header only":  {"time,players\n", "no rows"},
		"bad time":     {"time,players\n0,1\n1,2\nx,3\n", `row 4: time "x" is not a number, duration or RFC 3339 time`},
		"bad first":    {"x,200\n", `row 1: time "x" is not a number, duration or RFC 3339 time`},
		"bad value":    {"0,1\n5,many\n", `row 2: players "many" is not a number >= 0`},
		"negative":     {"0,1\n5,-3\n", `row 2: players "-3"`},
		"nan":          {"0,1\n5,NaN\n", `row 2: players "NaN"`},
		"fields":       {"0,1\n5,2,3\n", "row 2: want 2 fields (time,players), got 3"},
		"not after":    {"0,1\n5,2\n5,3\n", `row 3: time "5" is not after the row before`},
		"backwards":    {"10s,1\n5s,2\n", `row 2: time "5s" is not after`},
		"mixed":        {"0,1\n2025-11-14T17:55:00Z,2\n", "row 2: time \"2025-11-14T17:55:00Z\" mixes RFC 3339"},
		"quote":        {"0,1\n\"5,2\n", "row 2"},
		"huge seconds": {"0,1\n1e300,2\n", `row 2: time "1e300"`},
	} {
		_, err := ReadCSV(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrCurve) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
}

func TestReadPrometheus(t *testing.T) {
	in := `{"status":"success","data":{"resultType":"matrix","result":[
	  {"metric":{"instance":"gate-0"},"values":[[1763142900,"100"],[1763142915.000,"150"],[1763142930,"200"]]},
	  {"metric":{"instance":"gate-1"},"values":[[1763142900,"50"],[1763142915,"60.5"]]}]}}`
	c, err := ReadPrometheus(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Point{{0, 150}, {15 * time.Second, 210.5}, {30 * time.Second, 200}}
	if got := c.Points(); fmt.Sprint(got) != fmt.Sprint(want) || c.Kind() != Players {
		t.Fatalf("%v, want %v", got, want)
	}
}

func TestReadPrometheusErrors(t *testing.T) {
	ok := func(values string) string {
		return `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":` + values + `}]}}`
	}
	for name, tc := range map[string]struct{ in, want string }{
		"not json":    {"time,players\n", "not a Prometheus query_range answer"},
		"truncated":   {`{"status":"success","data":{"resultType":"matrix","result":[`, "not a Prometheus query_range answer"},
		"error":       {`{"status":"error","errorType":"bad_data","error":"parse error at char 5"}`, `status "error", want "success" (parse error at char 5)`},
		"no data":     {`{"status":"success"}`, `no "data"`},
		"vector":      {`{"status":"success","data":{"resultType":"vector","result":[]}}`, `data.resultType "vector", want "matrix"`},
		"no series":   {`{"status":"success","data":{"resultType":"matrix","result":[]}}`, "the query matched no series"},
		"no values":   {ok(`[]`), "the series have no values"},
		"pair":        {ok(`[[1,"2",3]]`), "data.result[0].values[0]: want [unix_time, \"value\"], got 3 elements"},
		"time":        {ok(`[[1,"2"],["x","3"]]`), `data.result[0].values[1]: time "x" is not a unix time`},
		"value type":  {ok(`[[1,2]]`), "data.result[0].values[0]: value 2 is not a string"},
		"value":       {ok(`[[1,"NaN"]]`), `data.result[0].values[0]: value "NaN" is not a number >= 0`},
		"negative":    {ok(`[[1,"-1"]]`), `value "-1"`},
		"wrong shape": {`{"status":"success","data":{"resultType":"matrix","result":{"a":1}}}`, "not a Prometheus query_range answer"},
	} {
		_, err := ReadPrometheus(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrCurve) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
}

// TestReplayExamples reads the example files of loadtest/scenarios: both
// are the same launch day (the seed's curve, a little noise), one from a
// CSV export, one from Prometheus (three gates summed).
func TestReplayExamples(t *testing.T) {
	fromCSV, err := ReadCSV(mustOpen(t, "../scenarios/examples/last-launch.csv"))
	if err != nil {
		t.Fatal(err)
	}
	fromProm, err := ReadPrometheus(mustOpen(t, "../scenarios/examples/last-launch-prometheus.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Curve{"csv": fromCSV, "prometheus": fromProm} {
		if c.End() != 20*time.Minute {
			t.Errorf("%s: End %v", name, c.End())
		}
		if p := c.Peak(); p < 78000 || p > 84000 {
			t.Errorf("%s: Peak %v", name, p)
		}
		for _, at := range []struct {
			t    time.Duration
			want float64
		}{{0, 200}, {2 * time.Minute, 5000}, {5 * time.Minute, 30000}, {10 * time.Minute, 80000}} {
			if got := c.At(at.t); math.Abs(got-at.want) > 0.04*at.want {
				t.Errorf("%s: At(%v) = %v, want about %v", name, at.t, got, at.want)
			}
		}
		// Replayed at a tenth of the size, twice as fast.
		w := c.Scale(0.1, 2)
		if w.End() != 10*time.Minute || math.Abs(w.At(5*time.Minute)-c.At(10*time.Minute)*0.1) > 1e-6 {
			t.Errorf("%s: scaled End %v At(5m) %v", name, w.End(), w.At(5*time.Minute))
		}
		k := c.Peak() * 0.1 / 2
		at, ok := w.ArrivalTime(k)
		if !ok || w.Arrivals(at) < k-1e-6 || at <= 0 || at >= 5*time.Minute {
			t.Errorf("%s: ArrivalTime(%v) = %v %v", name, k, at, ok)
		}
	}
}
