package deploycheck

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

// RuleFile is a Prometheus rules file. Its groups are the
// prometheus-operator's RuleGroup, whose fields carry the rules file's own
// names, so that the file and a PrometheusRule compare field by field.
type RuleFile struct {
	Groups []monitoringv1.RuleGroup `json:"groups"`
}

// LoadRules reads and strictly decodes the Prometheus rules file at path
// (named name in errors).
func LoadRules(path, name string) (RuleFile, error) {
	var rf RuleFile
	data, err := os.ReadFile(path)
	if err != nil {
		return rf, err
	}
	if err := yaml.UnmarshalStrict(data, &rf); err != nil {
		return rf, fmt.Errorf("%s: %w", name, err)
	}
	if len(rf.Groups) == 0 {
		return rf, fmt.Errorf("%s: no rule groups", name)
	}
	return rf, nil
}

// legacyMetricName is a metric name that needs no quoting in PromQL.
var legacyMetricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// RecordingRules returns the names the groups record.
func RecordingRules(groups []monitoringv1.RuleGroup) map[string]bool {
	rec := map[string]bool{}
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				rec[r.Record] = true
			}
		}
	}
	return rec
}

// CheckRules checks every rule of groups (from source): exactly one of
// record and alert, a valid recorded metric name, unique group names, and
// an expr that parses.
func CheckRules(source string, groups []monitoringv1.RuleGroup) []error {
	var errs []error
	seen := map[string]bool{}
	for _, g := range groups {
		if seen[g.Name] {
			errs = append(errs, fmt.Errorf("%s: group %q appears twice", source, g.Name))
		}
		seen[g.Name] = true
		for i, r := range g.Rules {
			at := fmt.Sprintf("%s: group %q rule %d (%s)", source, g.Name, i, ruleName(r))
			switch {
			case (r.Record == "") == (r.Alert == ""):
				errs = append(errs, fmt.Errorf("%s: needs exactly one of record and alert", at))
			case r.Record != "" && !legacyMetricName.MatchString(r.Record):
				errs = append(errs, fmt.Errorf("%s: %q is not a valid metric name", at, r.Record))
			}
			if r.Expr.String() == "" {
				errs = append(errs, fmt.Errorf("%s: no expr", at))
				continue
			}
			if _, err := ParsePromQL(r.Expr.String()); err != nil {
				errs = append(errs, fmt.Errorf("%s: expr: %v", at, err))
			}
		}
	}
	return errs
}

func ruleName(r monitoringv1.Rule) string {
	if r.Record != "" {
		return "record " + r.Record
	}
	return "alert " + r.Alert
}

// PrometheusRuleGroups returns the rule groups of every PrometheusRule
// among objs, checked with CheckRules.
func PrometheusRuleGroups(objs []Object) ([]monitoringv1.RuleGroup, []error) {
	var groups []monitoringv1.RuleGroup
	var errs []error
	for _, o := range objs {
		if pr, ok := o.Obj.(*monitoringv1.PrometheusRule); ok {
			groups = append(groups, pr.Spec.Groups...)
			errs = append(errs, CheckRules(o.Ref(), pr.Spec.Groups)...)
		}
	}
	return groups, errs
}

// CheckRulesMatch checks that the PrometheusRules among objs carry exactly
// the groups of the rules file rf (read from file).
func CheckRulesMatch(objs []Object, file string, rf RuleFile) []error {
	var errs []error
	var prs []Object
	for _, o := range objs {
		if _, ok := o.Obj.(*monitoringv1.PrometheusRule); ok {
			prs = append(prs, o)
		}
	}
	if len(prs) == 0 {
		return []error{fmt.Errorf("no PrometheusRule rendered to carry %s", file)}
	}
	var got []monitoringv1.RuleGroup
	for _, o := range prs {
		got = append(got, o.Obj.(*monitoringv1.PrometheusRule).Spec.Groups...)
	}
	where := prs[0].Ref()
	want := rf.Groups
	for _, w := range want {
		i := slices.IndexFunc(got, func(g monitoringv1.RuleGroup) bool { return g.Name == w.Name })
		if i < 0 {
			errs = append(errs, fmt.Errorf("%s: lacks group %q of %s", where, w.Name, file))
			continue
		}
		if d := groupDiff(w, got[i]); d != "" {
			errs = append(errs, fmt.Errorf("%s: group %q differs from %s's: %s", where, w.Name, file, d))
		}
	}
	for _, g := range got {
		if !slices.ContainsFunc(want, func(w monitoringv1.RuleGroup) bool { return w.Name == g.Name }) {
			errs = append(errs, fmt.Errorf("%s: group %q is not in %s", where, g.Name, file))
		}
	}
	return errs
}

// groupDiff says where two groups differ, or "" when they are equal.
func groupDiff(want, got monitoringv1.RuleGroup) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	if len(want.Rules) != len(got.Rules) {
		return fmt.Sprintf("%d rules, want %d", len(got.Rules), len(want.Rules))
	}
	for i := range want.Rules {
		if !reflect.DeepEqual(want.Rules[i], got.Rules[i]) {
			w, _ := yaml.Marshal(want.Rules[i])
			g, _ := yaml.Marshal(got.Rules[i])
			return fmt.Sprintf("rule %d (%s) is\n%s\nwant\n%s", i, ruleName(want.Rules[i]), g, w)
		}
	}
	w, _ := yaml.Marshal(want)
	g, _ := yaml.Marshal(got)
	return fmt.Sprintf("group fields differ: got\n%s\nwant\n%s", g, w)
}
