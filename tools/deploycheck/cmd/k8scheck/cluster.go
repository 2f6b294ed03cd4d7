package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leveehq/levee/tools/deploycheck/live"
)

// cluster is one check's connection and output.
type cluster struct {
	out, log io.Writer
	ns       string
	cs       kubernetes.Interface
	dyn      dynamic.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
}

// flags returns a check's flag set with -kubeconfig and -n.
func (c *cluster) flags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.log)
	kc := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "the kubeconfig `file` of the cluster")
	fs.StringVar(&c.ns, "n", "levee", "the `namespace` checked")
	return fs, kc
}

// connect parses args with fs and builds the clients.
func (c *cluster) connect(fs *flag.FlagSet, kc *string, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *kc == "" {
		return fmt.Errorf("%w: -kubeconfig is required", errUsage)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kc)
	if err != nil {
		return fmt.Errorf("-kubeconfig %s: %w", *kc, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.cs.Discovery()))
	return nil
}

// state lists what the checks read in the namespace.
func (c *cluster) state(ctx context.Context) (*live.State, error) {
	o, ns, core := metav1.ListOptions{}, c.ns, c.cs.CoreV1()
	dep, e1 := c.cs.AppsV1().Deployments(ns).List(ctx, o)
	sts, e2 := c.cs.AppsV1().StatefulSets(ns).List(ctx, o)
	hpa, e3 := c.cs.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, o)
	svc, e4 := core.Services(ns).List(ctx, o)
	eps, e5 := c.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
	pod, e6 := core.Pods(ns).List(ctx, o)
	pvc, e7 := core.PersistentVolumeClaims(ns).List(ctx, o)
	pdb, e8 := c.cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, o)
	sec, e9 := core.Secrets(ns).List(ctx, o)
	if err := errors.Join(e1, e2, e3, e4, e5, e6, e7, e8, e9); err != nil {
		return nil, fmt.Errorf("listing namespace %s: %w", ns, err)
	}
	return &live.State{Deployments: dep.Items, StatefulSets: sts.Items, HPAs: hpa.Items, Services: svc.Items,
		Slices: eps.Items, Pods: pod.Items, Claims: pvc.Items, PDBs: pdb.Items, Secrets: sec.Items, Now: time.Now()}, nil
}

// rendered reads the documents of a rendered overlay (kustomize output),
// without decoding them into types (a broken copy may not decode).
func rendered(file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := d.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, len(out)+1, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// resource is the dynamic client for u's kind, in u's namespace.
func (c *cluster) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	r := c.dyn.Resource(m.Resource)
	if ns := u.GetNamespace(); ns != "" {
		return r.Namespace(ns), nil
	}
	return r, nil
}

