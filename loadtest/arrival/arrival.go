// Package arrival describes how players arrive during a load test: a
// piecewise linear curve, in scenario time, of players present (Players)
// or of arrivals per second (Rate), built from phases, a CSV file or a
// Prometheus query_range answer. It is pure: every question takes the time.
//
// The engine asks Arrivals(t) (how many players are due by t) and
// ArrivalTime(k) (when the k-th is due), on a curve first put in wall time
// with Scale.
package arrival

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// Kind says what a curve's values are.
type Kind uint8

const (
	// Players: the number of players present.
	Players Kind = iota + 1
	// Rate: arrivals per second.
	Rate
)

func (k Kind) String() string {
	switch k {
	case Players:
		return "players"
	case Rate:
		return "rate"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MaxPoints bounds a curve's points.
const MaxPoints = 1_000_000

// ErrCurve is wrapped by every error of this package.
var ErrCurve = errors.New("arrival")

// Step is one phase: the curve goes linearly from the previous value to
// Value over Duration.
type Step struct {
	Duration time.Duration
	Value    float64
}

// Point is one corner of a curve: value V at time T.
type Point struct {
	T time.Duration
	V float64
}

// Curve is piecewise linear through points (0, start), (d1, v1),
// (d1+d2, v2), ...; constant after the end. The zero Curve is 0 everywhere.
// A Curve is immutable and safe for concurrent use.
type Curve struct {
	kind Kind
	pts  []Point
	// cum[i] is Arrivals(pts[i].T): the integral up to the point (Rate) or
	// the running maximum of the values up to it (Players).
	cum []float64
}

// Phases builds a curve starting at start and going through steps.
func Phases(kind Kind, start float64, steps []Step) (Curve, error) {
	if len(steps) >= MaxPoints {
		return Curve{}, fmt.Errorf("%w: %d phases, at most %d", ErrCurve, len(steps), MaxPoints-1)
	}
	pts := make([]Point, 0, len(steps)+1)
	pts = append(pts, Point{0, start})
	var t time.Duration
	for i, s := range steps {
		if s.Duration <= 0 {
			return Curve{}, fmt.Errorf("%w: phase %d: duration must be > 0, got %v", ErrCurve, i, s.Duration)
		}
		if t > math.MaxInt64-s.Duration {
			return Curve{}, fmt.Errorf("%w: phase %d: the phases last too long", ErrCurve, i)
		}
		t += s.Duration
		pts = append(pts, Point{t, s.Value})
	}
	return newCurve(kind, pts)
}

// newCurve checks pts (times from 0, strictly increasing; values finite
// and >= 0) and precomputes the arrivals at each point. It keeps pts.
func newCurve(kind Kind, pts []Point) (Curve, error) {
	if kind != Players && kind != Rate {
		return Curve{}, fmt.Errorf("%w: unknown kind %d", ErrCurve, kind)
	}
	if len(pts) == 0 {
		return Curve{}, fmt.Errorf("%w: no points", ErrCurve)
	}
	if len(pts) > MaxPoints {
		return Curve{}, fmt.Errorf("%w: %d points, at most %d", ErrCurve, len(pts), MaxPoints)
	}
	if pts[0].T != 0 {
		return Curve{}, fmt.Errorf("%w: the first point is at %v, not 0", ErrCurve, pts[0].T)
	}
	cum := make([]float64, len(pts))
	for i, p := range pts {
		if math.IsNaN(p.V) || math.IsInf(p.V, 0) || p.V < 0 {
			return Curve{}, fmt.Errorf("%w: point %d: value must be finite and >= 0, got %v", ErrCurve, i, p.V)
		}
		if i == 0 {
			if kind == Players {
				cum[0] = p.V
			}
			continue
		}
		q := pts[i-1]
		if p.T <= q.T {
			return Curve{}, fmt.Errorf("%w: point %d: time %v is not after %v", ErrCurve, i, p.T, q.T)
		}
		if kind == Rate {
			cum[i] = cum[i-1] + (q.V+p.V)/2*(p.T-q.T).Seconds()
		} else {
			cum[i] = math.Max(cum[i-1], p.V)
		}
	}
	return Curve{kind: kind, pts: pts, cum: cum}, nil
}

// Kind is what the values are; 0 for the zero Curve.
func (c Curve) Kind() Kind { return c.kind }

// End is the time of the last point.
func (c Curve) End() time.Duration {
	if len(c.pts) == 0 {
		return 0
	}
	return c.pts[len(c.pts)-1].T
}

// Peak is the largest value.
func (c Curve) Peak() float64 {
	if len(c.cum) == 0 {
		return 0
	}
	if c.kind == Players {
		return c.cum[len(c.cum)-1]
	}
	var m float64
	for _, p := range c.pts {
		m = math.Max(m, p.V)
	}
	return m
}

// Points is a copy of the curve's corners.
func (c Curve) Points() []Point { return append([]Point(nil), c.pts...) }

// segment is the index i of the last point with pts[i].T <= t (0 for t < 0).
func (c Curve) segment(t time.Duration) int {
	i := sort.Search(len(c.pts), func(i int) bool { return c.pts[i].T > t })
	return max(i-1, 0)
}

// At is the value at t: the first value before 0, the last after the end.
func (c Curve) At(t time.Duration) float64 {
	if len(c.pts) == 0 {
		return 0
	}
	i := c.segment(t)
	p := c.pts[i]
	if i == len(c.pts)-1 || t <= p.T {
		return p.V
	}
	q := c.pts[i+1]
	f := float64(t-p.T) / float64(q.T-p.T)
	return p.V + (q.V-p.V)*f
}

// Scale returns the curve in wall time for a run at scale and speed:
// times / speed; values x scale (Rate curves: x scale x speed, since their
// values are arrivals per second of wall time). scale and speed must be > 0
// (others return c unchanged).
func (c Curve) Scale(scale, speed float64) Curve {
	if len(c.pts) == 0 || !(scale > 0) || !(speed > 0) || math.IsInf(scale, 0) || math.IsInf(speed, 0) {
		return c
	}
	f := scale
	if c.kind == Rate {
		f *= speed
	}
	pts := make([]Point, len(c.pts))
	for i, p := range c.pts {
		pts[i] = Point{T: time.Duration(math.Round(float64(p.T) / speed)), V: p.V * f}
	}
	// Rounding to whole nanoseconds can merge close points of a fast
	// curve: keep the later of two at the same time.
	out := pts[:1]
	for _, p := range pts[1:] {
		if p.T <= out[len(out)-1].T {
			out[len(out)-1].V = p.V
			continue
		}
		out = append(out, p)
	}
	s, err := newCurve(c.kind, out)
	if err != nil { // cannot happen: the values stay finite and >= 0
		return c
	}
	return s
}

// Arrivals is the number of arrivals due by t: for Rate, the integral of
// the rate over [0, t]; for Players, the running maximum of At over
// [0, t] (players arrive as the curve rises; the engine replaces leavers
// and ends sessions when the curve falls).
func (c Curve) Arrivals(t time.Duration) float64 {
	if len(c.pts) == 0 {
		return 0
	}
	if t < 0 {
		t = 0
	}
	i := c.segment(t)
	p := c.pts[i]
	if c.kind == Players {
		return math.Max(c.cum[i], c.At(t))
	}
	dt := (t - p.T).Seconds()
	if dt <= 0 {
		return c.cum[i]
	}
	return c.cum[i] + (p.V+c.At(t))/2*dt
}

// ArrivalTime is the earliest t >= 0 with Arrivals(t) >= k (rounded up to
// the nanosecond); ok is false when Arrivals never reaches k.
func (c Curve) ArrivalTime(k float64) (t time.Duration, ok bool) {
	if math.IsNaN(k) || len(c.pts) == 0 {
		return 0, false
	}
	if k <= c.Arrivals(0) {
		return 0, true
	}
	// j: the first point with Arrivals >= k; the crossing is in (j-1, j].
	j := sort.SearchFloat64s(c.cum, k)
	if j == len(c.cum) {
		last := c.pts[len(c.pts)-1]
		if c.kind == Players || last.V <= 0 || math.IsInf(k, 1) {
			return 0, false
		}
		return ceilAdd(last.T, (k-c.cum[j-1])/last.V)
	}
	p, q := c.pts[j-1], c.pts[j]
	span := (q.T - p.T).Seconds()
	need := k - c.cum[j-1]
	var x float64 // seconds after p.T
	if c.kind == Players {
		// The running maximum is below k until the line reaches k.
		x = (k - p.V) / (q.V - p.V) * span
	} else {
		// Solve p.V x + a x² = need with a = slope/2, in the stable form.
		a := (q.V - p.V) / span / 2
		if d := p.V + math.Sqrt(math.Max(0, p.V*p.V+4*a*need)); d > 0 {
			x = 2 * need / d
		}
	}
	x = math.Min(math.Max(x, 0), span)
	t, ok = ceilAdd(p.T, x)
	if t > q.T {
		t = q.T
	}
	return t, ok
}

// ceilAdd is t + x seconds, rounded up to the nanosecond.
func ceilAdd(t time.Duration, x float64) (time.Duration, bool) {
	ns := math.Ceil(x * 1e9)
	if ns >= float64(math.MaxInt64-t) {
		return 0, false
	}
	return t + time.Duration(ns), true
}
