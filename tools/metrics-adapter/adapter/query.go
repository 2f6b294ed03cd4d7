package adapter

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// ErrSelector is returned for a metric label selector that has no PromQL
// form (prometheus-adapter refuses the same ones: > and <).
var ErrSelector = errors.New("adapter: metric selector cannot be turned into label matchers")

// Metric is a compiled rule: the custom metric it serves for pods, the
// series behind it and the query template.
type Metric struct {
	// Name is the metric's name in the custom metrics API (name.as).
	Name string
	// Series is the Prometheus series name (from seriesQuery).
	Series string
	// NamespaceLabel and PodLabel are the labels that name the pod's
	// namespace and the pod (resources.overrides).
	NamespaceLabel, PodLabel string

	query *template.Template
}

// queryArgs are the fields a metricsQuery template sees, as
// prometheus-adapter names them (pkg/naming/metrics_query.go there).
type queryArgs struct {
	Series            string
	LabelMatchers     string
	LabelValuesByName map[string]string
	GroupBy           string
	GroupBySlice      []string
}

// Query renders the metricsQuery for the pods named in namespace, the
// way prometheus-adapter does: LabelMatchers is the metric selector's
// matchers, then namespace="ns", then pod="a" for one pod or pod=~"a|b"
// for several, joined by commas; GroupBy is the pod label. The pod names
// go into the regular expression as they are (Kubernetes names contain no
// regular expression syntax but ".", which matches itself too).
func (m *Metric) Query(namespace string, pods []string, metricSelector labels.Selector) (string, error) {
	var exprs []string
	byName := map[string]string{}
	if metricSelector != nil {
		reqs, _ := metricSelector.Requirements()
		for _, r := range reqs {
			e, err := matcher(r)
			if err != nil {
				return "", err
			}
			exprs = append(exprs, e)
			byName[r.Key()] = strings.Join(r.Values().List(), "|")
		}
	}
	if namespace != "" {
		exprs = append(exprs, fmt.Sprintf("%s=%q", m.NamespaceLabel, namespace))
		byName[m.NamespaceLabel] = namespace
	}
	target := strings.Join(pods, "|")
	if len(pods) > 1 {
		exprs = append(exprs, fmt.Sprintf("%s=~%q", m.PodLabel, target))
	} else {
		exprs = append(exprs, fmt.Sprintf("%s=%q", m.PodLabel, target))
	}
	byName[m.PodLabel] = target

	var b bytes.Buffer
	err := m.query.Execute(&b, queryArgs{
		Series:            m.Series,
		LabelMatchers:     strings.Join(exprs, ","),
		LabelValuesByName: byName,
		GroupBy:           m.PodLabel,
		GroupBySlice:      []string{m.PodLabel},
	})
	if err != nil {
		return "", fmt.Errorf("adapter: metricsQuery of %s: %w", m.Name, err)
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("adapter: metricsQuery of %s is empty", m.Name)
	}
	return b.String(), nil
}

// matcher is one requirement of a metric selector as a PromQL label
// matcher, with prometheus-adapter's mapping.
func matcher(r labels.Requirement) (string, error) {
	vals := r.Values().List()
	v := strings.Join(vals, "|")
	var op string
	switch r.Operator() {
	case selection.Exists:
		op, v = "!=", ""
	case selection.DoesNotExist:
		op, v = "=", ""
	case selection.Equals, selection.DoubleEquals:
		op = "="
	case selection.NotEquals:
		op = "!="
	case selection.In:
		op = "=~"
	case selection.NotIn:
		op = "!~"
	default:
		return "", fmt.Errorf("%w: %s", ErrSelector, r.String())
	}
	if len(vals) > 1 {
		// A label has one value: several can only be a regular expression.
		switch op {
		case "=":
			op = "=~"
		case "!=":
			op = "!~"
		}
	}
	return fmt.Sprintf("%s%s%q", r.Key(), op, v), nil
}
