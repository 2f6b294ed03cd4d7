// Package live checks a Levee deployment as a running cluster reports it,
// for make k8s-test: every Deployment and StatefulSet has its replicas
// Ready, every Service's EndpointSlices list one ready endpoint per Ready
// pod its selector matches, every claim is Bound, every
// PodDisruptionBudget counts the pods it selects, every HPA has been
// evaluated, every metric an HPA names is served; and, for the drain
// checks, the gate's pods, endpoints and budget around an eviction.
//
// Each check takes typed objects (k8s.io/api) as a client listed them and
// returns one reason per object that is not as it should be, naming it
// ("Service levee/gate-admin: ..."), so the rules are tested without a
// cluster; selectors are matched with apimachinery's label selectors, as
// the offline checks of package deploycheck match them against the pod
// templates. cmd/k8scheck lists the objects with client-go and runs these.
package live

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/leveehq/levee/tools/deploycheck"
)

// State is what a namespace holds, as listed.
type State struct {
	Deployments  []appsv1.Deployment
	StatefulSets []appsv1.StatefulSet
	HPAs         []autoscalingv2.HorizontalPodAutoscaler
	Services     []corev1.Service
	Slices       []discoveryv1.EndpointSlice
	Pods         []corev1.Pod
	Claims       []corev1.PersistentVolumeClaim
	PDBs         []policyv1.PodDisruptionBudget
	Secrets      []corev1.Secret
	// Now is when it was listed (the certificates' validity is checked at it).
	Now time.Time
}

// ServiceNameLabel is the label an EndpointSlice names its Service by.
const ServiceNameLabel = discoveryv1.LabelServiceName

func ref(kind string, m metav1.Object) string {
	return kind + " " + m.GetNamespace() + "/" + m.GetName()
}

// PodReady tells whether a pod is Ready and not being deleted.
func PodReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func val(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// replicas is a workload's spec.replicas, 1 when unset (the API default).
func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// hpaFor is the first HPA scaling kind/name, or nil.
func hpaFor(hpas []autoscalingv2.HorizontalPodAutoscaler, kind, name string) *autoscalingv2.HorizontalPodAutoscaler {
	for i := range hpas {
		r := hpas[i].Spec.ScaleTargetRef
		if r.Kind == kind && r.Name == name {
			return &hpas[i]
		}
	}
	return nil
}

// workload is what the checks read of a Deployment or a StatefulSet.
type workload struct {
	kind                     string
	meta                     metav1.Object
	replicas                 int32
	ready, updated, observed int64
}

func workloads(s *State) []workload {
	var ws []workload
	for i := range s.Deployments {
		d := &s.Deployments[i]
		ws = append(ws, workload{"Deployment", d, replicas(d.Spec.Replicas),
			int64(d.Status.ReadyReplicas), int64(d.Status.UpdatedReplicas), d.Status.ObservedGeneration})
	}
	for i := range s.StatefulSets {
		st := &s.StatefulSets[i]
		ws = append(ws, workload{"StatefulSet", st, replicas(st.Spec.Replicas),
			int64(st.Status.ReadyReplicas), int64(st.Status.UpdatedReplicas), st.Status.ObservedGeneration})
	}
	return ws
}

// Workloads: every Deployment and StatefulSet rolled out with all its
// replicas Ready and updated, and an HPA's target at least at its
// minReplicas.
func Workloads(s *State) []string {
	var out []string
	for _, w := range workloads(s) {
		h := hpaFor(s.HPAs, w.kind, w.meta.GetName())
		switch {
		case h != nil && w.replicas < replicas(h.Spec.MinReplicas):
			out = append(out, fmt.Sprintf("%s: %d replicas, below HorizontalPodAutoscaler %s's minReplicas %d",
				ref(w.kind, w.meta), w.replicas, h.Name, replicas(h.Spec.MinReplicas)))
		case w.ready != int64(w.replicas) || w.updated != int64(w.replicas) || w.observed != w.meta.GetGeneration():
			out = append(out, fmt.Sprintf("%s: %d/%d Ready, %d updated", ref(w.kind, w.meta), w.ready, w.replicas, w.updated))
		}
	}
	return out
}

// readyEndpoints are the ready endpoints (their first address) that the
// EndpointSlices of Service svc list, without repeats.
func readyEndpoints(slices_ []discoveryv1.EndpointSlice, svc string) []string {
	var out []string
	for _, sl := range slicesOf(slices_, svc) {
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready && len(e.Addresses) > 0 && !slices.Contains(out, e.Addresses[0]) {
				out = append(out, e.Addresses[0])
			}
		}
	}
	return out
}

func slicesOf(all []discoveryv1.EndpointSlice, svc string) []discoveryv1.EndpointSlice {
	var out []discoveryv1.EndpointSlice
	for _, sl := range all {
		if sl.Labels[ServiceNameLabel] == svc {
			out = append(out, sl)
		}
	}
	return out
}

