package live

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/leveehq/levee/tools/deploycheck"
)

// Certificates: every Ready pod of a Levee tier has what its Secret
// volumes promise (kwok's pods are Ready without a kubelet mounting
// anything, so this is what shows the pods would start with their
// certificates): each Secret it mounts exists with tls.crt, tls.key and
// ca.crt; tls.crt is valid at now, chains to ca.crt and is tls.key's; the
// tier's cluster Secret (deploycheck.TierTLS) carries exactly the role's
// URI SAN and is good for client and server auth, and the gate's edge
// Secret for server auth.
func Certificates(s *State, now time.Time) []string {
	var out []string
	secrets := map[string]*corev1.Secret{}
	for i := range s.Secrets {
		secrets[s.Secrets[i].Name] = &s.Secrets[i]
	}
	checked := map[string]bool{} // one reason per Secret, not per pod
	for i := range s.Pods {
		p := &s.Pods[i]
		tier := p.Labels["app.kubernetes.io/name"]
		want, ok := deploycheck.TierTLS[tier]
		if !ok || !PodReady(p) {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.Secret == nil || !slices.Contains([]string{want.Secret, deploycheck.EdgeSecret}, v.Secret.SecretName) {
				continue
			}
			name := v.Secret.SecretName
			key := tier + "/" + name
			if checked[key] {
				continue
			}
			checked[key] = true
			sec, ok := secrets[name]
			if !ok {
				out = append(out, fmt.Sprintf("%s: Secret %s/%s, which it mounts, does not exist", ref("Pod", p), p.Namespace, name))
				continue
			}
			uri := want.URI
			usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
			if name == deploycheck.EdgeSecret {
				uri, usages = "", usages[:1]
			}
			if reason := checkTLSSecret(sec, uri, usages, now); reason != "" {
				out = append(out, fmt.Sprintf("Secret %s/%s (mounted by %s pods): %s", sec.Namespace, sec.Name, tier, reason))
			}
		}
	}
	return out
}

// checkTLSSecret is why sec is not a certificate valid at now for uri
// (none when "") and usages, or "".
func checkTLSSecret(sec *corev1.Secret, uri string, usages []x509.ExtKeyUsage, now time.Time) string {
	for _, k := range deploycheck.TLSSecretKeys {
		if len(sec.Data[k]) == 0 {
			return fmt.Sprintf("no %s", k)
		}
	}
	pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		return fmt.Sprintf("tls.crt and tls.key: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Sprintf("tls.crt: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		return "ca.crt holds no PEM certificate"
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	for _, u := range usages {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			return fmt.Sprintf("tls.crt does not verify against ca.crt for %s: %v", usageName(u), err)
		}
	}
	var uris []string
	for _, u := range leaf.URIs {
		uris = append(uris, u.String())
	}
	switch {
	case uri != "" && !slices.Equal(uris, []string{uri}):
		return fmt.Sprintf("tls.crt's URI SANs are %v, want [%s]", uris, uri)
	case uri == "" && len(uris) > 0:
		return fmt.Sprintf("the edge certificate carries cluster identities %v", uris)
	}
	return ""
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageClientAuth {
		return "client auth"
	}
	return "server auth"
}
