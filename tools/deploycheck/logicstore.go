package deploycheck

import (
	"fmt"
	"net"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/leveehq/levee/internal/cli"
)

// boltOnlyFlags are logic's flags of the bbolt store, refused (or unused)
// with -store=postgres.
var boltOnlyFlags = []string{"data-dir", "instance", "instances", "instance-from-hostname"}

// CheckLogicStore checks how logic and the gate agree on the shards: both
// set -shards (flag or GATE_SHARDS/LOGIC_SHARDS) to the same count. With
// logic on PostgreSQL (-store or LOGIC_STORE postgres, k8s/overlays/
// postgres) also that logic
//   - is a Deployment with no volume but Secrets, ConfigMaps and projected
//     ones, and none of the bbolt store's flags (-data-dir, -instance...);
//   - takes the database URL (LOGIC_POSTGRES_URL) and, when set, PGPASSWORD
//     from a secretKeyRef, never a value in the manifest;
//   - advertises an address (LOGIC_ADVERTISE_ADDR or -advertise-addr) on its
//     own grpc port, whose $(VARS) are env variables defined before it
//     (Kubernetes expands only those), POD_IP from status.podIP;
//
// and that each of the gate's -logic-addrs names a rendered Service in the
// gate's namespace, not headless, that selects logic's pods on that port.
func CheckLogicStore(objs []Object) []error {
	var errs []error
	var logic, gates []Workload
	for _, w := range Workloads(objs) {
		switch w.Labels[NameLabel] {
		case "logic":
			logic = append(logic, w)
		case "gate":
			gates = append(gates, w)
		}
	}
	if len(logic) == 0 || len(gates) == 0 {
		return nil // CheckGate reports a missing gate; a render may hold no logic
	}
	type tier struct {
		w      Workload
		c      *corev1.Container
		shards string
	}
	var ls, gs []tier
	for _, w := range logic {
		c, err := tierContainer(w, "logic")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		shards, ok := setting(c, "shards", "LOGIC")
		if !ok {
			errs = append(errs, fmt.Errorf("%s: -shards (or LOGIC_SHARDS) is not set: set it on logic and the gate alike", containerRef(w, c)))
		}
		ls = append(ls, tier{w, c, shards})
		if store, _ := setting(c, "store", "LOGIC"); store == "postgres" {
			errs = append(errs, checkLogicPostgres(objs, w, c, gates)...)
		}
	}
	for _, w := range gates {
		c, err := tierContainer(w, "gate")
		if err != nil {
			continue // CheckGate reports it
		}
		shards, ok := setting(c, "shards", "GATE")
		if !ok {
			errs = append(errs, fmt.Errorf("%s: -shards (or GATE_SHARDS) is not set: set it on logic and the gate alike", containerRef(w, c)))
		}
		gs = append(gs, tier{w, c, shards})
	}
	for _, l := range ls {
		for _, g := range gs {
			if l.shards != "" && g.shards != "" && l.shards != g.shards && l.w.Namespace == g.w.Namespace {
				errs = append(errs, fmt.Errorf("%s: -shards %s, but %s has -shards %s: the gate would route players to shards logic does not have",
					containerRef(g.w, g.c), g.shards, containerRef(l.w, l.c), l.shards))
			}
		}
	}
	return errs
}

func tierContainer(w Workload, name string) (*corev1.Container, error) {
	i := slices.IndexFunc(w.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("%s: no container named %s", w.Owner.Ref(), name)
	}
	return &w.Spec.Containers[i], nil
}

// setting is a flag's value as the tier reads it: the command line, else
// its PREFIX_NAME variable with a plain value (internal/cli.Parse).
func setting(c *corev1.Container, flag, prefix string) (string, bool) {
	if v, ok := flagValue(append(slices.Clone(c.Command), c.Args...), flag); ok {
		return v, true
	}
	if e, ok := envVar(c, cli.EnvName(prefix, flag)); ok && e.ValueFrom == nil {
		return e.Value, true
	}
	return "", false
}

func envVar(c *corev1.Container, name string) (corev1.EnvVar, bool) {
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return corev1.EnvVar{}, false
	}
	return c.Env[i], true
}

