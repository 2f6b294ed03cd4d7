package fault

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/testwait"
)

// TestDockerFaults injects every fault into real containers, when
// LEVEE_DOCKER_TEST=1: a FROM scratch image of testdata/probe, a network
// and two containers labelled as compose service a (restart policy
// unless-stopped, 0.5 CPUs, a 4 MiB tmpfs at /data, the image's
// healthcheck) and b (no limits, no healthcheck), all of a project of its own, removed after (also on
// failure). It checks what each fault did while it held and that it was
// undone: kill restarts a through its restart policy, cut makes a's name
// unresolvable from b and then resolvable again, cpu restores a limited
// and an unlimited container, fill reaches ENOSPC through /proc, start
// starts a created container and waits until it is healthy.
func TestDockerFaults(t *testing.T) {
	if os.Getenv("LEVEE_DOCKER_TEST") != "1" {
		t.Skip("set LEVEE_DOCKER_TEST=1 to run against the Docker daemon")
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	project := "levee-faults-test-" + hex.EncodeToString(rb[:])
	image := project + ":test"
	net := project + "_default"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	docker := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		out, _ := exec.CommandContext(cctx, "docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+project).Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.CommandContext(cctx, "docker", "rm", "-f", "-v", id).Run()
		}
		_ = exec.CommandContext(cctx, "docker", "network", "rm", net).Run()
		_ = exec.CommandContext(cctx, "docker", "rmi", "-f", image).Run()
	})

	dir := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "app"), "./testdata/probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY app /app\n"+
		"HEALTHCHECK --interval=1s --timeout=2s --retries=30 CMD [\"/app\", \"dial\", \"127.0.0.1:8000\"]\nENTRYPOINT [\"/app\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	docker("build", "-q", "-t", image, dir)
	docker("network", "create", "--label", "com.docker.compose.project="+project, net)
	run := func(service string, extra ...string) string {
		args := append([]string{"run", "-d", "--name", project + "_" + service + "_1",
			"--label", "com.docker.compose.project=" + project, "--label", "com.docker.compose.service=" + service,
			"--network", net, "--network-alias", service, "--restart", "unless-stopped", "--read-only"}, extra...)
		return docker(append(args, image)...)
	}
	a := run("a", "--cpus", "0.5", "--tmpfs", "/data:size=4m")
	b := run("b", "--no-healthcheck")
	inspect := func(id, format string) string { return docker("inspect", "-f", format, id) }
	healthy := func() bool { return inspect(a, "{{.State.Health.Status}}") == "healthy" }
	testwait.UntilWithin(t, time.Minute, "a healthy", healthy)
	reaches := func() bool {
		return exec.CommandContext(ctx, "docker", "exec", b, "/app", "dial", "a:8000").Run() == nil
	}
	if !reaches() {
		t.Fatal("b does not reach a by its service name")
	}

	d := &Docker{Project: project}
	do := func(f Fault, during func(what string)) []string {
		t.Helper()
		var got []string
		err := d.Inject(ctx, f, func(what string) {
			t.Logf("%s: %s", f, what)
			got = append(got, what)
			if during != nil {
				during(what)
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return got
	}
	has := func(evs []string, sub string) bool {
		for _, e := range evs {
			if strings.Contains(e, sub) {
				return true
			}
		}
		return false
	}

	t.Run("kill", func(t *testing.T) {
		before, _ := strconv.Atoi(inspect(a, "{{.RestartCount}}"))
		evs := do(Fault{Do: Kill, Target: "a"}, nil)
		after, _ := strconv.Atoi(inspect(a, "{{.RestartCount}}"))
		if after != before+1 || !healthy() || !has(evs, "SIGKILL to its process") || !has(evs, "a back (healthy) after") {
			t.Errorf("restarts %d -> %d, healthy %v, events %q", before, after, healthy(), evs)
		}
	})
	t.Run("pause", func(t *testing.T) {
		var paused string
		do(Fault{Do: Pause, Target: "a", For: 2 * time.Second}, func(what string) {
			if strings.Contains(what, "paused (docker pause)") {
				paused = inspect(a, "{{.State.Paused}}")
			}
		})
		if paused != "true" || inspect(a, "{{.State.Paused}}") != "false" {
			t.Errorf("paused during: %s, after: %s", paused, inspect(a, "{{.State.Paused}}"))
		}
	})
	t.Run("cpu", func(t *testing.T) {
		var during string
		do(Fault{Do: CPU, Target: "a", For: 2 * time.Second, Factor: 0.2}, func(what string) {
			if strings.Contains(what, "CPU limit 0.1 cores") {
				during = inspect(a, "{{.HostConfig.NanoCpus}}")
			}
		})
		if during != "100000000" || inspect(a, "{{.HostConfig.NanoCpus}}") != "500000000" {
			t.Errorf("a's NanoCpus during %s, after %s; want 1e8 then 5e8", during, inspect(a, "{{.HostConfig.NanoCpus}}"))
		}
		cores := docker("info", "-f", "{{.NCPU}}")
		evs := do(Fault{Do: CPU, Target: "b", For: 2 * time.Second, Factor: 0.5}, nil)
		if got := inspect(b, "{{.HostConfig.NanoCpus}}"); got != cores+"000000000" || !has(evs, "was unlimited") {
			t.Errorf("unlimited b after: NanoCpus %s, want the host's %s cores; events %q", got, cores, evs)
		}
	})
	t.Run("cut", func(t *testing.T) {
		var cutReach = true
		do(Fault{Do: Cut, Target: "a", For: 2 * time.Second}, func(what string) {
			if strings.Contains(what, "cut off") {
				cutReach = reaches()
			}
		})
		if cutReach {
			t.Error("b reached a while it was cut off")
		}
		if !reaches() {
			t.Error("b does not reach a by its service name after the cut")
		}
	})
	t.Run("fill", func(t *testing.T) {
		var ls string
		evs := do(Fault{Do: Fill, Target: "a", For: 2 * time.Second, Path: "/data"}, func(what string) {
			if strings.Contains(what, "full") {
				ls = docker("exec", a, "/app", "dial", "127.0.0.1:8000") // it still runs
			}
		})
		if !has(evs, "a /data full (ENOSPC) after 4.0 MiB") || ls != "ok" {
			t.Errorf("events %q", evs)
		}
		pid := inspect(a, "{{.State.Pid}}")
		if _, err := os.Stat("/proc/" + pid + "/root/data/" + FillFile); !os.IsNotExist(err) {
			t.Errorf("fill file left: %v", err)
		}
	})
	t.Run("restart", func(t *testing.T) {
		evs := do(Fault{Do: Restart, Target: "a", Grace: 2 * time.Second}, nil)
		if !has(evs, "a stopped after") || !has(evs, "a back (healthy)") || !healthy() {
			t.Errorf("events %q", evs)
		}
	})
	t.Run("start", func(t *testing.T) {
		// c: created and never started, as compose up --no-start leaves it.
		c := docker("create", "--name", project+"_c_1",
			"--label", "com.docker.compose.project="+project, "--label", "com.docker.compose.service=c",
			"--network", net, "--network-alias", "c", "--restart", "unless-stopped", "--read-only", image)
		evs := do(Fault{Do: Start, Target: "c"}, nil)
		if !has(evs, "c started (docker start; it was created)") || !has(evs, "c up (healthy) after") ||
			inspect(c, "{{.State.Health.Status}}") != "healthy" {
			t.Errorf("events %q, health %s", evs, inspect(c, "{{.State.Health.Status}}"))
		}
		if err := d.Inject(ctx, Fault{Do: Start, Target: "c"}, func(string) {}); err == nil || !strings.Contains(err.Error(), "already running") {
			t.Errorf("a second start: %v, want already running", err)
		}
	})
}
