package deploycheck

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
)

// CheckSelectors checks that every Service, PodDisruptionBudget,
// NetworkPolicy and PodMonitor selects the pods of at least one workload,
// that every workload's selector matches its own template, and that every
// HPA and ScaledObject scales a rendered workload.
func CheckSelectors(objs []Object) []error {
	ws := Workloads(objs)
	var errs []error
	for _, w := range ws {
		sel, err := metav1.LabelSelectorAsSelector(w.Selector)
		switch {
		case w.Selector == nil:
			errs = append(errs, errorf(w.Owner, "has no selector"))
		case err != nil:
			errs = append(errs, errorf(w.Owner, "selector: %v", err))
		case sel.Empty():
			errs = append(errs, errorf(w.Owner, "selector is empty"))
		case !sel.Matches(w.Labels):
			errs = append(errs, errorf(w.Owner, "selector %s does not match its pod template's labels %s", sel, w.Labels))
		}
	}
	for _, o := range objs {
		ns := o.Meta.GetNamespace()
		switch v := o.Obj.(type) {
		case *corev1.Service:
			if len(v.Spec.Selector) == 0 {
				continue // a Service without selector has its endpoints made by hand
			}
			sel := labels.SelectorFromSet(v.Spec.Selector)
			if len(selected(ws, ns, sel)) == 0 {
				errs = append(errs, errorf(o, "selector %s matches no pod template in namespace %s", sel, ns))
			}
		case *policyv1.PodDisruptionBudget:
			errs = append(errs, matchSome(o, ws, ns, v.Spec.Selector, "selector")...)
		case *networkingv1.NetworkPolicy:
			errs = append(errs, checkNetworkPolicySelectors(o, v, ws)...)
		case *monitoringv1.PodMonitor:
			for _, nsName := range podMonitorNamespaces(o, v) {
				errs = append(errs, matchSome(o, ws, nsName, &v.Spec.Selector, "selector")...)
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			r := v.Spec.ScaleTargetRef
			if _, ok := find(objs, r.Kind, ns, r.Name); !ok {
				errs = append(errs, errorf(o, "scaleTargetRef %s %s is not rendered", r.Kind, r.Name))
			}
		case *ScaledObject:
			r := v.Spec.ScaleTargetRef
			if r == nil {
				errs = append(errs, errorf(o, "has no scaleTargetRef"))
				continue
			}
			kind := r.Kind
			if kind == "" {
				kind = "Deployment"
			}
			if _, ok := find(objs, kind, ns, r.Name); !ok {
				errs = append(errs, errorf(o, "scaleTargetRef %s %s is not rendered", kind, r.Name))
			}
		}
	}
	return errs
}

// matchSome reports an error unless ls is a valid, non-empty selector
// matching some workload's pods in ns.
func matchSome(o Object, ws []Workload, ns string, ls *metav1.LabelSelector, what string) []error {
	if ls == nil {
		return []error{errorf(o, "has no %s", what)}
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return []error{errorf(o, "%s: %v", what, err)}
	}
	if len(selected(ws, ns, sel)) == 0 {
		return []error{errorf(o, "%s %s matches no pod template in namespace %s", what, selString(sel), ns)}
	}
	return nil
}

func selString(sel labels.Selector) string {
	if sel.Empty() {
		return "{} (every pod)"
	}
	return "{" + sel.String() + "}"
}

// podMonitorNamespaces are the namespaces a PodMonitor looks in; "" for
// any.
func podMonitorNamespaces(o Object, pm *monitoringv1.PodMonitor) []string {
	switch {
	case pm.Spec.NamespaceSelector.Any:
		return []string{""}
	case len(pm.Spec.NamespaceSelector.MatchNames) > 0:
		return pm.Spec.NamespaceSelector.MatchNames
	default:
		return []string{o.Meta.GetNamespace()}
	}
}

// checkNetworkPolicySelectors checks the policy's podSelector and the
// podSelectors of its peers that name a Levee tier (select on NameLabel)
// in the policy's own namespace. A peer with a namespaceSelector, or one
// that selects clients by a label of their own (levee/admin-client for
// the operators' tools), selects pods the manifests do not render.
func checkNetworkPolicySelectors(o Object, np *networkingv1.NetworkPolicy, ws []Workload) []error {
	ns := o.Meta.GetNamespace()
	errs := matchSome(o, ws, ns, &np.Spec.PodSelector, "podSelector")
	peers := func(dir string, i int, ps []networkingv1.NetworkPolicyPeer) {
		for j, p := range ps {
			if p.PodSelector == nil || p.NamespaceSelector != nil || !selectsTier(p.PodSelector) {
				continue
			}
			errs = append(errs, matchSome(o, ws, ns, p.PodSelector, fmt.Sprintf("%s[%d] peer %d podSelector", dir, i, j))...)
		}
	}
	for i, r := range np.Spec.Ingress {
		peers("ingress", i, r.From)
	}
	for i, r := range np.Spec.Egress {
		peers("egress", i, r.To)
	}
	return errs
}

// selectsTier tells whether a selector selects on NameLabel.
func selectsTier(ls *metav1.LabelSelector) bool {
	if _, ok := ls.MatchLabels[NameLabel]; ok {
		return true
	}
	for _, e := range ls.MatchExpressions {
		if e.Key == NameLabel {
			return true
		}
	}
	return false
}