// Services: a Service with a selector matches a Ready pod, and its
// EndpointSlices list one ready endpoint for each Ready pod it matches.
func Services(s *State) []string {
	var out []string
	for i := range s.Services {
		svc := &s.Services[i]
		if len(svc.Spec.Selector) == 0 {
			continue // endpoints made by hand
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		var matched int
		for j := range s.Pods {
			p := &s.Pods[j]
			if p.Namespace == svc.Namespace && PodReady(p) && sel.Matches(labels.Set(p.Labels)) {
				matched++
			}
		}
		eps := readyEndpoints(s.Slices, svc.Name)
		switch {
		case matched == 0:
			out = append(out, fmt.Sprintf("%s: its selector %s matches no Ready pod", ref("Service", svc), sel))
		case len(eps) != matched:
			out = append(out, fmt.Sprintf("%s: %d ready endpoints in its EndpointSlices, %d Ready pods match %s",
				ref("Service", svc), len(eps), matched, sel))
		}
	}
	return out
}

// Claims: every claim of every StatefulSet replica exists and is Bound.
func Claims(s *State) []string {
	phase := map[string]corev1.PersistentVolumeClaimPhase{}
	for _, c := range s.Claims {
		phase[c.Namespace+"/"+c.Name] = c.Status.Phase
	}
	var out []string
	for _, st := range s.StatefulSets {
		for i := range replicas(st.Spec.Replicas) {
			for _, t := range st.Spec.VolumeClaimTemplates {
				n := fmt.Sprintf("%s/%s-%s-%d", st.Namespace, t.Name, st.Name, i)
				p, ok := phase[n]
				switch {
				case !ok:
					out = append(out, "PersistentVolumeClaim "+n+": missing")
				case p != corev1.ClaimBound:
					out = append(out, fmt.Sprintf("PersistentVolumeClaim %s: %s", n, p))
				}
			}
		}
	}
	return out
}

// selects counts the pods (not being deleted) in ns that ls matches; an
// invalid selector matches none.
func selects(pods []corev1.Pod, ns string, ls *metav1.LabelSelector) int {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || ls == nil {
		return 0
	}
	var n int
	for i := range pods {
		p := &pods[i]
		if p.Namespace == ns && p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	return n
}

// PDBs: a PodDisruptionBudget, observed, counts the pods its selector
// matches (expectedPods, from their controller), all of them healthy.
func PDBs(s *State) []string {
	var out []string
	for i := range s.PDBs {
		b := &s.PDBs[i]
		n := int32(selects(s.Pods, b.Namespace, b.Spec.Selector))
		st := b.Status
		if n == 0 || st.ExpectedPods != n || st.CurrentHealthy != n || st.ObservedGeneration != b.Generation {
			out = append(out, fmt.Sprintf("%s: expects %d pods, %d healthy, %d match its selector",
				ref("PodDisruptionBudget", b), st.ExpectedPods, st.CurrentHealthy, n))
		}
	}
	return out
}

// HPAExpect is what the HPAs must report: Unavailable (no metrics API:
// ScalingActive False, FailedGet...Metric) or Active (ScalingActive True).
type HPAExpect string

// The values of HPAExpect (make k8s-test's K8S_TEST_HPA).
const (
	Unavailable HPAExpect = "unavailable"
	Active      HPAExpect = "active"
)

// ParseHPAExpect checks an HPAExpect's spelling.
func ParseHPAExpect(s string) (HPAExpect, error) {
	switch e := HPAExpect(s); e {
	case Unavailable, Active:
		return e, nil
	}
	return "", fmt.Errorf("hpa expectation %q: want %s or %s", s, Unavailable, Active)
}

// condition is an HPA condition by type; ok false when not reported.
func condition(h *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) (autoscalingv2.HorizontalPodAutoscalerCondition, bool) {
	for _, c := range h.Status.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return autoscalingv2.HorizontalPodAutoscalerCondition{}, false
}

func condStatus(c autoscalingv2.HorizontalPodAutoscalerCondition, ok bool) string {
	if !ok {
		return "not reported yet"
	}
	return string(c.Status)
}

var failedGetMetric = regexp.MustCompile(`^FailedGet.*Metric$`)

// HPAs: the HPA controller has evaluated every HPA: AbleToScale True, and
// ScalingActive True (Active) or False for want of metrics (Unavailable).
func HPAs(s *State, expect HPAExpect) []string {
	var out []string
	for i := range s.HPAs {
		h := &s.HPAs[i]
		able, aok := condition(h, autoscalingv2.AbleToScale)
		act, sok := condition(h, autoscalingv2.ScalingActive)
		switch {
		case !aok || able.Status != corev1.ConditionTrue:
			out = append(out, fmt.Sprintf("%s: AbleToScale %s %s", ref("HorizontalPodAutoscaler", h), condStatus(able, aok), able.Reason))
		case expect == Active && (!sok || act.Status != corev1.ConditionTrue):
			out = append(out, fmt.Sprintf("%s: ScalingActive %s %s: %s", ref("HorizontalPodAutoscaler", h), condStatus(act, sok), act.Reason, act.Message))
		case expect == Unavailable && (!sok || act.Status != corev1.ConditionFalse || !failedGetMetric.MatchString(act.Reason)):
			out = append(out, fmt.Sprintf("%s: ScalingActive %s %s, expected False with FailedGet...Metric (no metrics API in phase 1)",
				ref("HorizontalPodAutoscaler", h), condStatus(act, sok), act.Reason))
		}
	}
	return out
}

// Ready is every check above, and Certificates: the overlay is up.
func Ready(s *State, expect HPAExpect) []string {
	var out []string
	out = append(out, Workloads(s)...)
	out = append(out, Services(s)...)
	out = append(out, Claims(s)...)
	out = append(out, PDBs(s)...)
	out = append(out, Certificates(s, s.Now)...)
	return append(out, HPAs(s, expect)...)
}

// HPAMetrics: every metric an HPA names is one of served; src says where
// served came from, for the message.
func HPAMetrics(hpas []autoscalingv2.HorizontalPodAutoscaler, served []string, src string) []string {
	var out []string
	for i := range hpas {
		h := &hpas[i]
		for _, m := range h.Spec.Metrics {
			name, ok := deploycheck.HPAMetricName(m)
			if ok && !slices.Contains(served, name) {
				out = append(out, fmt.Sprintf("%s names metric %s, which nothing serves (%s: %s)",
					ref("HorizontalPodAutoscaler", h), name, src, strings.Join(served, ", ")))
			}
		}
	}
	return out
}
