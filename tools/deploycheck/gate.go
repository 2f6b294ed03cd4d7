package deploycheck

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/leveehq/levee/gate"
)

// NameLabel is the label every Levee pod carries with its tier's name.
const NameLabel = "app.kubernetes.io/name"

// privatePorts are container port names that must never be reachable
// through a LoadBalancer or NodePort Service: the gate's admin API and
// metrics (ops) and its gRPC health port.
var privatePorts = []string{"ops", "health"}

// CheckGate checks the gate's draining budget, terminationGracePeriodSeconds
// >= preStop pause + -drain + -shutdown-grace (the flags' defaults when
// absent), and that no LoadBalancer or NodePort Service reaches a private
// port (ops, health) of any pod.
func CheckGate(objs []Object) []error {
	var errs []error
	ws := Workloads(objs)
	var gates []Workload
	for _, w := range ws {
		if w.Labels[NameLabel] == "gate" {
			gates = append(gates, w)
		}
	}
	if len(gates) == 0 {
		errs = append(errs, fmt.Errorf("no workload labelled %s=gate", NameLabel))
	}
	for _, w := range gates {
		errs = append(errs, checkGateGrace(w)...)
	}
	for _, o := range objs {
		svc, ok := o.Obj.(*corev1.Service)
		if !ok || (svc.Spec.Type != corev1.ServiceTypeLoadBalancer && svc.Spec.Type != corev1.ServiceTypeNodePort) || len(svc.Spec.Selector) == 0 {
			continue
		}
		for _, w := range selected(ws, o.Meta.GetNamespace(), labels.SelectorFromSet(svc.Spec.Selector)) {
			for _, p := range svc.Spec.Ports {
				tp := p.TargetPort
				if tp.Type == intstr.Int && tp.IntVal == 0 {
					tp = intstr.FromInt32(p.Port)
				}
				if cp, ok := podPort(w.Spec, tp); ok && slices.Contains(privatePorts, cp.Name) {
					errs = append(errs, errorf(o, "%s Service port %d reaches %s's private port %q (%d): the admin API, metrics and health stay on ClusterIP Services", svc.Spec.Type, p.Port, w.Owner.Ref(), cp.Name, cp.ContainerPort))
				}
			}
		}
	}
	return errs
}

func checkGateGrace(w Workload) []error {
	i := slices.IndexFunc(w.Spec.Containers, func(c corev1.Container) bool { return c.Name == "gate" })
	if i < 0 {
		return []error{fmt.Errorf("%s: no container named gate", w.Owner.Ref())}
	}
	c := &w.Spec.Containers[i]
	ref := containerRef(w, c)
	def := gate.DefaultConfig()
	args := append(slices.Clone(c.Command), c.Args...)
	dur := func(flag string, d time.Duration) (time.Duration, error) {
		v, ok := flagValue(args, flag)
		if !ok {
			return d, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%s: -%s %q: %v", ref, flag, v, err)
		}
		return d, nil
	}
	drain, err := dur("drain", def.Drain)
	if err != nil {
		return []error{err}
	}
	shutdown, err := dur("shutdown-grace", def.ShutdownGrace)
	if err != nil {
		return []error{err}
	}
	pause, err := preStopPause(c)
	if err != nil {
		return []error{fmt.Errorf("%s: %v", ref, err)}
	}
	grace := 30 * time.Second // Kubernetes' default
	if g := w.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if need := pause + drain + shutdown; grace < need {
		return []error{fmt.Errorf("%s: terminationGracePeriodSeconds %s is shorter than preStop %s + -drain %s + -shutdown-grace %s = %s: the kubelet would kill the gate before it closed its players with 1012",
			ref, grace, pause, drain, shutdown, need)}
	}
	return nil
}

// preStopPause is how long the preStop hook waits: the sleep action, or an
// exec of `sleep N` or `... sleep -for D`; 0 without a hook.
func preStopPause(c *corev1.Container) (time.Duration, error) {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return 0, nil
	}
	h := c.Lifecycle.PreStop
	switch {
	case h.Sleep != nil:
		return time.Duration(h.Sleep.Seconds) * time.Second, nil
	case h.Exec != nil:
		cmd := h.Exec.Command
		j := slices.IndexFunc(cmd, func(s string) bool { return s == "sleep" || strings.HasSuffix(s, "/sleep") })
		if j < 0 || j+1 >= len(cmd) {
			return 0, fmt.Errorf("preStop exec %q: cannot tell how long it pauses", cmd)
		}
		arg := cmd[len(cmd)-1]
		if n, err := strconv.ParseFloat(arg, 64); err == nil {
			return time.Duration(n * float64(time.Second)), nil
		}
		if d, err := time.ParseDuration(arg); err == nil {
			return d, nil
		}
		return 0, fmt.Errorf("preStop exec %q: cannot tell how long it pauses", cmd)
	}
	return 0, nil
}
