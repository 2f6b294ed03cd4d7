package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leveehq/levee/tools/deploycheck/live"
)

const (
	customMetricsGV = "custom.metrics.k8s.io/v1beta2"
	battleSelector  = "app.kubernetes.io/name=battle"
	// The HPA's two metrics, as the adapter rules name them.
	p99Metric      = "battle_latency_seconds_p99"
	pressureMetric = "battle_pressure"
)

// servedMetrics are the metric names the custom metrics API's discovery
// lists.
func (c *cluster) servedMetrics() ([]string, error) {
	l, err := c.cs.Discovery().ServerResourcesForGroupVersion(customMetricsGV)
	if err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", customMetricsGV, err)
	}
	var names []string
	for _, r := range l.APIResources {
		names = append(names, r.Name)
	}
	return live.DiscoveredMetrics(names), nil
}

func cmdServedMetrics(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("served-metrics")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	names, err := c.servedMetrics()
	if err != nil {
		return err
	}
	fmt.Fprintln(c.out, strings.Join(names, " "))
	return nil
}

func cmdAPIServices(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("apiservices")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	r := c.dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	var reasons []string
	for _, name := range []string{"v1beta2.custom.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io"} {
		u, err := r.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("APIService %s: %v", name, err))
			continue
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		status, reason, msg := "not reported", "", ""
		for _, x := range conds {
			if m, ok := x.(map[string]any); ok && m["type"] == "Available" {
				status, reason, msg = fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
			}
		}
		if status != "True" {
			reasons = append(reasons, fmt.Sprintf("APIService %s: Available %s %s: %s", name, status, reason, msg))
		}
	}
	return c.report(reasons)
}

// battlePods are the names of the battle pods, sorted.
func (c *cluster) battlePods(ctx context.Context) ([]string, error) {
	l, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: battleSelector})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range l.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names, nil
}

