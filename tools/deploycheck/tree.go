package deploycheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Where the files live in the repository.
const (
	K8sDir         = "k8s"
	RulesFile      = "deploy/prometheus/rules/levee.rules.yml"
	DashboardFile  = "deploy/grafana/dashboards/levee.json"
	AdapterOverlay = "overlays/prometheus-adapter"
	KEDAOverlay    = "overlays/keda"
)

// Rendered is one kustomization rendered and decoded.
type Rendered struct {
	Dir     string // relative to the repository root
	Objects []Object
}

// RenderAll renders and decodes base and every overlay under root/k8s.
// Sources in messages are relative to root.
func RenderAll(ctx context.Context, kubectl, root string) ([]Rendered, []error) {
	dirs, err := Kustomizations(filepath.Join(root, K8sDir))
	if err != nil {
		return nil, []error{err}
	}
	dec := NewDecoder()
	var out []Rendered
	var errs []error
	for _, dir := range dirs {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			rel = dir
		}
		data, err := Render(ctx, kubectl, dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rel, err))
			continue
		}
		objs, e := dec.Decode("kustomization "+rel, data)
		errs = append(errs, e...)
		out = append(out, Rendered{Dir: rel, Objects: objs})
	}
	return out, errs
}

// CheckK8s runs every check on the rendered kustomizations of root/k8s
// against the rules file rf: the per-object and cross-object checks on
// each, the PrometheusRule against the rules file on base, the adapter
// chain on the prometheus-adapter overlay and the ScaledObject on the keda
// overlay.
func CheckK8s(ctx context.Context, kubectl, root string, rf RuleFile) []error {
	rs, errs := RenderAll(ctx, kubectl, root)
	rec := RecordingRules(rf.Groups)
	byDir := map[string][]Object{}
	for _, r := range rs {
		byDir[filepath.ToSlash(r.Dir)] = r.Objects
		for _, check := range []func([]Object) []error{
			CheckSelectors, CheckPorts, CheckRefs, CheckResources, CheckSecurity, CheckGate, CheckTLS, CheckLogicStore,
		} {
			errs = append(errs, check(r.Objects)...)
		}
		_, e := PrometheusRuleGroups(r.Objects)
		errs = append(errs, e...)
	}
	dir := func(d string) string { return filepath.ToSlash(filepath.Join(K8sDir, d)) }
	if base, ok := byDir[dir("base")]; ok {
		errs = append(errs, CheckRulesMatch(base, RulesFile, rf)...)
	}
	adapter, ok := byDir[dir(AdapterOverlay)]
	if !ok {
		errs = append(errs, fmt.Errorf("%s: not rendered", dir(AdapterOverlay)))
	} else {
		errs = append(errs, CheckAdapterChain(adapter, rec)...)
	}
	if keda, ok := byDir[dir(KEDAOverlay)]; !ok {
		errs = append(errs, fmt.Errorf("%s: not rendered", dir(KEDAOverlay)))
	} else {
		errs = append(errs, CheckKEDA(keda, adapter, rec)...)
	}
	return errs
}

// CheckObservability checks the rules file and the dashboard under root.
// It returns the rules file for CheckK8s.
func CheckObservability(root string) (RuleFile, []error) {
	var errs []error
	rf, err := LoadRules(filepath.Join(root, RulesFile), RulesFile)
	if err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, CheckRules(RulesFile, rf.Groups)...)
	}
	d, err := LoadDashboard(filepath.Join(root, DashboardFile), DashboardFile)
	if err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, CheckDashboard(DashboardFile, d)...)
		errs = append(errs, CheckKeyPanels(DashboardFile, d, SeedPanels)...)
	}
	return rf, errs
}

// Exists tells whether root holds the file or directory rel.
func Exists(root, rel string) bool {
	_, err := os.Stat(filepath.Join(root, rel))
	return !errors.Is(err, os.ErrNotExist)
}
