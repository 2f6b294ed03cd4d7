package cpu

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// DefaultCgroupRoot is where the cgroup file systems are mounted inside a
// container (with a cgroup namespace the container's own group is the root).
const DefaultCgroupRoot = "/sys/fs/cgroup"

// AllowedCPUs returns how many CPUs this process may actually use: the
// container's CPU limit read from the cgroup files under root, capped by
// runtime.GOMAXPROCS(0) (the Go scheduler never runs more threads than that,
// and GOMAXPROCS already reflects CPU affinity and cpusets). Without a limit
// it is GOMAXPROCS. The result may be fractional (a limit of 1500m is 1.5).
//
// It looks, in order, at cgroup v2 root/cpu.max ("max 100000" or
// "quota period"), then cgroup v1 root/cpu/cpu.cfs_quota_us and
// cpu.cfs_period_us (also under cpu,cpuacct and cpuacct,cpu; a quota of -1
// is no limit). Missing or unreadable files count as no limit.
func AllowedCPUs(root string) float64 {
	procs := float64(runtime.GOMAXPROCS(0))
	limit, ok := cgroupLimit(root)
	if !ok || limit > procs {
		return procs
	}
	return limit
}

// cgroupLimit returns the CPU limit in CPUs and whether one is set.
func cgroupLimit(root string) (float64, bool) {
	if b, err := os.ReadFile(filepath.Join(root, "cpu.max")); err == nil {
		return parseCPUMax(string(b))
	}
	for _, dir := range []string{"cpu", "cpu,cpuacct", "cpuacct,cpu"} {
		q, err := os.ReadFile(filepath.Join(root, dir, "cpu.cfs_quota_us"))
		if err != nil {
			continue
		}
		p, err := os.ReadFile(filepath.Join(root, dir, "cpu.cfs_period_us"))
		if err != nil {
			continue
		}
		return quotaOverPeriod(strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
	}
	return 0, false
}

// parseCPUMax parses the cgroup v2 cpu.max line: "$MAX $PERIOD", where $MAX
// is "max" for no limit; the period may be omitted (default 100000).
func parseCPUMax(s string) (float64, bool) {
	f := strings.Fields(s)
	switch len(f) {
	case 1:
		return quotaOverPeriod(f[0], "100000")
	case 2:
		return quotaOverPeriod(f[0], f[1])
	}
	return 0, false
}

// quotaOverPeriod turns a quota and a period (both in microseconds) into
// CPUs; "max", a negative quota or a malformed value mean no limit.
func quotaOverPeriod(quota, period string) (float64, bool) {
	if quota == "max" {
		return 0, false
	}
	q, err := strconv.ParseInt(quota, 10, 64)
	if err != nil || q <= 0 {
		return 0, false
	}
	p, err := strconv.ParseInt(period, 10, 64)
	if err != nil || p <= 0 {
		return 0, false
	}
	return float64(q) / float64(p), true
}