// cmdCustomMetrics: through the aggregator, both metrics for every pod of
// the namespace (no selector: the other pods have no series and are left
// out) are exactly the battle pods.
func cmdCustomMetrics(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("custom-metrics")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	want, err := c.battlePods(ctx)
	if err != nil {
		return err
	}
	var reasons, served []string
	for _, m := range []string{p99Metric, pressureMetric} {
		path := fmt.Sprintf("/apis/%s/namespaces/%s/pods/*/%s", customMetricsGV, c.ns, m)
		raw, err := c.cs.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		var l struct {
			Items []struct {
				DescribedObject struct{ Name string } `json:"describedObject"`
			} `json:"items"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		var got []string
		for _, it := range l.Items {
			got = append(got, it.DescribedObject.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			reasons = append(reasons, fmt.Sprintf("%s pods/*/%s serves %v, the battle pods are %v", customMetricsGV, m, got, want))
			continue
		}
		served = append(served, fmt.Sprintf("%s namespaces/%s/pods/*/%s: %d items, the battle pods;", customMetricsGV, c.ns, m, len(got)))
	}
	if len(reasons) == 0 {
		fmt.Fprintln(c.out, strings.Join(served, " "))
	}
	return c.report(reasons)
}

// cmdPodSD writes, every second until stopped, the file_sd list that has
// Prometheus scrape the real battle processes as the battle pods (kwok's,
// no process behind them); see live.PodTargets.
func cmdPodSD(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("podsd")
	out := fs.String("out", "", "the file_sd `file` written")
	targets := fs.String("targets", "", "the battle processes' metrics `addresses`, comma-separated")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	if *out == "" || *targets == "" {
		return fmt.Errorf("%w: -out and -targets are required", errUsage)
	}
	pt := live.NewPodTargets(strings.Split(*targets, ","))
	var last []byte
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if l, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: battleSelector}); err == nil {
			groups := pt.Update(l.Items)
			data, err := json.Marshal(groups)
			if err != nil {
				return err
			}
			if string(data) != string(last) {
				if err := writeAtomic(*out, data); err != nil {
					return err
				}
				last = data
				var m []string
				for _, g := range groups {
					m = append(m, g.Labels["__meta_kubernetes_pod_name"]+"->"+g.Targets[0])
				}
				fmt.Fprintf(c.out, "%s %d battle pods: %s\n", time.Now().Format("15:04:05"), len(groups), strings.Join(m, " "))
			}
		} else if ctx.Err() == nil {
			fmt.Fprintf(c.out, "%s listing the battle pods: %v\n", time.Now().Format("15:04:05"), err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func writeAtomic(file string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".podsd-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// promQuery is the first value of an instant query, cut to 7 characters,
// or "-".
func promQuery(ctx context.Context, base, q string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return "-"
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "-"
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&r) != nil || len(r.Data.Result) == 0 || len(r.Data.Result[0].Value) != 2 {
		return "-"
	}
	v, _ := r.Data.Result[0].Value[1].(string)
	if v == "" {
		return "-"
	}
	return v[:min(len(v), 7)]
}

// watched is a process of the script's, named, that must stay up.
type watched struct {
	name string
	pid  int
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func parseWatch(s string) ([]watched, error) {
	var out []watched
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		name, p, ok := strings.Cut(f, "=")
		pid, err := strconv.Atoi(p)
		if !ok || err != nil || pid <= 0 {
			return nil, fmt.Errorf("-watch %q: want NAME=PID", f)
		}
		out = append(out, watched{name, pid})
	}
	return out, nil
}

type timeline struct {
	c        *cluster
	prom     string
	t0       time.Time
	cur, des int32
	peak     int32
	watch    []watched
	nextRow  time.Time
	rowEvery time.Duration
	hpa      string
}

func (t *timeline) header() {
	fmt.Fprintf(t.c.out, "%-8s %5s %-9s %-10s %-9s %-10s %-9s %s\n", "TIME", "T+s", "REPLICAS", "P99(HPA)", "P99(PROM)", "PRESS(HPA)", "PRESS(PROM)", "PHASE")
}

// row prints the time, the HPA's current/desired replicas, its two metrics
// as status.currentMetrics has them, and Prometheus's average of the
// per-pod recording rules over the battle pods.
func (t *timeline) row(ctx context.Context, phase string) {
	h, err := t.c.cs.AutoscalingV2().HorizontalPodAutoscalers(t.c.ns).Get(ctx, t.hpa, metav1.GetOptions{})
	if err != nil {
		return // a row missed; the next one tells
	}
	t.cur, t.des = h.Status.CurrentReplicas, h.Status.DesiredReplicas
	t.peak = max(t.peak, t.cur)
	sel := fmt.Sprintf(`{namespace=%q,job="battle"}`, t.c.ns)
	fmt.Fprintf(t.c.out, "%-8s %5d %-9s %-10s %-9s %-10s %-9s %s\n", time.Now().Format("15:04:05"), int(time.Since(t.t0).Seconds()),
		fmt.Sprintf("%d->%d", t.cur, t.des), live.HPAPodsMetric(h, p99Metric),
		promQuery(ctx, t.prom, "avg(instance:battle_latency_seconds:p99_1m"+sel+")"), live.HPAPodsMetric(h, pressureMetric),
		promQuery(ctx, t.prom, "avg(instance:battle_pressure:ratio_1m"+sel+")"), phase)
}

var errTimeout = errors.New("timeout")

// until prints a row every rowEvery and, after each, asks done; every
// second it checks the watched processes. It gives up after limit.
func (t *timeline) until(ctx context.Context, phase string, limit time.Duration, done func() (bool, error)) error {
	end := time.Now().Add(limit)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, w := range t.watch {
			if !alive(w.pid) {
				return fmt.Errorf("%s exited", w.name)
			}
		}
		if !time.Now().Before(t.nextRow) {
			t.row(ctx, phase)
			t.nextRow = t.nextRow.Add(t.rowEvery)
			if ok, err := done(); ok || err != nil {
				return err
			}
		}
		if !time.Now().Before(end) {
			return errTimeout
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func cmdAutoscale(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("autoscale")
	prom := fs.String("prometheus", "", "Prometheus's base `URL`")
	loadPID := fs.Int("load-pid", 0, "the load's `pid`, a process group leader: SIGTERM to its group stops it")
	watch := fs.String("watch", "", "the script's components that must stay up, `NAME=PID,...`")
	up := fs.Duration("up-deadline", 180*time.Second, "how long the load may take to scale battle up")
	hold := fs.Duration("hold", 15*time.Second, "how long the load goes on once battle scaled up")
	down := fs.Duration("down-deadline", 300*time.Second, "how long battle may take back to minReplicas without load")
	hpaName := fs.String("hpa", "battle", "the HorizontalPodAutoscaler's `name`")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	ws, err := parseWatch(*watch)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *prom == "" || *loadPID <= 0 {
		return fmt.Errorf("%w: -prometheus and -load-pid are required", errUsage)
	}
	h, err := c.cs.AutoscalingV2().HorizontalPodAutoscalers(c.ns).Get(ctx, *hpaName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	minR := int32(1)
	if h.Spec.MinReplicas != nil {
		minR = *h.Spec.MinReplicas
	}
	hpa := fmt.Sprintf("HorizontalPodAutoscaler %s/%s", c.ns, *hpaName)
	t := &timeline{c: c, prom: *prom, t0: time.Now(), watch: ws, rowEvery: 5 * time.Second, hpa: *hpaName}
	t.nextRow = t.t0
	fmt.Fprintln(c.out)
	fmt.Fprintln(c.out, "== autoscaling timeline (HPA sync 5 s; P99 in s, PRESS a ratio; HPA columns from status.currentMetrics, PROM the average of the per-pod recording rules)")
	t.header()
	err = t.until(ctx, "load", *up, func() (bool, error) {
		if !alive(*loadPID) {
			return false, fmt.Errorf("autoscale: the load ended before %s scaled up (logs/loadtest.log)", hpa)
		}
		return t.cur > minR, nil
	})
	if errors.Is(err, errTimeout) {
		return fmt.Errorf("autoscale: %s did not scale battle above %d within %s of load", hpa, minR, *up)
	} else if err != nil {
		return err
	}
	upAt := time.Since(t.t0)
	// Hold the load one more HPA period or two, so the timeline shows
	// where the scale-up goes, then stop it.
	if err := t.until(ctx, "load", *hold, func() (bool, error) { return false, nil }); err != nil && !errors.Is(err, errTimeout) {
		return err
	}
	if err := syscall.Kill(-*loadPID, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping the load (process group %d): %w", *loadPID, err)
	}
	fmt.Fprintf(c.out, "-- load stopped at T+%ds\n", int(time.Since(t.t0).Seconds()))
	err = t.until(ctx, "idle", *down, func() (bool, error) { return t.cur == minR && t.des == minR, nil })
	if errors.Is(err, errTimeout) {
		return fmt.Errorf("autoscale: %s did not scale battle back to %d within %s without load (at %d)", hpa, minR, *down, t.cur)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "== autoscale: battle scaled %d -> above %d at T+%ds under load (peak %d), back to %d at T+%ds without\n\n",
		minR, minR, int(upAt.Seconds()), t.peak, minR, int(time.Since(t.t0).Seconds()))
	return nil
}
