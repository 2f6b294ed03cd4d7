package arrival

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ReadCSV reads a curve of players present from "time,players" rows. A
// header row is allowed (a first row whose fields are neither a time nor a
// number, e.g. "time,players"); so are blank lines and lines starting with
// '#'. The time is seconds as a float ("90", "90.5"), a Go duration ("90s",
// "1m30s") or an RFC 3339 time ("2025-03-01T18:00:00Z"); the first row's
// form says which (the first two may be mixed, not with the third), and
// times are taken relative to the first row's. Errors name the line of the
// file as "row N".
func ReadCSV(r io.Reader) (Curve, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	var (
		pts      []Point
		first    time.Duration // relative form: the first row's time
		firstAbs time.Time     // RFC 3339 form
		absolute bool
		rows     int
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return Curve{}, fmt.Errorf("%w: row %d: %v", ErrCurve, pe.Line, pe.Err)
			}
			return Curve{}, fmt.Errorf("%w: %v", ErrCurve, err)
		}
		line, _ := cr.FieldPos(0)
		rows++
		if len(rec) != 2 {
			return Curve{}, fmt.Errorf("%w: row %d: want 2 fields (time,players), got %d", ErrCurve, line, len(rec))
		}
		ts, vs := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		rel, abs, form := parseTime(ts)
		v, verr := strconv.ParseFloat(vs, 64)
		if rows == 1 && form == 0 && verr != nil {
			rows = 0 // a header
			continue
		}
		if form == 0 {
			return Curve{}, fmt.Errorf("%w: row %d: time %q is not a number, duration or RFC 3339 time", ErrCurve, line, ts)
		}
		if verr != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return Curve{}, fmt.Errorf("%w: row %d: players %q is not a number >= 0", ErrCurve, line, vs)
		}
		if len(pts) >= MaxPoints {
			return Curve{}, fmt.Errorf("%w: row %d: more than %d rows", ErrCurve, line, MaxPoints)
		}
		var t time.Duration
		switch {
		case len(pts) == 0:
			absolute = form == formAbsolute
			first, firstAbs = rel, abs
		case absolute != (form == formAbsolute):
			return Curve{}, fmt.Errorf("%w: row %d: time %q mixes RFC 3339 times with offsets", ErrCurve, line, ts)
		case absolute:
			t = abs.Sub(firstAbs)
		default:
			t = rel - first
		}
		if n := len(pts); n > 0 && t <= pts[n-1].T {
			return Curve{}, fmt.Errorf("%w: row %d: time %q is not after the row before", ErrCurve, line, ts)
		}
		pts = append(pts, Point{t, v})
	}
	if len(pts) == 0 {
		return Curve{}, fmt.Errorf("%w: no rows", ErrCurve)
	}
	return newCurve(Players, pts)
}

const (
	formRelative = 1 + iota
	formAbsolute
)

// parseTime reads a CSV time: seconds, a duration, or RFC 3339; form 0
// when it is none.
func parseTime(s string) (rel time.Duration, abs time.Time, form int) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > maxSeconds {
			return 0, time.Time{}, 0
		}
		return time.Duration(math.Round(f * 1e9)), time.Time{}, formRelative
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, time.Time{}, formRelative
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return 0, t, formAbsolute
	}
	return 0, time.Time{}, 0
}

// maxSeconds keeps times well inside time.Duration (about 292 years).
const maxSeconds = 100 * 365 * 24 * 3600

// ReadPrometheus reads a curve of players present from a Prometheus
// /api/v1/query_range answer (resultType matrix, values
// [[unix_ts, "v"], ...]), e.g. of sum(gate_active_connections) or of the
// metric per gate: all series are summed per timestamp (a series without a
// sample at a timestamp adds nothing to it). Timestamps are taken to the
// millisecond and relative to the first one.
func ReadPrometheus(r io.Reader) (Curve, error) {
	var doc struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   *struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string   `json:"metric"`
				Values [][]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	dec := json.NewDecoder(r)
	if err := dec.Decode(&doc); err != nil {
		return Curve{}, fmt.Errorf("%w: not a Prometheus query_range answer: %v", ErrCurve, err)
	}
	switch {
	case doc.Status != "success":
		msg := doc.Error
		if msg == "" {
			msg = "no error given"
		}
		return Curve{}, fmt.Errorf("%w: status %q, want \"success\" (%s)", ErrCurve, doc.Status, msg)
	case doc.Data == nil:
		return Curve{}, fmt.Errorf("%w: no \"data\"", ErrCurve)
	case doc.Data.ResultType != "matrix":
		return Curve{}, fmt.Errorf("%w: data.resultType %q, want \"matrix\" (a query_range answer)", ErrCurve, doc.Data.ResultType)
	case len(doc.Data.Result) == 0:
		return Curve{}, fmt.Errorf("%w: data.result is empty: the query matched no series", ErrCurve)
	}
	sum := map[int64]float64{}
	for i, series := range doc.Data.Result {
		for j, pair := range series.Values {
			where := fmt.Sprintf("data.result[%d].values[%d]", i, j)
			if len(pair) != 2 {
				return Curve{}, fmt.Errorf("%w: %s: want [unix_time, \"value\"], got %d elements", ErrCurve, where, len(pair))
			}
			var ts float64
			if err := json.Unmarshal(pair[0], &ts); err != nil || math.IsNaN(ts) || math.Abs(ts) > 1e12 {
				return Curve{}, fmt.Errorf("%w: %s: time %s is not a unix time", ErrCurve, where, pair[0])
			}
			var vs string
			if err := json.Unmarshal(pair[1], &vs); err != nil {
				return Curve{}, fmt.Errorf("%w: %s: value %s is not a string like \"123\"", ErrCurve, where, pair[1])
			}
			v, err := strconv.ParseFloat(vs, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return Curve{}, fmt.Errorf("%w: %s: value %q is not a number >= 0", ErrCurve, where, vs)
			}
			ms := int64(math.Round(ts * 1000))
			if _, ok := sum[ms]; !ok && len(sum) >= MaxPoints {
				return Curve{}, fmt.Errorf("%w: %s: more than %d timestamps", ErrCurve, where, MaxPoints)
			}
			sum[ms] += v
		}
	}
	if len(sum) == 0 {
		return Curve{}, fmt.Errorf("%w: the series have no values", ErrCurve)
	}
	keys := make([]int64, 0, len(sum))
	for k := range sum {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	pts := make([]Point, len(keys))
	for i, k := range keys {
		pts[i] = Point{T: time.Duration(k-keys[0]) * time.Millisecond, V: sum[k]}
	}
	return newCurve(Players, pts)
}
