package live

import (
	"fmt"
	"io"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Row is one line of the overlay table: an object and its status.
type Row struct{ Kind, Name, Status string }

// Rows describes objs (the live copies of an overlay's rendered objects)
// and then the claims of s, by kind: workloads' Ready replicas, Services'
// ready endpoints, budgets, HPAs, claims; "accepted" for the rest.
func Rows(objs []*unstructured.Unstructured, s *State) ([]Row, error) {
	var rows []Row
	for _, u := range objs {
		name := u.GetName()
		if ns := u.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		st, err := status(u, s)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), name, err)
		}
		rows = append(rows, Row{u.GetKind(), name, st})
	}
	for i := range s.Claims {
		c := &s.Claims[i]
		rows = append(rows, Row{"PersistentVolumeClaim", c.Namespace + "/" + c.Name, claimStatus(c)})
	}
	return rows, nil
}

// WriteTable prints rows in aligned columns under KIND NAME STATUS.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSTATUS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Kind, r.Name, r.Status)
	}
	return tw.Flush()
}

func claimStatus(c *corev1.PersistentVolumeClaim) string {
	class := ""
	if c.Spec.StorageClassName != nil {
		class = *c.Spec.StorageClassName
	}
	size := c.Status.Capacity[corev1.ResourceStorage]
	return fmt.Sprintf("%s to %s (class %s, %s)", c.Status.Phase, c.Spec.VolumeName, class, size.String())
}

func status(u *unstructured.Unstructured, s *State) (string, error) {
	conv := func(into any) error {
		return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
	}
	fromHPA := func(kind string) string {
		if h := hpaFor(s.HPAs, kind, u.GetName()); h != nil {
			return " (replicas from HPA " + h.Name + ")"
		}
		return ""
	}
	switch u.GetKind() {
	case "Deployment":
		var d appsv1.Deployment
		if err := conv(&d); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d/%d Ready%s", d.Status.ReadyReplicas, replicas(d.Spec.Replicas), fromHPA("Deployment")), nil
	case "StatefulSet":
		var st appsv1.StatefulSet
		if err := conv(&st); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d/%d Ready%s", st.Status.ReadyReplicas, replicas(st.Spec.Replicas), fromHPA("StatefulSet")), nil
	case "Service":
		var svc corev1.Service
		if err := conv(&svc); err != nil {
			return "", err
		}
		ip := " " + svc.Spec.ClusterIP
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			ip = " headless"
		}
		sl := slicesOf(s.Slices, svc.Name)
		var ready int
		for _, x := range sl {
			for _, e := range x.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready++
				}
			}
		}
		out := fmt.Sprintf("%s%s, %d ready endpoints in %d EndpointSlice(s)", svc.Spec.Type, ip, ready, len(sl))
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			out += ", no external IP (no cloud provider)"
		}
		return out, nil
	case "PodDisruptionBudget":
		var b policyv1.PodDisruptionBudget
		if err := conv(&b); err != nil {
			return "", err
		}
		return fmt.Sprintf("expects %d pods, %d healthy, %d disruption(s) allowed",
			b.Status.ExpectedPods, b.Status.CurrentHealthy, b.Status.DisruptionsAllowed), nil
	case "HorizontalPodAutoscaler":
		var h autoscalingv2.HorizontalPodAutoscaler
		if err := conv(&h); err != nil {
			return "", err
		}
		able, _ := condition(&h, autoscalingv2.AbleToScale)
		act, _ := condition(&h, autoscalingv2.ScalingActive)
		return fmt.Sprintf("%d->%d (min %d, max %d); AbleToScale %s %s; ScalingActive %s %s",
			h.Status.CurrentReplicas, h.Status.DesiredReplicas, replicas(h.Spec.MinReplicas), h.Spec.MaxReplicas,
			able.Status, able.Reason, act.Status, act.Reason), nil
	case "ScaledObject":
		return "accepted (no KEDA operator in phase 1: no HPA made from it)", nil
	}
	return "accepted", nil
}
