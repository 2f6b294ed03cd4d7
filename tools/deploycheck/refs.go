package deploycheck

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// OperatorSecrets are the Secrets the operator creates by hand (CONTRACT:
// never in the manifests), with the keys they carry.
var OperatorSecrets = map[string][]string{
	"levee-secrets": {"token-secret", "admin-token"},
	// Logic on PostgreSQL (k8s/overlays/postgres): the database's URL
	// without a password, and the password (logic's PGPASSWORD).
	"levee-postgres": {"url", "password"},
	// The certificates (kubernetes.io/tls Secrets with the CA): made by the
	// operator from levee-certs, or by cert-manager from the Certificates
	// of k8s/overlays/tls (tls.go checks those). See docs/deploying.md.
	"levee-gate-tls":   TLSSecretKeys,
	"levee-logic-tls":  TLSSecretKeys,
	"levee-battle-tls": TLSSecretKeys,
	"levee-edge-tls":   TLSSecretKeys,
}

// TLSSecretKeys are the keys of a certificate Secret.
var TLSSecretKeys = []string{"tls.crt", "tls.key", "ca.crt"}

// CheckRefs checks that every Secret and ConfigMap a pod refers to (env,
// envFrom, volumes) is rendered in the pod's namespace or is an operator
// Secret, with the key referred to; that no Secret in the manifests
// carries data; and that a StatefulSet's serviceName is a headless Service.
func CheckRefs(objs []Object) []error {
	var errs []error
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *corev1.Secret:
			if len(v.Data) > 0 || len(v.StringData) > 0 {
				errs = append(errs, errorf(o, "carries data (%d data, %d stringData keys): secrets are created by the operator, never in the manifests", len(v.Data), len(v.StringData)))
			}
		case *appsv1.StatefulSet:
			svc, ok := find(objs, "Service", o.Meta.GetNamespace(), v.Spec.ServiceName)
			switch {
			case v.Spec.ServiceName == "":
				errs = append(errs, errorf(o, "has no serviceName"))
			case !ok:
				errs = append(errs, errorf(o, "serviceName %q is not a rendered Service", v.Spec.ServiceName))
			case svc.Obj.(*corev1.Service).Spec.ClusterIP != corev1.ClusterIPNone:
				errs = append(errs, errorf(o, "serviceName %q is not headless (clusterIP %q, want None)", v.Spec.ServiceName, svc.Obj.(*corev1.Service).Spec.ClusterIP))
			}
		}
	}
	for _, w := range Workloads(objs) {
		errs = append(errs, checkPodRefs(objs, w)...)
	}
	return errs
}

func checkPodRefs(objs []Object, w Workload) []error {
	var errs []error
	ns := w.Namespace
	secret := func(where, name, key string, optional *bool) {
		if optional != nil && *optional {
			return
		}
		if keys, ok := OperatorSecrets[name]; ok {
			if key != "" && !slices.Contains(keys, key) {
				errs = append(errs, fmt.Errorf("%s: %s: key %q is not one of operator Secret %s's keys %v", w.Owner.Ref(), where, key, name, keys))
			}
			return
		}
		// A rendered Secret carries no data (see above), so its keys
		// cannot be checked.
		if _, ok := find(objs, "Secret", ns, name); !ok {
			errs = append(errs, fmt.Errorf("%s: %s: Secret %q is neither rendered nor an operator Secret (%v)", w.Owner.Ref(), where, name, keysOf(OperatorSecrets)))
		}
	}
	configMap := func(where, name, key string, optional *bool) {
		if optional != nil && *optional {
			return
		}
		o, ok := find(objs, "ConfigMap", ns, name)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s: ConfigMap %q is not rendered in namespace %s", w.Owner.Ref(), where, name, ns))
			return
		}
		cm := o.Obj.(*corev1.ConfigMap)
		if _, inData := cm.Data[key]; key != "" && !inData {
			if _, inBin := cm.BinaryData[key]; !inBin {
				errs = append(errs, fmt.Errorf("%s: %s: ConfigMap %q has no key %q", w.Owner.Ref(), where, name, key))
			}
		}
	}
	for _, c := range containers(w.Spec) {
		at := func(s string) string { return fmt.Sprintf("container %q %s", c.Name, s) }
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				secret(at("env "+e.Name+" secretKeyRef"), r.Name, r.Key, r.Optional)
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				configMap(at("env "+e.Name+" configMapKeyRef"), r.Name, r.Key, r.Optional)
			}
		}
		for _, e := range c.EnvFrom {
			if r := e.SecretRef; r != nil {
				secret(at("envFrom secretRef"), r.Name, "", r.Optional)
			}
			if r := e.ConfigMapRef; r != nil {
				configMap(at("envFrom configMapRef"), r.Name, "", r.Optional)
			}
		}
	}
	for _, v := range w.Spec.Volumes {
		at := "volume " + v.Name
		if s := v.Secret; s != nil {
			for _, it := range s.Items {
				secret(at, s.SecretName, it.Key, s.Optional)
			}
			if len(s.Items) == 0 {
				secret(at, s.SecretName, "", s.Optional)
			}
		}
		if cm := v.ConfigMap; cm != nil {
			for _, it := range cm.Items {
				configMap(at, cm.Name, it.Key, cm.Optional)
			}
			if len(cm.Items) == 0 {
				configMap(at, cm.Name, "", cm.Optional)
			}
		}
		if p := v.Projected; p != nil {
			for _, src := range p.Sources {
				if s := src.Secret; s != nil {
					secret(at+" projected", s.Name, "", s.Optional)
				}
				if cm := src.ConfigMap; cm != nil {
					configMap(at+" projected", cm.Name, "", cm.Optional)
				}
			}
		}
	}
	return errs
}

func keysOf(m map[string][]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
