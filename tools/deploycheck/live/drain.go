package live

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// The gate the drain checks disrupt: its Deployment and PDB are named
// Gate, its pods carry GateLabel=Gate, and the Services GateServices list
// them.
const (
	Gate      = "gate"
	GateLabel = "app.kubernetes.io/name"
)

// GateServices are the Services whose endpoints are the gate's pods.
var GateServices = []string{"gate", "gate-admin"}

// GatePods are the gate's pods among s.Pods, in listing order.
func GatePods(s *State) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range s.Pods {
		if s.Pods[i].Labels[GateLabel] == Gate {
			out = append(out, &s.Pods[i])
		}
	}
	return out
}

// ReadyGates are the names of the gate's Ready pods, not being deleted.
func ReadyGates(s *State) []string {
	var out []string
	for _, p := range GatePods(s) {
		if PodReady(p) {
			out = append(out, p.Name)
		}
	}
	return out
}

func (s *State) pdb(name string) *policyv1.PodDisruptionBudget {
	for i := range s.PDBs {
		if s.PDBs[i].Name == name {
			return &s.PDBs[i]
		}
	}
	return nil
}

// GateSteady: the Deployment gate has its replicas (want of them) Ready,
// as many gate pods exist, none terminating and none holding finalizer,
// each GateServices lists exactly the Ready gate pods as ready endpoints,
// and the PDB gate, observed, allows allowed disruptions.
func GateSteady(s *State, want, allowed int32, finalizer string) []string {
	var out []string
	var d *workload
	for _, w := range workloads(s) {
		if w.kind == "Deployment" && w.meta.GetName() == Gate {
			d = &w
		}
	}
	if d == nil {
		out = append(out, "Deployment levee/gate: not found")
	} else if d.ready != int64(want) || d.replicas != want || d.observed != d.meta.GetGeneration() {
		out = append(out, fmt.Sprintf("%s: %d/%d Ready, want %d/%d", ref("Deployment", d.meta), d.ready, d.replicas, want, want))
	}
	pods, ready := GatePods(s), ReadyGates(s)
	if len(pods) != int(want) || len(ready) != int(want) {
		var names []string
		for _, p := range pods {
			n := p.Name
			if p.DeletionTimestamp != nil {
				n += " (terminating)"
			}
			names = append(names, n)
		}
		out = append(out, fmt.Sprintf("Deployment levee/gate: pods %s, want %d Ready, none terminating", strings.Join(names, ", "), want))
	}
	for _, p := range pods {
		if slices.Contains(p.Finalizers, finalizer) {
			out = append(out, fmt.Sprintf("%s: still has the finalizer %s", ref("Pod", p), finalizer))
		}
	}
	slices.Sort(ready)
	for _, svc := range GateServices {
		var eps []string
		for _, sl := range slicesOf(s.Slices, svc) {
			for _, e := range sl.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready && e.TargetRef != nil {
					eps = append(eps, e.TargetRef.Name)
				}
			}
		}
		slices.Sort(eps)
		if !slices.Equal(eps, ready) {
			out = append(out, fmt.Sprintf("Service levee/%s: ready endpoints for pods [%s], want the Ready gate pods [%s]",
				svc, strings.Join(eps, ", "), strings.Join(ready, ", ")))
		}
	}
	b := s.pdb(Gate)
	switch {
	case b == nil:
		out = append(out, "PodDisruptionBudget levee/gate: not found")
	case b.Status.ObservedGeneration != b.Generation || b.Status.DisruptionsAllowed != allowed:
		out = append(out, fmt.Sprintf("%s: %d disruption(s) allowed (%d healthy of %d, %d needed), want %d",
			ref("PodDisruptionBudget", b), b.Status.DisruptionsAllowed, b.Status.CurrentHealthy, b.Status.ExpectedPods, b.Status.DesiredHealthy, allowed))
	}
	return out
}

// PDBCountsOut: pod (nil when gone) still exists, terminating, and the PDB
// gate has counted it out: of want pods, want-1 healthy, 0 disruptions
// allowed.
func PDBCountsOut(s *State, pod string, want int32) []string {
	var p *corev1.Pod
	for i := range s.Pods {
		if s.Pods[i].Name == pod {
			p = &s.Pods[i]
		}
	}
	b := s.pdb(Gate)
	switch {
	case p == nil:
		return []string{fmt.Sprintf("Pod levee/%s: gone before the PodDisruptionBudget counted it out", pod)}
	case p.DeletionTimestamp == nil:
		return []string{fmt.Sprintf("Pod levee/%s: not terminating after its eviction", pod)}
	case b == nil:
		return []string{"PodDisruptionBudget levee/gate: not found"}
	case b.Status.DisruptionsAllowed != 0 || b.Status.CurrentHealthy != want-1 || b.Status.ExpectedPods != want:
		return []string{fmt.Sprintf("%s: %d disruption(s) allowed, %d healthy of %d (%d needed) while levee/%s is terminating; want 0 allowed, %d healthy of %d",
			ref("PodDisruptionBudget", b), b.Status.DisruptionsAllowed, b.Status.CurrentHealthy, b.Status.ExpectedPods, b.Status.DesiredHealthy, pod, want-1, want)}
	}
	return nil
}

func boolString(p *bool) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// EndpointsTerminating: pod still exists with a deletionTimestamp, and
// each of GateServices lists its endpoint not ready and terminating.
func EndpointsTerminating(s *State, pod string) []string {
	var p *corev1.Pod
	for i := range s.Pods {
		if s.Pods[i].Name == pod {
			p = &s.Pods[i]
		}
	}
	switch {
	case p == nil:
		return []string{fmt.Sprintf("Pod levee/%s: gone before its endpoints were seen not ready", pod)}
	case p.DeletionTimestamp == nil:
		return []string{fmt.Sprintf("Pod levee/%s: no deletionTimestamp yet", pod)}
	}
	var out []string
	for _, svc := range GateServices {
		var found bool
		for _, sl := range slicesOf(s.Slices, svc) {
			for _, e := range sl.Endpoints {
				if e.TargetRef == nil || e.TargetRef.Name != pod {
					continue
				}
				found = true
				c := e.Conditions
				if c.Ready == nil || *c.Ready || c.Terminating == nil || !*c.Terminating {
					out = append(out, fmt.Sprintf("Service levee/%s: EndpointSlice levee/%s lists the terminating pod levee/%s ready %s, terminating %s; want ready false, terminating true",
						svc, sl.Name, pod, boolString(c.Ready), boolString(c.Terminating)))
				}
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("Service levee/%s: its EndpointSlices list no endpoint for the terminating pod levee/%s; want it listed ready false, terminating true", svc, pod))
		}
	}
	return out
}

// EndpointConditions describes pod's endpoints in every Service's slices:
// "gate: ready false, serving true, terminating true; ...".
func EndpointConditions(s *State, pod string) string {
	var parts []string
	for _, sl := range s.Slices {
		for _, e := range sl.Endpoints {
			if e.TargetRef != nil && e.TargetRef.Name == pod {
				c := e.Conditions
				parts = append(parts, fmt.Sprintf("%s: ready %s, serving %s, terminating %s",
					sl.Labels[ServiceNameLabel], boolString(c.Ready), boolString(c.Serving), boolString(c.Terminating)))
			}
		}
	}
	return strings.Join(parts, "; ")
}