func checkLogicPostgres(objs []Object, w Workload, c *corev1.Container, gates []Workload) []error {
	var errs []error
	ref := containerRef(w, c)
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: logic on PostgreSQL: %s", ref, fmt.Sprintf(format, args...)))
	}
	if _, ok := w.Owner.Obj.(*appsv1.Deployment); !ok {
		bad("is a %s; its shards are in the database, so run it as a Deployment (no volume, any number of pods)", w.Owner.GVK.Kind)
	}
	if st, ok := w.Owner.Obj.(*appsv1.StatefulSet); ok && len(st.Spec.VolumeClaimTemplates) > 0 {
		bad("has volumeClaimTemplates: nothing of logic's is on a volume with PostgreSQL")
	}
	for _, v := range w.Spec.Volumes {
		if v.Secret == nil && v.ConfigMap == nil && v.Projected == nil && v.DownwardAPI == nil {
			bad("volume %q is neither a Secret, a ConfigMap nor projected: nothing of logic's is on a volume with PostgreSQL", v.Name)
		}
	}
	for _, f := range boltOnlyFlags {
		if _, ok := setting(c, f, "LOGIC"); ok {
			bad("-%s is a flag of the bbolt store (refused with -store=postgres)", f)
		}
	}
	secretOnly := func(name string, required bool) {
		e, ok := envVar(c, name)
		switch {
		case !ok && required:
			bad("no %s (from Secret levee-postgres)", name)
		case ok && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil):
			bad("%s is not from a secretKeyRef: the database's address and password stay out of the manifests", name)
		}
	}
	if _, ok := flagValue(append(slices.Clone(c.Command), c.Args...), "postgres-url"); ok {
		bad("-postgres-url is on the command line: take it from a Secret as LOGIC_POSTGRES_URL")
	}
	secretOnly("LOGIC_POSTGRES_URL", true)
	secretOnly("PGPASSWORD", false)
	errs = append(errs, checkAdvertise(w, c, bad)...)
	for _, g := range gates {
		if g.Namespace != w.Namespace {
			continue
		}
		gc, err := tierContainer(g, "gate")
		if err != nil {
			continue
		}
		addrs, ok := setting(gc, "logic-addrs", "GATE")
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no -logic-addrs", containerRef(g, gc)))
			continue
		}
		for _, a := range strings.Split(addrs, ",") {
			if err := entryService(objs, g.Namespace, a, w); err != nil {
				errs = append(errs, fmt.Errorf("%s: -logic-addrs %s: %v", containerRef(g, gc), a, err))
			}
		}
	}
	return errs
}

// checkAdvertise: the address the gate is redirected to must be set (the
// default, the hostname, is a Deployment pod's name, which no DNS serves),
// on the container's grpc port, and its $(VARS) defined before it.
func checkAdvertise(w Workload, c *corev1.Container, bad func(string, ...any)) []error {
	addr, ok := setting(c, "advertise-addr", "LOGIC")
	if !ok {
		bad("no LOGIC_ADVERTISE_ADDR (or -advertise-addr): the default is the pod's hostname, which the gates cannot resolve; use $(POD_IP):9000")
		return nil
	}
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "LOGIC_ADVERTISE_ADDR" })
	for _, v := range envRefs(addr) {
		j := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == v })
		switch {
		case j < 0:
			bad("the advertised address %q uses $(%s), which is not an env variable of the container", addr, v)
		case i >= 0 && j > i:
			bad("the advertised address %q uses $(%s), defined after LOGIC_ADVERTISE_ADDR: Kubernetes expands only variables defined before", addr, v)
		case v == "POD_IP" && (c.Env[j].ValueFrom == nil || c.Env[j].ValueFrom.FieldRef == nil || c.Env[j].ValueFrom.FieldRef.FieldPath != "status.podIP"):
			bad("POD_IP is not from the downward API's status.podIP")
		}
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		bad("the advertised address %q is not host:port: %v", addr, err)
		return nil
	}
	if cp, ok := containerPort(c, intstr.Parse(port)); !ok || cp.Name != "grpc" {
		bad("the advertised address %q is not on the container's grpc port", addr)
	}
	return nil
}

// envRefs are the $(NAME) references in s.
func envRefs(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "$(")
		if i < 0 {
			return out
		}
		j := strings.Index(s[i:], ")")
		if j < 0 {
			return out
		}
		out = append(out, s[i+2:i+j])
		s = s[i+j+1:]
	}
}

// entryService checks that addr (host:port) is a rendered, non-headless
// Service in ns (by its name, name.ns, name.ns.svc or
// name.ns.svc.cluster.local) that selects logic's pods and has the port.
func entryService(objs []Object, ns, addr string, logic Workload) error {
	host, port, err := net.SplitHostPort(strings.TrimSpace(addr))
	if err != nil {
		return err
	}
	name, rest, _ := strings.Cut(host, ".")
	if rest != "" && rest != ns && rest != ns+".svc" && rest != ns+".svc.cluster.local" {
		return fmt.Errorf("is not a Service of namespace %s (NAME, NAME.%s[.svc[.cluster.local]])", ns, ns)
	}
	o, ok := find(objs, "Service", ns, name)
	if !ok {
		return fmt.Errorf("no rendered Service %s/%s: with PostgreSQL the gate enters logic through a ClusterIP Service", ns, name)
	}
	svc := o.Obj.(*corev1.Service)
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return fmt.Errorf("Service %s/%s is headless: the entry point is a ClusterIP Service", ns, name)
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(logic.Labels) {
		return fmt.Errorf("Service %s/%s does not select %s's pods", ns, name, logic.Owner.Ref())
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return fmt.Sprint(p.Port) == port }) {
		return fmt.Errorf("Service %s/%s has no port %s", ns, name, port)
	}
	return nil
}
