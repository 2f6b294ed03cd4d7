package deploycheck

import (
	"regexp"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

var promParser = parser.NewParser(parser.Options{})

// ParsePromQL parses expr with the Prometheus parser.
func ParsePromQL(expr string) (parser.Expr, error) {
	return promParser.ParseExpr(expr)
}

// Selector is one vector selector of an expression: the metric name, or
// the __name__ regexp when the name is matched by a pattern.
type Selector struct {
	Name    string
	Pattern *labels.Matcher // non-nil when __name__ is matched by =~
}

// selectors lists the vector selectors of e.
func selectors(e parser.Expr) []Selector {
	var out []Selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := Selector{Name: vs.Name}
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName {
				continue
			}
			switch m.Type {
			case labels.MatchEqual:
				s.Name = m.Value
			case labels.MatchRegexp:
				s.Pattern = m
			}
		}
		out = append(out, s)
		return nil
	})
	return out
}

// metricNames are the literal metric names e selects.
func metricNames(e parser.Expr) []string {
	var names []string
	for _, s := range selectors(e) {
		if s.Name != "" {
			names = append(names, s.Name)
		}
	}
	return names
}

var adapterPlaceholder = regexp.MustCompile(`<<\s*\.(\w+)\s*>>`)

// AdapterQuery turns a prometheus-adapter metricsQuery template into PromQL
// with stand-ins for its placeholders: <<.Series>> becomes series,
// <<.LabelMatchers>> a matcher list, <<.GroupBy>> a label list. Unknown
// placeholders are left for the parser to reject.
func AdapterQuery(tmpl, series string) string {
	return adapterPlaceholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		switch adapterPlaceholder.FindStringSubmatch(m)[1] {
		case "Series":
			return series
		case "LabelMatchers":
			return `namespace="levee",pod=~"battle-.*"`
		case "GroupBy":
			return "namespace, pod"
		}
		return m
	})
}

var (
	grafanaBuiltin = regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range|__interval_ms|__range_s|__range_ms)\}?`)
	// $var, ${var}, ${var:format}, [[var]]
	grafanaVar = regexp.MustCompile(`\$\{\w+(?::\w+)?\}|\$\w+|\[\[\w+\]\]`)
	// a variable standing for a range or subquery duration
	grafanaRangeVar = regexp.MustCompile(`\[\s*(\$\{\w+\}|\$\w+|\[\[\w+\]\])\s*(\]|:)`)
)

// GrafanaQuery replaces Grafana's variables in a panel's expr with
// stand-ins the Prometheus parser accepts: durations for the interval and
// range built-ins and for variables used as a range, a plain word (valid as
// a label value, label name and metric name) for every other variable.
func GrafanaQuery(expr string) string {
	expr = grafanaBuiltin.ReplaceAllStringFunc(expr, func(m string) string {
		if strings.HasSuffix(strings.Trim(m, "${}"), "_ms") || strings.HasSuffix(strings.Trim(m, "${}"), "_s") {
			return "300"
		}
		return "5m"
	})
	expr = grafanaRangeVar.ReplaceAllStringFunc(expr, func(m string) string {
		sub := grafanaRangeVar.FindStringSubmatch(m)
		return "[5m" + sub[2]
	})
	return grafanaVar.ReplaceAllString(expr, "levee")
}
