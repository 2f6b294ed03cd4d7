// Package adapter is a stand-in for prometheus-adapter in Levee's
// control-plane test: it reads the subset of prometheus-adapter's rule
// configuration that k8s/overlays/prometheus-adapter/adapter-rules.yaml
// uses, turns custom metrics API requests for pods into the PromQL those
// rules describe, and asks a Prometheus HTTP API for the values.
//
// What it implements of prometheus-adapter's config (docs/config.md there):
//
//   - rules[].seriesQuery: a single series name, optionally with label
//     matchers (`name` or `name{...}`). prometheus-adapter runs it against
//     /api/v1/series to discover series; here the name is taken as the one
//     series of the rule and the matchers are ignored, as they are when
//     prometheus-adapter builds the metrics query.
//   - rules[].resources.overrides: exactly a namespace label and a pod
//     label ({resource: namespace}, {resource: pod}); metrics are served for
//     namespaced pods only.
//   - rules[].name.matches and name.as: the regular expression and its
//     expansion ($0 when matches has no group, $1 when it has one, as
//     prometheus-adapter defaults).
//   - rules[].metricsQuery: a text/template with << >> delimiters and the
//     fields Series, LabelMatchers, LabelValuesByName, GroupBy and
//     GroupBySlice, filled the way prometheus-adapter fills them; empty
//     means prometheus-adapter's default, sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>).
//
// Any other field prometheus-adapter knows (seriesFilters,
// resources.template, labelValueReplacements, resourceRules,
// externalRules) is refused with ErrUnsupported, and a field it does not
// know is refused as a decoding error, so a typo in the shipped rules fails
// the test instead of being ignored.
package adapter
