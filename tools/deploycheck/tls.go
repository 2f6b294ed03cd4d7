package deploycheck

import (
	"fmt"
	"slices"
	"strings"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
)

// TierTLS is, per tier (its app.kubernetes.io/name), the Secret of its
// cluster certificate and the role URI SAN that certificate must carry.
var TierTLS = map[string]struct{ Secret, URI string }{
	"gate":   {"levee-gate-tls", "spiffe://levee/gate"},
	"logic":  {"levee-logic-tls", "spiffe://levee/logic"},
	"battle": {"levee-battle-tls", "spiffe://levee/battle"},
}

// EdgeSecret is the gate's wss/https certificate.
const EdgeSecret = "levee-edge-tls"

// The environment variables the tiers read their certificate files from
// (the -cluster-* and -tls-* flags' fallbacks).
var clusterEnv = []string{"LEVEE_CLUSTER_CA", "LEVEE_CLUSTER_CERT", "LEVEE_CLUSTER_KEY"}
var edgeEnv = []string{"GATE_TLS_CERT", "GATE_TLS_KEY"}

// CheckTLS checks that every Levee tier mounts its role's Secret and points
// LEVEE_CLUSTER_CA/CERT/KEY (and the gate GATE_TLS_CERT/KEY) at files of a
// mounted Secret's keys; and, where the render holds Certificates, that
// every Secret a tier mounts is written by one of them, with the role's
// URI SAN (spiffe://levee/<role>) and client and server auth for the
// cluster roles, issued by a rendered Issuer, and that every CA Issuer's
// Secret is a CA Certificate's, whose own Issuer is rendered.
func CheckTLS(objs []Object) []error {
	var errs []error
	certs := map[string]*cmv1.Certificate{} // by namespace/secretName
	var certObjs []Object
	for _, o := range objs {
		if c, ok := o.Obj.(*cmv1.Certificate); ok {
			certObjs = append(certObjs, o)
			k := o.Meta.GetNamespace() + "/" + c.Spec.SecretName
			if prev, dup := certs[k]; dup {
				errs = append(errs, errorf(o, "writes Secret %q, as Certificate %s does", c.Spec.SecretName, prev.Name))
			}
			certs[k] = c
		}
	}
	for _, w := range Workloads(objs) {
		tier := w.Labels["app.kubernetes.io/name"]
		want, ok := TierTLS[tier]
		if !ok {
			continue
		}
		mounts := secretMounts(w.Spec)
		need := []string{want.Secret}
		if tier == "gate" {
			need = append(need, EdgeSecret)
		}
		for _, s := range need {
			if !slices.ContainsFunc(mounts, func(m secretMount) bool { return m.secret == s }) {
				errs = append(errs, fmt.Errorf("%s: does not mount Secret %s", w.Owner.Ref(), s))
			}
		}
		for _, c := range w.Spec.Containers {
			envs := clusterEnv
			if tier == "gate" {
				envs = append(slices.Clone(envs), edgeEnv...)
			}
			for _, name := range envs {
				i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
				if i < 0 {
					errs = append(errs, fmt.Errorf("%s: no %s", containerRef(w, &c), name))
					continue
				}
				wantSecret := want.Secret
				if strings.HasPrefix(name, "GATE_TLS") {
					wantSecret = EdgeSecret
				}
				if s, ok := fileSecret(c, mounts, c.Env[i].Value); !ok || s != wantSecret {
					errs = append(errs, fmt.Errorf("%s: %s=%s is not a key of the mounted Secret %s", containerRef(w, &c), name, c.Env[i].Value, wantSecret))
				}
			}
		}
		if len(certObjs) == 0 {
			continue
		}
		for _, m := range mounts {
			c, ok := certs[w.Namespace+"/"+m.secret]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: mounts Secret %s, which no rendered Certificate in namespace %q writes", w.Owner.Ref(), m.secret, w.Namespace))
				continue
			}
			if m.secret == want.Secret {
				if len(c.Spec.URIs) != 1 || c.Spec.URIs[0] != want.URI {
					errs = append(errs, fmt.Errorf("Certificate %s/%s: URIs %v, want [%s] (the role %s's pods mount it)", c.Namespace, c.Name, c.Spec.URIs, want.URI, tier))
				}
				for _, u := range []cmv1.KeyUsage{cmv1.UsageServerAuth, cmv1.UsageClientAuth} {
					if !slices.Contains(c.Spec.Usages, u) {
						errs = append(errs, fmt.Errorf("Certificate %s/%s: usages %v lack %q (mutual TLS)", c.Namespace, c.Name, c.Spec.Usages, u))
					}
				}
			}
		}
	}
	for _, o := range certObjs {
		c := o.Obj.(*cmv1.Certificate)
		iss, ok := issuer(objs, o.Meta.GetNamespace(), c.Spec.IssuerRef.Kind, c.Spec.IssuerRef.Name)
		if !ok {
			errs = append(errs, errorf(o, "issuerRef %s %q is not a rendered Issuer in its namespace", c.Spec.IssuerRef.Kind, c.Spec.IssuerRef.Name))
			continue
		}
		if iss.Spec.CA != nil {
			ca, ok := certs[iss.Namespace+"/"+iss.Spec.CA.SecretName]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("Issuer %s/%s: its CA Secret %q is no rendered Certificate's", iss.Namespace, iss.Name, iss.Spec.CA.SecretName))
			case !ca.Spec.IsCA:
				errs = append(errs, fmt.Errorf("Issuer %s/%s: Certificate %s is not isCA", iss.Namespace, iss.Name, ca.Name))
			case ca.Spec.IssuerRef.Name == iss.Name:
				errs = append(errs, fmt.Errorf("Issuer %s/%s: its CA is issued by itself", iss.Namespace, iss.Name))
			}
		}
		if c.Spec.PrivateKey == nil || c.Spec.PrivateKey.Algorithm == "" {
			errs = append(errs, errorf(o, "no privateKey.algorithm (cert-manager's default is RSA 2048; the tiers use ECDSA P-256)"))
		}
	}
	return errs
}

type secretMount struct{ secret, path string }

// secretMounts lists the Secret volumes a pod mounts, with the first
// container mount path of each.
func secretMounts(spec *corev1.PodSpec) []secretMount {
	var out []secretMount
	for _, v := range spec.Volumes {
		if v.Secret == nil {
			continue
		}
		for _, c := range containers(spec) {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					out = append(out, secretMount{v.Secret.SecretName, m.MountPath})
				}
			}
		}
	}
	return out
}

// fileSecret is the Secret that the file path is a key of, in container
// c (a TLSSecretKeys key directly under one of its Secret mounts).
func fileSecret(c corev1.Container, mounts []secretMount, path string) (string, bool) {
	for _, m := range mounts {
		if !slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == m.path }) {
			continue
		}
		if key, ok := strings.CutPrefix(path, strings.TrimSuffix(m.path, "/")+"/"); ok && slices.Contains(TLSSecretKeys, key) {
			return m.secret, true
		}
	}
	return "", false
}

func issuer(objs []Object, ns, kind, name string) (*cmv1.Issuer, bool) {
	if kind != "" && kind != "Issuer" {
		return nil, false
	}
	o, ok := find(objs, "Issuer", ns, name)
	if !ok {
		return nil, false
	}
	return o.Obj.(*cmv1.Issuer), true
}
