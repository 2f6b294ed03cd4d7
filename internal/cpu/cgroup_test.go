package cpu

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAllowedCPUs(t *testing.T) {
	procs := float64(runtime.GOMAXPROCS(0))
	tests := []struct {
		name  string
		files map[string]string
		want  float64
	}{
		{"no cgroup files", nil, procs},
		{"v2 unlimited", map[string]string{"cpu.max": "max 100000\n"}, procs},
		{"v2 half a CPU", map[string]string{"cpu.max": "50000 100000\n"}, 0.5},
		{"v2 one CPU, other period", map[string]string{"cpu.max": "250000 250000\n"}, 1},
		{"v2 quota only", map[string]string{"cpu.max": "75000\n"}, 0.75},
		{"v2 above GOMAXPROCS is capped", map[string]string{"cpu.max": "100000000 100000\n"}, procs},
		{"v2 malformed", map[string]string{"cpu.max": "lots 100000\n"}, procs},
		{"v2 empty", map[string]string{"cpu.max": ""}, procs},
		{"v2 zero period", map[string]string{"cpu.max": "50000 0"}, procs},
		{"v1 unlimited", map[string]string{
			"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, procs},
		{"v1 half a CPU", map[string]string{
			"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 0.5},
		{"v1 cpu,cpuacct", map[string]string{
			"cpu,cpuacct/cpu.cfs_quota_us": "25000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, 0.25},
		{"v1 quota without period", map[string]string{"cpu/cpu.cfs_quota_us": "50000\n"}, procs},
		{"v2 wins over v1", map[string]string{
			"cpu.max":              "50000 100000",
			"cpu/cpu.cfs_quota_us": "25000", "cpu/cpu.cfs_period_us": "100000"}, 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tc.files {
				writeFile(t, filepath.Join(root, p), c)
			}
			if got := AllowedCPUs(root); got != tc.want {
				t.Fatalf("AllowedCPUs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAllowedCPUsFollowsGOMAXPROCS(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "cpu.max"), "max 100000")
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	if got := AllowedCPUs(root); got != 1 {
		t.Fatalf("AllowedCPUs with GOMAXPROCS=1 = %v, want 1", got)
	}
}

func TestAllowedCPUsMissingRoot(t *testing.T) {
	if got, want := AllowedCPUs(filepath.Join(t.TempDir(), "nope")), float64(runtime.GOMAXPROCS(0)); got != want {
		t.Fatalf("AllowedCPUs = %v, want %v", got, want)
	}
}
