package deploycheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/gauge"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/text"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// registerPlugins tells the SDK the panel and query types a Levee
// dashboard may use, so that their options decode strictly too (a panel
// of another type keeps its options unchecked; a non-Prometheus target
// fails KeyPanels and CheckDashboard).
var registerPlugins = sync.OnceFunc(func() {
	rt := cog.NewRuntime()
	rt.RegisterDataqueryVariant(prometheus.VariantConfig())
	for _, p := range []func() variants.PanelcfgConfig{timeseries.VariantConfig, stat.VariantConfig, gauge.VariantConfig,
		bargauge.VariantConfig, table.VariantConfig, text.VariantConfig, heatmap.VariantConfig, statetimeline.VariantConfig} {
		rt.RegisterPanelcfgVariant(p())
	}
})

// LoadDashboard reads the dashboard JSON at path (named name in errors)
// and decodes it strictly with the grafana-foundation-sdk: an unexpected
// field or a wrong type is an error. A missing field the SDK calls
// required is not: Grafana fills in its default (a panel's legend and
// tooltip options, the annotations list), and so may a hand-written file.
func LoadDashboard(path, name string) (*dashboard.Dashboard, error) {
	registerPlugins()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var strict dashboard.Dashboard
	if err := strictErrors(strict.UnmarshalJSONStrict(data)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// The strict decode leaves out a panel that lacks a required field;
	// decode again, leniently, for the whole dashboard.
	var d dashboard.Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &d, nil
}

// strictErrors drops the SDK's "required field is missing" errors.
func strictErrors(err error) error {
	var bes cog.BuildErrors
	if !errors.As(err, &bes) {
		return err
	}
	var kept cog.BuildErrors
	for _, be := range bes {
		if !strings.Contains(be.Message, "required field is missing") {
			kept = append(kept, be)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return kept
}

// Panels flattens the dashboard's panels, those inside rows included
// (rows themselves are left out).
func Panels(d *dashboard.Dashboard) []*dashboard.Panel {
	var ps []*dashboard.Panel
	for _, p := range d.Panels {
		switch {
		case p.Panel != nil:
			ps = append(ps, p.Panel)
		case p.RowPanel != nil:
			for i := range p.RowPanel.Panels {
				ps = append(ps, &p.RowPanel.Panels[i])
			}
		}
	}
	return ps
}

func panelRef(file string, p *dashboard.Panel) string {
	title := ""
	if p.Title != nil {
		title = *p.Title
	}
	id := uint32(0)
	if p.Id != nil {
		id = *p.Id
	}
	return fmt.Sprintf("%s: panel %d %q", file, id, title)
}

// CheckDashboard checks that the dashboard (from file) has panels, that
// every panel other than text has a datasource (its own or each target's)
// and Prometheus targets, and that every target's expr parses once
// Grafana's variables have stand-ins.
func CheckDashboard(file string, d *dashboard.Dashboard) []error {
	var errs []error
	ps := Panels(d)
	if len(ps) == 0 {
		return []error{fmt.Errorf("%s: no panels", file)}
	}
	for _, p := range ps {
		if p.Type == "text" {
			continue
		}
		ref := panelRef(file, p)
		if len(p.Targets) == 0 {
			errs = append(errs, fmt.Errorf("%s: no targets", ref))
		}
		for i, t := range p.Targets {
			q, ok := t.(*prometheus.Dataquery)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: target %d is not a Prometheus query (%T)", ref, i, t))
				continue
			}
			if p.Datasource == nil && q.Datasource == nil {
				errs = append(errs, fmt.Errorf("%s: target %d has no datasource, nor has its panel", ref, i))
			}
			if strings.TrimSpace(q.Expr) == "" {
				errs = append(errs, fmt.Errorf("%s: target %d has no expr", ref, i))
				continue
			}
			if _, err := ParsePromQL(GrafanaQuery(q.Expr)); err != nil {
				errs = append(errs, fmt.Errorf("%s: target %d expr %q: %v", ref, i, q.Expr, err))
			}
		}
	}
	return errs
}

// KeyPanel is one of the seed's three panels and the threshold it draws.
type KeyPanel struct {
	What      string
	Metrics   []string // a target of the panel reads one of these
	Threshold float64
}

// SeedPanels are the seed's key panels: gate connections 200k, logic queue
// depth 500, battle p99 500 ms.
var SeedPanels = []KeyPanel{
	{"gate connections", []string{"gate_active_connections"}, 200000},
	{"logic queue depth", []string{"logic_queue_depth"}, 500},
	{"battle p99", []string{"battle_latency_seconds_bucket", "instance:battle_latency_seconds:p99_1m", "job:battle_latency_seconds:p99_1m"}, 0.5},
}

// CheckKeyPanels checks that for each key panel some panel reading its
// metric draws its threshold (a step of fieldConfig.defaults.thresholds or
// of a thresholds override).
func CheckKeyPanels(file string, d *dashboard.Dashboard, keys []KeyPanel) []error {
	var errs []error
	for _, k := range keys {
		var readers []string
		found := false
		for _, p := range Panels(d) {
			if !panelReads(p, k.Metrics) {
				continue
			}
			readers = append(readers, panelRef(file, p))
			if slices.Contains(panelThresholds(p), k.Threshold) {
				found = true
				break
			}
		}
		switch {
		case found:
		case len(readers) == 0:
			errs = append(errs, fmt.Errorf("%s: no panel for %s (a target reading %v)", file, k.What, k.Metrics))
		default:
			errs = append(errs, fmt.Errorf("%s: %s: no threshold step at %v on the panels that read %v: %v", file, k.What, k.Threshold, k.Metrics, readers))
		}
	}
	return errs
}

func panelReads(p *dashboard.Panel, metrics []string) bool {
	for _, t := range p.Targets {
		q, ok := t.(*prometheus.Dataquery)
		if !ok {
			continue
		}
		e, err := ParsePromQL(GrafanaQuery(q.Expr))
		if err != nil {
			continue
		}
		for _, n := range metricNames(e) {
			if slices.Contains(metrics, n) {
				return true
			}
		}
	}
	return false
}

func panelThresholds(p *dashboard.Panel) []float64 {
	if p.FieldConfig == nil {
		return nil
	}
	var vs []float64
	add := func(t *dashboard.ThresholdsConfig) {
		if t == nil {
			return
		}
		for _, s := range t.Steps {
			if s.Value != nil {
				vs = append(vs, *s.Value)
			}
		}
	}
	add(p.FieldConfig.Defaults.Thresholds)
	for _, o := range p.FieldConfig.Overrides {
		for _, prop := range o.Properties {
			if prop.Id != "thresholds" {
				continue
			}
			if m, ok := prop.Value.(map[string]any); ok {
				if steps, ok := m["steps"].([]any); ok {
					for _, s := range steps {
						if sm, ok := s.(map[string]any); ok {
							if v, ok := sm["value"].(float64); ok {
								vs = append(vs, v)
							}
						}
					}
				}
			}
		}
	}
	return vs
}
