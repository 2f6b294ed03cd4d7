package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Bad command lines exit 2 with a message naming what is wrong, before
// anything talks to a cluster.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: k8scheck nodes|ready|"},
		{[]string{"readdy"}, `unknown check "readdy"`},
		{[]string{"ready"}, "-kubeconfig is required"},
		{[]string{"ready", "-kubeconfig", "x", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"ready", "-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
	} {
		var out, errb bytes.Buffer
		t.Setenv("KUBECONFIG", "")
		if code := run(context.Background(), tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("k8scheck %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

func TestParseWatch(t *testing.T) {
	ws, err := parseWatch("etcd=12,kube-apiserver=34")
	if err != nil || len(ws) != 2 || ws[1] != (watched{"kube-apiserver", 34}) {
		t.Fatalf("parseWatch: %v %v", ws, err)
	}
	for _, bad := range []string{"etcd", "etcd=x", "etcd=-1"} {
		if _, err := parseWatch(bad); err == nil {
			t.Errorf("parseWatch(%q): no error", bad)
		}
	}
}
