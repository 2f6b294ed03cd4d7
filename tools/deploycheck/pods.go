package deploycheck

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// CheckResources checks that every container requests and limits cpu and
// memory, and sets GOMEMLIMIT (as a plain value) below its memory limit.
func CheckResources(objs []Object) []error {
	var errs []error
	for _, w := range Workloads(objs) {
		for _, c := range containers(w.Spec) {
			ref := containerRef(w, c)
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					errs = append(errs, fmt.Errorf("%s: no %s request", ref, r))
				}
				if _, ok := c.Resources.Limits[r]; !ok {
					errs = append(errs, fmt.Errorf("%s: no %s limit", ref, r))
				}
			}
			limit, hasLimit := c.Resources.Limits[corev1.ResourceMemory]
			i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" })
			switch {
			case i < 0:
				errs = append(errs, fmt.Errorf("%s: no GOMEMLIMIT", ref))
			case c.Env[i].ValueFrom != nil:
				errs = append(errs, fmt.Errorf("%s: GOMEMLIMIT comes from valueFrom; set a value below the memory limit so the GC works before the OOM killer does", ref))
			case hasLimit:
				n, err := parseGoMemLimit(c.Env[i].Value)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: GOMEMLIMIT: %v", ref, err))
				} else if n >= limit.Value() {
					errs = append(errs, fmt.Errorf("%s: GOMEMLIMIT %s (%d bytes) is not below the memory limit %s (%d bytes)", ref, c.Env[i].Value, n, limit.String(), limit.Value()))
				}
			}
		}
	}
	return errs
}

// parseGoMemLimit parses GOMEMLIMIT as the runtime does: a byte count with
// an optional B, KiB, MiB, GiB or TiB suffix.
func parseGoMemLimit(s string) (int64, error) {
	mult := int64(1)
	num := s
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a byte count with an optional B/KiB/MiB/GiB/TiB suffix", s)
	}
	return n * mult, nil
}

// CheckSecurity checks every container's securityContext (with its pod's
// as fallback where Kubernetes has one): runAsNonRoot, a non-root
// runAsUser, readOnlyRootFilesystem, allowPrivilegeEscalation false, not
// privileged, capabilities drop ALL, seccomp RuntimeDefault.
func CheckSecurity(objs []Object) []error {
	var errs []error
	for _, w := range Workloads(objs) {
		pod := w.Spec.SecurityContext
		if pod == nil {
			pod = &corev1.PodSecurityContext{}
		}
		for _, c := range containers(w.Spec) {
			ref := containerRef(w, c)
			sc := c.SecurityContext
			if sc == nil {
				sc = &corev1.SecurityContext{}
			}
			bad := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("%s: securityContext: %s", ref, fmt.Sprintf(format, args...)))
			}
			if !orPod(sc.RunAsNonRoot, pod.RunAsNonRoot) {
				bad("runAsNonRoot is not true")
			}
			if u := sc.RunAsUser; u != nil && *u == 0 || u == nil && pod.RunAsUser != nil && *pod.RunAsUser == 0 {
				bad("runAsUser is 0")
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				bad("readOnlyRootFilesystem is not true")
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				bad("allowPrivilegeEscalation is not false")
			}
			if sc.Privileged != nil && *sc.Privileged {
				bad("privileged")
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				bad("capabilities do not drop ALL")
			} else if len(sc.Capabilities.Add) > 0 {
				bad("capabilities add %v", sc.Capabilities.Add)
			}
			seccomp := sc.SeccompProfile
			if seccomp == nil {
				seccomp = pod.SeccompProfile
			}
			if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
				bad("seccompProfile is not RuntimeDefault")
			}
		}
	}
	return errs
}

func orPod(c, pod *bool) bool {
	if c != nil {
		return *c
	}
	return pod != nil && *pod
}
