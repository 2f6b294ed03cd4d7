package deploycheck

import (
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
)

// CheckPorts checks that every port named or numbered elsewhere exists on
// the containers it points at: Service targetPorts on every pod template
// the Service selects, probe, lifecycle and `healthcheck -addr` ports on
// their own container, PodMonitor endpoints and NetworkPolicy ingress
// ports on some selected pod.
func CheckPorts(objs []Object) []error {
	ws := Workloads(objs)
	var errs []error
	for _, w := range ws {
		for _, c := range containers(w.Spec) {
			errs = append(errs, checkContainerPorts(w, c)...)
		}
	}
	for _, o := range objs {
		ns := o.Meta.GetNamespace()
		switch v := o.Obj.(type) {
		case *corev1.Service:
			if len(v.Spec.Selector) == 0 {
				continue
			}
			for _, w := range selected(ws, ns, labels.SelectorFromSet(v.Spec.Selector)) {
				for _, p := range v.Spec.Ports {
					tp := p.TargetPort
					if tp.Type == intstr.Int && tp.IntVal == 0 {
						tp = intstr.FromInt32(p.Port)
					}
					if _, ok := podPort(w.Spec, tp); !ok {
						errs = append(errs, errorf(o, "port %q targetPort %s is not a port of %s's pods", p.Name, tp.String(), w.Owner.Ref()))
					}
				}
			}
		case *monitoringv1.PodMonitor:
			sel, err := metav1.LabelSelectorAsSelector(&v.Spec.Selector)
			if err != nil {
				continue // CheckSelectors reports it
			}
			var pods []Workload
			for _, n := range podMonitorNamespaces(o, v) {
				pods = append(pods, selected(ws, n, sel)...)
			}
			for i, ep := range v.Spec.PodMetricsEndpoints {
				var want intstr.IntOrString
				switch {
				case ep.Port != nil:
					want = intstr.FromString(*ep.Port)
				case ep.PortNumber != nil:
					want = intstr.FromInt32(*ep.PortNumber)
				case ep.TargetPort != nil:
					want = *ep.TargetPort
				default:
					continue
				}
				if !anyPodHas(pods, want) {
					errs = append(errs, errorf(o, "podMetricsEndpoints[%d] port %s is not a port of any pod it selects", i, want.String()))
				}
			}
		case *networkingv1.NetworkPolicy:
			sel, err := metav1.LabelSelectorAsSelector(&v.Spec.PodSelector)
			if err != nil {
				continue
			}
			pods := selected(ws, ns, sel)
			for i, r := range v.Spec.Ingress {
				for j, p := range r.Ports {
					if p.Port == nil {
						continue
					}
					if !anyPodHas(pods, *p.Port) {
						errs = append(errs, errorf(o, "ingress[%d] port %d (%s) is not a port of any pod the policy selects", i, j, p.Port.String()))
					}
				}
			}
		}
	}
	return errs
}

func anyPodHas(ws []Workload, p intstr.IntOrString) bool {
	for _, w := range ws {
		if _, ok := podPort(w.Spec, p); ok {
			return true
		}
	}
	return false
}

// podPort finds the container port p (a name or a number) among the pod's
// containers.
func podPort(spec *corev1.PodSpec, p intstr.IntOrString) (corev1.ContainerPort, bool) {
	for _, c := range containers(spec) {
		if cp, ok := containerPort(c, p); ok {
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

func containerPort(c *corev1.Container, p intstr.IntOrString) (corev1.ContainerPort, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

func checkContainerPorts(w Workload, c *corev1.Container) []error {
	var errs []error
	need := func(what string, p intstr.IntOrString) {
		if _, ok := containerPort(c, p); !ok {
			errs = append(errs, fmt.Errorf("%s: %s port %s is not one of the container's ports", containerRef(w, c), what, p.String()))
		}
	}
	probe := func(what string, pr *corev1.Probe) {
		if pr == nil {
			return
		}
		h := pr.ProbeHandler
		switch {
		case h.GRPC != nil:
			need(what+" grpc", intstr.FromInt32(h.GRPC.Port))
		case h.HTTPGet != nil:
			need(what+" httpGet", h.HTTPGet.Port)
		case h.TCPSocket != nil:
			need(what+" tcpSocket", h.TCPSocket.Port)
		case h.Exec != nil:
			if p, ok := healthcheckPort(h.Exec.Command); ok {
				need(what+" exec healthcheck -addr", intstr.FromInt32(p))
			}
		}
	}
	probe("livenessProbe", c.LivenessProbe)
	probe("readinessProbe", c.ReadinessProbe)
	probe("startupProbe", c.StartupProbe)
	if c.Lifecycle != nil {
		for what, h := range map[string]*corev1.LifecycleHandler{"preStop": c.Lifecycle.PreStop, "postStart": c.Lifecycle.PostStart} {
			switch {
			case h == nil:
			case h.HTTPGet != nil:
				need(what+" httpGet", h.HTTPGet.Port)
			case h.TCPSocket != nil:
				need(what+" tcpSocket", h.TCPSocket.Port)
			}
		}
	}
	return errs
}

// healthcheckPort reads the port of `/app healthcheck -addr HOST:PORT`.
func healthcheckPort(cmd []string) (int32, bool) {
	addr, ok := flagValue(cmd, "addr")
	if !ok {
		return 0, false
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}
