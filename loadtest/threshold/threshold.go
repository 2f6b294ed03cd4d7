// Package threshold is a PLACEHOLDER for helper A's package of the same
// name: just enough of the issue-10 contract (the exported names and a
// tiny parser for "p(N) OP value[unit]", "NAME OP value",
// "AGG(series) OP value" and "NAME OP [k *] NAME") for loadtest/report to
// compile and be tested. The integrator replaces it at merge; add nothing
// here.
package threshold

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Scalars are the scalar figure names.
var Scalars = []string{"sent", "answered", "ok", "business", "refused", "failed", "lost_replies", "error_rate",
	"refused_rate", "arrived", "connected", "admitted", "left", "dial_failures", "reconnects", "goodput",
	"capacity", "duration", "max_wait", "order_inversions"}

// SeriesNames are the per-second series names.
var SeriesNames = []string{"connected", "waiting", "admitted", "rps", "goodput", "p99", "logic_queue_depth",
	"battle_p99", "gate_connections", "gate_waiting", "cpu", "cpu_gate", "cpu_logic", "cpu_battle",
	"rss_gate_mb", "rss_logic_mb", "rss_battle_mb"}

// Facts are the figures a threshold reads.
type Facts interface {
	Value(name string) (float64, bool)
	Series(name string) ([]float64, bool)
	Quantile(q float64) (float64, bool)
}

// Result is one threshold's outcome.
type Result struct {
	Threshold    string
	Passed       bool
	Value, Limit float64
	Detail       string
}

type term struct {
	kind byte // 'n' number, 'v' scalar, 'a' aggregate, 'p' quantile
	k    float64
	name string
	agg  string
}

// Threshold is a parsed "LHS OP RHS".
type Threshold struct {
	src      string
	lhs, rhs term
	op       string
}

var ops = []string{"<=", ">=", "==", "!=", "<", ">"}

// Parse parses a threshold.
func Parse(s string) (Threshold, error) {
	for _, op := range ops {
		if i := strings.Index(s, op); i > 0 {
			l, err := parseTerm(strings.TrimSpace(s[:i]), true)
			if err != nil {
				return Threshold{}, fmt.Errorf("threshold %q: %w", s, err)
			}
			r, err := parseTerm(strings.TrimSpace(s[i+len(op):]), false)
			if err != nil {
				return Threshold{}, fmt.Errorf("threshold %q: %w", s, err)
			}
			return Threshold{src: strings.TrimSpace(s), lhs: l, rhs: r, op: op}, nil
		}
	}
	return Threshold{}, fmt.Errorf("threshold %q: no comparison operator", s)
}

func parseTerm(s string, lhs bool) (term, error) {
	if strings.HasPrefix(s, "p(") && strings.HasSuffix(s, ")") && lhs {
		n, err := strconv.ParseFloat(s[2:len(s)-1], 64)
		if err != nil || n <= 0 || n > 100 {
			return term{}, fmt.Errorf("bad quantile %q", s)
		}
		return term{kind: 'p', k: n / 100}, nil
	}
	if i := strings.Index(s, "("); i > 0 && strings.HasSuffix(s, ")") {
		agg, name := s[:i], s[i+1:len(s)-1]
		if !slices.Contains([]string{"max", "min", "avg", "last"}, agg) || !slices.Contains(SeriesNames, name) {
			return term{}, fmt.Errorf("unknown aggregate or series %q", s)
		}
		return term{kind: 'a', agg: agg, name: name}, nil
	}
	k := 1.0
	if i := strings.Index(s, "*"); i > 0 {
		v, err := strconv.ParseFloat(strings.TrimSpace(s[:i]), 64)
		if err != nil {
			return term{}, fmt.Errorf("bad factor %q", s)
		}
		k, s = v, strings.TrimSpace(s[i+1:])
	}
	if slices.Contains(Scalars, s) {
		return term{kind: 'v', k: k, name: s}, nil
	}
	if lhs {
		return term{}, fmt.Errorf("unknown name %q (known: %s)", s, strings.Join(Scalars, ", "))
	}
	mult := 1.0
	for _, u := range []struct {
		suf string
		m   float64
	}{{"ms", 1e-3}, {"s", 1}, {"m", 60}, {"%", 0.01}} {
		if strings.HasSuffix(s, u.suf) {
			s, mult = strings.TrimSuffix(s, u.suf), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return term{}, fmt.Errorf("bad value %q", s)
	}
	return term{kind: 'n', k: v * mult}, nil
}

// String is the threshold as written.
func (t Threshold) String() string { return t.src }

// Names are the figures it reads.
func (t Threshold) Names() []string {
	var ns []string
	for _, x := range []term{t.lhs, t.rhs} {
		switch x.kind {
		case 'v', 'a':
			ns = append(ns, x.name)
		case 'p':
			ns = append(ns, "p")
		}
	}
	return ns
}

func (x term) eval(f Facts) (float64, string) {
	switch x.kind {
	case 'n':
		return x.k, ""
	case 'p':
		v, ok := f.Quantile(x.k)
		if !ok {
			return 0, "latency"
		}
		return v, ""
	case 'v':
		v, ok := f.Value(x.name)
		if !ok {
			return 0, x.name
		}
		return x.k * v, ""
	}
	s, ok := f.Series(x.name)
	var vs []float64
	for _, v := range s {
		if !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	if !ok || len(vs) == 0 {
		return 0, x.name
	}
	switch x.agg {
	case "max":
		return slices.Max(vs), ""
	case "min":
		return slices.Min(vs), ""
	case "last":
		return vs[len(vs)-1], ""
	}
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs)), ""
}

// Eval evaluates t on f.
func (t Threshold) Eval(f Facts) Result {
	r := Result{Threshold: t.src}
	var miss string
	if r.Value, miss = t.lhs.eval(f); miss == "" {
		r.Limit, miss = t.rhs.eval(f)
	}
	if miss != "" {
		r.Detail = "no figure for " + miss
		return r
	}
	switch t.op {
	case "<":
		r.Passed = r.Value < r.Limit
	case "<=":
		r.Passed = r.Value <= r.Limit
	case ">":
		r.Passed = r.Value > r.Limit
	case ">=":
		r.Passed = r.Value >= r.Limit
	case "==":
		r.Passed = r.Value == r.Limit
	case "!=":
		r.Passed = r.Value != r.Limit
	}
	return r
}

// EvalAll evaluates every threshold; passed when all pass.
func EvalAll(ts []Threshold, f Facts) ([]Result, bool) {
	rs := make([]Result, 0, len(ts))
	passed := true
	for _, t := range ts {
		r := t.Eval(f)
		passed = passed && r.Passed
		rs = append(rs, r)
	}
	return rs, passed
}