func ref(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

func cmdNodes(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("nodes")
	want := fs.Int("want", 3, "the `number` of nodes that must be Ready")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	l, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var n int
	for _, node := range l.Items {
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	if n != *want {
		return c.report([]string{fmt.Sprintf("%d of %d nodes Ready", n, *want)})
	}
	return nil
}

func cmdReady(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("ready")
	hpa := fs.String("hpa", string(live.Unavailable), "what the HPAs must report: unavailable (no metrics API) or active")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	expect, err := live.ParseHPAExpect(*hpa)
	if err != nil {
		return fmt.Errorf("%w: -hpa: %w", errUsage, err)
	}
	s, err := c.state(ctx)
	if err != nil {
		return err
	}
	return c.report(live.Ready(s, expect))
}

func cmdHPAMetrics(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("hpa-metrics")
	rules := fs.String("adapter-rules", "", "prometheus-adapter's rules `file`: the names its rules give are served")
	disc := fs.Bool("discovery", false, "the names the custom metrics API's discovery lists are served")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	var served []string
	var src string
	switch {
	case *disc && *rules == "", !*disc && *rules != "":
	default:
		return fmt.Errorf("%w: give one of -adapter-rules FILE and -discovery", errUsage)
	}
	if *disc {
		var err error
		if served, err = c.servedMetrics(); err != nil {
			return err
		}
		src = "the metrics adapter's discovery (" + customMetricsGV + ") lists"
	} else {
		data, err := os.ReadFile(*rules)
		if err != nil {
			return err
		}
		if served, err = live.AdapterRuleNames(*rules, data); err != nil {
			return err
		}
		src = "the adapter rules serve"
	}
	l, err := c.cs.AutoscalingV2().HorizontalPodAutoscalers(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	return c.report(live.HPAMetrics(l.Items, served, src))
}

func cmdTable(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("table")
	file := fs.String("f", "", "the rendered overlay `file`")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	docs, err := rendered(*file)
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		r, err := c.resource(d)
		if err != nil {
			return err
		}
		u, err := r.Get(ctx, d.GetName(), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", ref(d), err)
		}
		objs = append(objs, u)
	}
	s, err := c.state(ctx)
	if err != nil {
		return err
	}
	rows, err := live.Rows(objs, s)
	if err != nil {
		return err
	}
	return live.WriteTable(c.out, rows)
}

// testVolumes selects the PersistentVolumes the script makes.
const testVolumes = "levee-k8s-test=true"

func cmdTeardown(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("teardown")
	file := fs.String("f", "", "the rendered overlay `file` whose objects are deleted")
	nss := fs.String("namespaces", "levee,monitoring", "only objects in these `namespaces` are deleted (never a Namespace)")
	timeout := fs.Duration("timeout", 180*time.Second, "how long the deletions may take")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	docs, err := rendered(*file)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &bg}
	var waits []gone
	for _, d := range docs {
		if d.GetKind() == "Namespace" || !slices.Contains(strings.Split(*nss, ","), d.GetNamespace()) {
			continue
		}
		r, err := c.resource(d)
		if err != nil {
			return err
		}
		if err := r.Delete(ctx, d.GetName(), del); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", ref(d), err)
		}
		waits = append(waits, gone{ref(d), func(ctx context.Context) (int, error) {
			_, err := r.Get(ctx, d.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return 0, nil
			}
			return 1, err
		}})
	}
	if err := waitGone(ctx, c, waits...); err != nil {
		return err
	}
	// No ReplicaSet left to make new pods, then no pod, no slice.
	all := func(gvr schema.GroupVersionResource, ns, selector string) gone {
		r := c.dyn.Resource(gvr).Namespace(ns)
		var ri dynamic.ResourceInterface = r
		if ns == "" {
			ri = c.dyn.Resource(gvr)
		}
		return gone{gvr.Resource + " " + selector, func(ctx context.Context) (int, error) {
			l, err := ri.List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return 0, err
			}
			for _, u := range l.Items {
				if u.GetDeletionTimestamp() == nil {
					if err := ri.Delete(ctx, u.GetName(), del); err != nil && !apierrors.IsNotFound(err) {
						return 0, fmt.Errorf("deleting %s %s: %w", gvr.Resource, u.GetName(), err)
					}
				}
			}
			return len(l.Items), nil
		}}
	}
	for _, step := range [][]gone{
		{all(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, c.ns, "")},
		{all(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, c.ns, "")},
		{
			all(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, c.ns, ""),
			all(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, c.ns, ""),
			all(schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, c.ns, ""),
		},
		{all(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}, "", testVolumes)},
	} {
		if err := waitGone(ctx, c, step...); err != nil {
			return err
		}
	}
	return nil
}

// gone is something teardown waits to be deleted: left counts what is
// still there.
type gone struct {
	what string
	left func(context.Context) (int, error)
}

// waitGone polls each left until all report none left.
func waitGone(ctx context.Context, c *cluster, gs ...gone) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting []string
		for _, g := range gs {
			n, err := g.left(ctx)
			if err != nil && ctx.Err() == nil {
				return err
			}
			if n > 0 || err != nil {
				waiting = append(waiting, fmt.Sprintf("%s (%d left)", g.what, n))
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("teardown: still there: %s", strings.Join(waiting, ", "))
		case <-tick.C:
		}
	}
}
