package live

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leveehq/levee/internal/certgen"
)

var certNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// tlsSecret is Secret name as k8s-test makes it from levee-certs' files.
func tlsSecret(t *testing.T, dir, name, stem string) corev1.Secret {
	t.Helper()
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "levee", Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": read(stem + ".crt"), "tls.key": read(stem + ".key"), "ca.crt": read("ca.crt")}}
}

func tierPod(tier string, secrets ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "levee", Name: tier + "-0", Labels: map[string]string{"app.kubernetes.io/name": tier}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	for i, s := range secrets {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v" + string(rune('a'+i)),
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s}}})
	}
	return p
}

func TestCertificates(t *testing.T) {
	dir := t.TempDir()
	if _, err := certgen.Write(certgen.Options{Dir: dir, Now: certNow}); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, err := certgen.Write(certgen.Options{Dir: other, Now: certNow}); err != nil {
		t.Fatal(err)
	}
	pods := []corev1.Pod{
		tierPod("gate", "levee-gate-tls", "levee-edge-tls"),
		tierPod("logic", "levee-logic-tls"),
		tierPod("battle", "levee-battle-tls"),
	}
	good := func() []corev1.Secret {
		return []corev1.Secret{
			tlsSecret(t, dir, "levee-gate-tls", "gate"), tlsSecret(t, dir, "levee-edge-tls", "edge"),
			tlsSecret(t, dir, "levee-logic-tls", "logic"), tlsSecret(t, dir, "levee-battle-tls", "battle"),
		}
	}
	if r := Certificates(&State{Pods: pods, Secrets: good()}, certNow); len(r) != 0 {
		t.Fatalf("good secrets: %v", r)
	}
	cases := []struct {
		name   string
		break_ func(s []corev1.Secret) []corev1.Secret
		at     time.Time
		want   string
	}{
		{"missing", func(s []corev1.Secret) []corev1.Secret { return s[1:] }, certNow,
			"Pod levee/gate-0: Secret levee/levee-gate-tls, which it mounts, does not exist"},
		{"no ca.crt", func(s []corev1.Secret) []corev1.Secret { delete(s[2].Data, "ca.crt"); return s }, certNow,
			"Secret levee/levee-logic-tls (mounted by logic pods): no ca.crt"},
		{"wrong role", func(s []corev1.Secret) []corev1.Secret {
			s[3] = tlsSecret(t, dir, "levee-battle-tls", "logic")
			return s
		}, certNow,
			"Secret levee/levee-battle-tls (mounted by battle pods): tls.crt's URI SANs are [spiffe://levee/logic], want [spiffe://levee/battle]"},
		{"another CA", func(s []corev1.Secret) []corev1.Secret {
			s[2].Data["ca.crt"] = tlsSecret(t, other, "x", "logic").Data["ca.crt"]
			return s
		}, certNow, "levee-logic-tls (mounted by logic pods): tls.crt does not verify against ca.crt"},
		{"someone else's key", func(s []corev1.Secret) []corev1.Secret {
			s[0].Data["tls.key"] = s[1].Data["tls.key"]
			return s
		}, certNow, "levee-gate-tls (mounted by gate pods): tls.crt and tls.key"},
		{"expired", func(s []corev1.Secret) []corev1.Secret { return s }, certNow.Add(certgen.DefaultLeafValidity + time.Hour),
			"tls.crt does not verify against ca.crt for server auth"},
		{"edge cert as a role", func(s []corev1.Secret) []corev1.Secret { s[1] = tlsSecret(t, dir, "levee-edge-tls", "gate"); return s }, certNow,
			"levee-edge-tls (mounted by gate pods): the edge certificate carries cluster identities [spiffe://levee/gate]"},
		{"edge cert as the gate's client cert", func(s []corev1.Secret) []corev1.Secret { s[0] = tlsSecret(t, dir, "levee-gate-tls", "edge"); return s }, certNow,
			"levee-gate-tls (mounted by gate pods): tls.crt does not verify against ca.crt for client auth"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Certificates(&State{Pods: pods, Secrets: tc.break_(good())}, tc.at)
			if !strings.Contains(strings.Join(r, "\n"), tc.want) {
				t.Fatalf("reasons %q, want one containing %q", r, tc.want)
			}
		})
	}
	// A pod that is not Ready (or not a Levee tier) is not checked.
	notReady := tierPod("logic", "levee-logic-tls")
	notReady.Status.Conditions = nil
	if r := Certificates(&State{Pods: []corev1.Pod{notReady, tierPod("prometheus", "levee-logic-tls")}}, certNow); len(r) != 0 {
		t.Fatalf("reasons for pods that are not checked: %v", r)
	}
}
