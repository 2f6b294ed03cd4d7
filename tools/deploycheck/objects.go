package deploycheck

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Workload is one pod template and the object that owns it.
type Workload struct {
	Owner     Object
	Namespace string
	Labels    labels.Set
	Spec      *corev1.PodSpec
	Selector  *metav1.LabelSelector
}

// Workloads returns the pod templates of the Deployments, StatefulSets and
// DaemonSets among objs.
func Workloads(objs []Object) []Workload {
	var ws []Workload
	for _, o := range objs {
		var tmpl *corev1.PodTemplateSpec
		var sel *metav1.LabelSelector
		switch v := o.Obj.(type) {
		case *appsv1.Deployment:
			tmpl, sel = &v.Spec.Template, v.Spec.Selector
		case *appsv1.StatefulSet:
			tmpl, sel = &v.Spec.Template, v.Spec.Selector
		case *appsv1.DaemonSet:
			tmpl, sel = &v.Spec.Template, v.Spec.Selector
		default:
			continue
		}
		ws = append(ws, Workload{Owner: o, Namespace: o.Meta.GetNamespace(),
			Labels: labels.Set(tmpl.Labels), Spec: &tmpl.Spec, Selector: sel})
	}
	return ws
}

// selected returns the workloads in namespace ns (any when ns is "") whose
// pod labels sel matches.
func selected(ws []Workload, ns string, sel labels.Selector) []Workload {
	var out []Workload
	for _, w := range ws {
		if (ns == "" || w.Namespace == ns) && sel.Matches(w.Labels) {
			out = append(out, w)
		}
	}
	return out
}

// find returns the object of kind, namespace and name, if rendered.
func find(objs []Object, kind, ns, name string) (Object, bool) {
	for _, o := range objs {
		if o.GVK.Kind == kind && o.Meta.GetNamespace() == ns && o.Meta.GetName() == name {
			return o, true
		}
	}
	return Object{}, false
}

// containers returns a pod's init and app containers.
func containers(spec *corev1.PodSpec) []*corev1.Container {
	var cs []*corev1.Container
	for i := range spec.InitContainers {
		cs = append(cs, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		cs = append(cs, &spec.Containers[i])
	}
	return cs
}

func containerRef(w Workload, c *corev1.Container) string {
	return fmt.Sprintf("%s container %q", w.Owner.Ref(), c.Name)
}

// errorf builds a check's error about one object.
func errorf(o Object, format string, args ...any) error {
	return fmt.Errorf("%s: %s", o.Ref(), fmt.Sprintf(format, args...))
}
