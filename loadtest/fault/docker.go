package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

// Docker injects faults into the containers of a compose project with the
// docker CLI (Docker 20.10 and later; docker-compose v1 or v2 made them).
// A target is a service name, resolved by the labels
// com.docker.compose.project=Project and com.docker.compose.service=TARGET
// to exactly one container.
//
//   - kill: SIGKILL to the container's main process from the host (its pid
//     from docker inspect), as a crash: the restart policy restarts it
//     (docker kill would count as a manual stop, which the policy skips).
//     When the pid may not be signalled: docker kill -s KILL, then docker
//     start, and the event says so. Over when the container runs again and
//     is healthy (if it has a healthcheck), at most BackTimeout.
//   - pause: docker pause, For, docker unpause.
//   - restart: docker stop -t GRACE (SIGTERM, SIGKILL after the grace),
//     docker start; over when back (healthy).
//   - cpu: docker update --cpus old x Factor, For, the old limit again. An
//     unlimited container gets the Docker host's cores x Factor and then
//     the host's cores (docker 20.10 cannot lift a limit: --cpus 0 changes
//     nothing), which limits nothing.
//   - cut: docker network disconnect -f from every network it is on, For,
//     docker network connect with its aliases (the service name resolves
//     again) and its static IP if it had one.
//   - fill: a file .levee-fill under Path written through the host's
//     /proc/PID/root (needs root on the Docker host) until ENOSPC or 1 GiB
//     ("did not fill"), For, the file removed.
//   - start: docker start of a container that exists and is not running
//     (created with `compose up --no-start`, or stopped): a node that
//     joins, as a scale-out. A running one is an error (a start that
//     starts nothing proves nothing). Over when it runs and is healthy
//     (if it has a healthcheck), at most BackTimeout.
type Docker struct {
	Project string
	Docker  string      // the CLI; "" is "docker"
	Clock   clock.Clock // nil: the wall clock

	// For tests: nil/zero take the real thing.
	run         func(ctx context.Context, name string, args ...string) ([]byte, error)
	signal      func(pid int, sig syscall.Signal) error
	procRoot    string        // "/proc"
	fillLimit   int64         // FillLimit
	backTimeout time.Duration // BackTimeout
}

// BackTimeout bounds the wait for a killed or restarted container to be
// back.
const BackTimeout = 90 * time.Second

// FillLimit bounds what fill writes.
const FillLimit = 1 << 30

// FillFile is the name of the file fill writes under its path.
const FillFile = ".levee-fill"

// backPoll is how often the container is inspected while waiting for it.
const backPoll = 500 * time.Millisecond

// ParseSpec reads a -faults value: "docker:PROJECT".
func ParseSpec(s string) (Injector, error) {
	kind, arg, ok := strings.Cut(s, ":")
	if !ok || kind != "docker" {
		return nil, fmt.Errorf("want docker:PROJECT (the compose project's name), got %q", s)
	}
	if arg == "" || strings.ContainsAny(arg, " \t=,") {
		return nil, fmt.Errorf("bad compose project name %q", arg)
	}
	return &Docker{Project: arg}, nil
}

func (d *Docker) clk() clock.Clock {
	if d.Clock == nil {
		return clock.Real{}
	}
	return d.Clock
}

// docker runs the CLI and returns its output; an error says the command
// and what it wrote on stderr.
func (d *Docker) docker(ctx context.Context, args ...string) ([]byte, error) {
	name := d.Docker
	if name == "" {
		name = "docker"
	}
	if d.run != nil {
		return d.run(ctx, name, args...)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return out, fmt.Errorf("%s %s: %s", name, strings.Join(args, " "), msg)
	}
	return out, nil
}

// container is what the faults read of docker inspect.
type container struct {
	ID           string `json:"Id"`
	Name         string
	RestartCount int
	State        struct {
		Status    string
		Running   bool
		Paused    bool
		Pid       int
		StartedAt string
		Health    *struct{ Status string }
	}
	HostConfig struct {
		NanoCpus      int64
		CpuQuota      int64
		CpuPeriod     int64
		RestartPolicy struct{ Name string }
	}
	NetworkSettings struct {
		Networks map[string]*struct {
			Aliases    []string
			IPAMConfig *struct{ IPv4Address, IPv6Address string }
		}
	}
}

// parseInspect reads docker inspect's output for one container.
func parseInspect(b []byte) (*container, error) {
	var cs []container
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("docker inspect: %w", err)
	}
	if len(cs) != 1 {
		return nil, fmt.Errorf("docker inspect: %d containers, want 1", len(cs))
	}
	return &cs[0], nil
}

// resolve finds the one container of the compose service target.
func (d *Docker) resolve(ctx context.Context, target string) (string, error) {
	out, err := d.docker(ctx, "ps", "-aq",
		"--filter", "label=com.docker.compose.project="+d.Project,
		"--filter", "label=com.docker.compose.service="+target)
	if err != nil {
		return "", err
	}
	ids := strings.Fields(string(out))
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("no container of service %q in compose project %q (is it up?)", target, d.Project)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%d containers of service %q in compose project %q; a fault needs exactly one", len(ids), target, d.Project)
}

func (d *Docker) inspect(ctx context.Context, id string) (*container, error) {
	out, err := d.docker(ctx, "inspect", id)
	if err != nil {
		return nil, err
	}
	return parseInspect(out)
}

// Inject does f to the container of service f.Target.
func (d *Docker) Inject(ctx context.Context, f Fault, emit func(string)) error {
	if err := f.Check(); err != nil {
		return err
	}
	if d.Project == "" {
		return errors.New("fault: docker: no compose project")
	}
	id, err := d.resolve(ctx, f.Target)
	if err != nil {
		return fmt.Errorf("fault %s: %w", f, err)
	}
	c, err := d.inspect(ctx, id)
	if err != nil {
		return fmt.Errorf("fault %s: %w", f, err)
	}
	switch f.Do {
	case Kill:
		err = d.kill(ctx, f, c, emit)
	case Pause:
		err = d.pause(ctx, f, c, emit)
	case Restart:
		err = d.restart(ctx, f, c, emit)
	case CPU:
		err = d.cpu(ctx, f, c, emit)
	case Cut:
		err = d.cut(ctx, f, c, emit)
	case Fill:
		err = d.fill(ctx, f, c, emit)
	case Start:
		err = d.start(ctx, f, c, emit)
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("fault %s: %w", f, err)
	}
	return err
}

func (d *Docker) kill(ctx context.Context, f Fault, c *container, emit func(string)) error {
	if !c.State.Running || c.State.Pid <= 0 {
		return fmt.Errorf("%s is not running (%s)", f.Target, c.State.Status)
	}
	signal := d.signal
	if signal == nil {
		signal = syscall.Kill
	}
	start := d.clk().Now()
	how := fmt.Sprintf("SIGKILL to its process %d from the host", c.State.Pid)
	if err := signal(c.State.Pid, syscall.SIGKILL); err != nil {
		if !errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("SIGKILL to pid %d: %w", c.State.Pid, err)
		}
		if _, err := d.docker(ctx, "kill", "-s", "KILL", c.ID); err != nil {
			return err
		}
		uctx, cancel := undoContext(ctx)
		defer cancel()
		if _, err := d.docker(uctx, "start", c.ID); err != nil {
			return err
		}
		how = fmt.Sprintf("not permitted to signal pid %d: docker kill -s KILL and docker start instead, which the restart policy does not see", c.State.Pid)
	}
	emit(fmt.Sprintf("%s killed (%s)", f.Target, how))
	return d.back(ctx, f.Target, c, start, "back", emit)
}

// back waits until the container runs again (started since before) and
// is healthy if it has a healthcheck, and emits when: "TARGET WORD
// (healthy) after 3.4 s" (word: back after a kill or restart, up after a
// start).
func (d *Docker) back(ctx context.Context, target string, before *container, start time.Time, word string, emit func(string)) error {
	limit := d.backTimeout
	if limit <= 0 {
		limit = BackTimeout
	}
	clk := d.clk()
	deadline := clk.NewTimer(limit)
	defer deadline.Stop()
	tick := clk.NewTicker(backPoll)
	defer tick.Stop()
	last := "not inspected"
	for {
		c, err := d.inspect(ctx, before.ID)
		switch {
		case err != nil:
			last = err.Error()
		case !c.State.Running:
			last = c.State.Status
		case c.RestartCount == before.RestartCount && c.State.StartedAt == before.State.StartedAt:
			last = "not restarted yet"
		case c.State.Health != nil && c.State.Health.Status != "healthy":
			last = "running, " + c.State.Health.Status
		default:
			how := "running"
			if c.State.Health != nil {
				how = "healthy"
			}
			emit(fmt.Sprintf("%s %s (%s) after %s", target, word, how, secs(clk.Now().Sub(start))))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C():
			return fmt.Errorf("%s not %s within %v (restart policy %q): %s", target, word, limit, before.HostConfig.RestartPolicy.Name, last)
		case <-tick.C():
		}
	}
}

func (d *Docker) pause(ctx context.Context, f Fault, c *container, emit func(string)) error {
	start := d.clk().Now()
	if _, err := d.docker(ctx, "pause", c.ID); err != nil {
		return err
	}
	emit(f.Target + " paused (docker pause)")
	herr := clock.Sleep(ctx, d.clk(), f.For)
	uctx, cancel := undoContext(ctx)
	defer cancel()
	if _, err := d.docker(uctx, "unpause", c.ID); err != nil {
		return errors.Join(herr, err)
	}
	emit(fmt.Sprintf("%s unpaused after %s", f.Target, secs(d.clk().Now().Sub(start))))
	return herr
}

func (d *Docker) restart(ctx context.Context, f Fault, c *container, emit func(string)) error {
	start := d.clk().Now()
	g := int(math.Ceil(f.grace().Seconds()))
	_, serr := d.docker(ctx, "stop", "-t", strconv.Itoa(g), c.ID)
	if serr == nil {
		emit(fmt.Sprintf("%s stopped after %s (docker stop -t %d: SIGTERM, SIGKILL after %d s)", f.Target, secs(d.clk().Now().Sub(start)), g, g))
	}
	// Start it again whatever happened: also when ctx ended mid-stop.
	uctx, cancel := undoContext(ctx)
	defer cancel()
	if _, err := d.docker(uctx, "start", c.ID); err != nil {
		return errors.Join(serr, err)
	}
	if serr != nil && ctx.Err() == nil {
		return serr
	}
	emit(f.Target + " started (docker start)")
	return d.back(ctx, f.Target, c, start, "back", emit)
}

func (d *Docker) start(ctx context.Context, f Fault, c *container, emit func(string)) error {
	if c.State.Running {
		return fmt.Errorf("%s is already running: start is for a container that is not (compose up --no-start, or stopped)", f.Target)
	}
	start := d.clk().Now()
	if _, err := d.docker(ctx, "start", c.ID); err != nil {
		return err
	}
	emit(fmt.Sprintf("%s started (docker start; it was %s)", f.Target, c.State.Status))
	return d.back(ctx, f.Target, c, start, "up", emit)
}

// cpuLimit is a container's CPU limit and how to set it.
type cpuLimit struct {
	flag      string  // --cpus or --cpu-quota
	old, new  string  // the flag's values
	oldCPUs   float64 // in cores
	newCPUs   float64
	unlimited bool
}

// cpuLimits works out the squeeze of c by factor; cores is the Docker
// host's (for an unlimited container).
func cpuLimits(c *container, factor float64, cores int) cpuLimit {
	hc := c.HostConfig
	switch {
	case hc.NanoCpus > 0:
		old := float64(hc.NanoCpus) / 1e9
		n := cpus(old * factor)
		return cpuLimit{flag: "--cpus", old: fmtCPUs(old), new: fmtCPUs(n), oldCPUs: old, newCPUs: n}
	case hc.CpuQuota > 0:
		period := hc.CpuPeriod
		if period <= 0 {
			period = 100_000 // the kernel's default CFS period, µs
		}
		q := max(1000, int64(math.Round(float64(hc.CpuQuota)*factor))) // the kernel's least quota is 1 ms
		return cpuLimit{flag: "--cpu-quota", old: strconv.FormatInt(hc.CpuQuota, 10), new: strconv.FormatInt(q, 10),
			oldCPUs: float64(hc.CpuQuota) / float64(period), newCPUs: float64(q) / float64(period)}
	}
	old := float64(max(cores, 1))
	n := cpus(old * factor)
	return cpuLimit{flag: "--cpus", old: fmtCPUs(old), new: fmtCPUs(n), oldCPUs: old, newCPUs: n, unlimited: true}
}

// cpus rounds a limit to docker's 0.01 steps, at least 0.01.
func cpus(v float64) float64 { return max(0.01, math.Round(v*100)/100) }

func fmtCPUs(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func (d *Docker) cpu(ctx context.Context, f Fault, c *container, emit func(string)) error {
	cores := 0
	if c.HostConfig.NanoCpus == 0 && c.HostConfig.CpuQuota <= 0 {
		out, err := d.docker(ctx, "info", "-f", "{{.NCPU}}")
		if err != nil {
			return err
		}
		if cores, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil || cores < 1 {
			return fmt.Errorf("docker info: the host's cores: %q", strings.TrimSpace(string(out)))
		}
	}
	l := cpuLimits(c, f.Factor, cores)
	start := d.clk().Now()
	if _, err := d.docker(ctx, "update", l.flag, l.new, c.ID); err != nil {
		return err
	}
	was := fmt.Sprintf("%g", l.oldCPUs)
	if l.unlimited {
		was = fmt.Sprintf("unlimited (the host's %d cores)", cores)
	}
	emit(fmt.Sprintf("%s CPU limit %g cores, was %s", f.Target, l.newCPUs, was))
	herr := clock.Sleep(ctx, d.clk(), f.For)
	uctx, cancel := undoContext(ctx)
	defer cancel()
	if _, err := d.docker(uctx, "update", l.flag, l.old, c.ID); err != nil {
		return errors.Join(herr, err)
	}
	what := fmt.Sprintf("%s CPU limit restored to %g cores after %s", f.Target, l.oldCPUs, secs(d.clk().Now().Sub(start)))
	if l.unlimited {
		what += " (it was unlimited; docker cannot lift a limit, so it is the host's cores, which limits nothing)"
	}
	emit(what)
	return herr
}

// connectArgs are the docker network connect arguments that put c back on
// net as it was: its aliases (not the short id docker adds itself) and its
// static IP.
func connectArgs(c *container, net string) []string {
	args := []string{"network", "connect"}
	n := c.NetworkSettings.Networks[net]
	short := c.ID
	if len(short) > 12 {
		short = short[:12]
	}
	if n != nil {
		for _, a := range n.Aliases {
			if a != short && a != c.ID {
				args = append(args, "--alias", a)
			}
		}
		if ip := n.IPAMConfig; ip != nil {
			if ip.IPv4Address != "" {
				args = append(args, "--ip", ip.IPv4Address)
			}
			if ip.IPv6Address != "" {
				args = append(args, "--ip6", ip.IPv6Address)
			}
		}
	}
	return append(args, net, c.ID)
}

func (d *Docker) cut(ctx context.Context, f Fault, c *container, emit func(string)) error {
	var nets []string
	for n := range c.NetworkSettings.Networks {
		nets = append(nets, n)
	}
	slices.Sort(nets)
	if len(nets) == 0 {
		return fmt.Errorf("%s is on no network", f.Target)
	}
	start := d.clk().Now()
	var cut []string
	reconnect := func() error {
		uctx, cancel := undoContext(ctx)
		defer cancel()
		var errs []error
		for _, n := range cut {
			if _, err := d.docker(uctx, connectArgs(c, n)...); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for _, n := range nets {
		if _, err := d.docker(ctx, "network", "disconnect", "-f", n, c.ID); err != nil {
			return errors.Join(err, reconnect())
		}
		cut = append(cut, n)
	}
	emit(fmt.Sprintf("%s cut off %s (docker network disconnect)", f.Target, strings.Join(nets, ", ")))
	herr := clock.Sleep(ctx, d.clk(), f.For)
	if err := reconnect(); err != nil {
		return errors.Join(herr, err)
	}
	emit(fmt.Sprintf("%s reconnected to %s after %s", f.Target, strings.Join(nets, ", "), secs(d.clk().Now().Sub(start))))
	return herr
}

// fillPath is where fill writes for a container whose main process is
// pid: under the host's view of its root.
func (d *Docker) fillPath(pid int, p string) string {
	root := d.procRoot
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(root, strconv.Itoa(pid), "root", filepath.Clean(p), FillFile)
}

func mib(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func (d *Docker) fill(ctx context.Context, f Fault, c *container, emit func(string)) error {
	if !c.State.Running || c.State.Pid <= 0 {
		return fmt.Errorf("%s is not running (%s)", f.Target, c.State.Status)
	}
	name := d.fillPath(c.State.Pid, f.Path)
	file, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("fill writes through the host's /proc/PID/root, which needs root on the Docker host: %w", err)
		}
		return err
	}
	start := d.clk().Now()
	limit := d.fillLimit
	if limit <= 0 {
		limit = FillLimit
	}
	written, full, werr := writeUntilFull(ctx, file, limit)
	free := func() error {
		terr := file.Truncate(0) // frees the space even if the process (and its /proc) is gone
		cerr := file.Close()
		rerr := os.Remove(name)
		if errors.Is(rerr, os.ErrNotExist) {
			rerr = d.removeRestarted(c.ID, f.Path)
		}
		return errors.Join(terr, cerr, rerr)
	}
	if werr != nil {
		return errors.Join(werr, free())
	}
	if full {
		emit(fmt.Sprintf("%s %s full (ENOSPC) after %s written", f.Target, f.Path, mib(written)))
	} else {
		emit(fmt.Sprintf("%s %s did not fill: stopped at %s written", f.Target, f.Path, mib(written)))
	}
	herr := clock.Sleep(ctx, d.clk(), f.For)
	if err := free(); err != nil {
		return errors.Join(herr, err)
	}
	emit(fmt.Sprintf("%s %s freed (%s removed) after %s", f.Target, f.Path, mib(written), secs(d.clk().Now().Sub(start))))
	return herr
}

// removeRestarted removes the fill file of a container that restarted
// meanwhile (its old /proc/PID is gone).
func (d *Docker) removeRestarted(id, p string) error {
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	c, err := d.inspect(ctx, id)
	if err != nil {
		return err
	}
	if c.State.Pid <= 0 {
		return fmt.Errorf("%s under %s not removed: the container is not running (the file is emptied)", FillFile, p)
	}
	if err := os.Remove(d.fillPath(c.State.Pid, p)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// writeUntilFull writes zeros to w until ENOSPC (full) or limit bytes, or
// ctx ends.
func writeUntilFull(ctx context.Context, w *os.File, limit int64) (written int64, full bool, err error) {
	buf := make([]byte, 1<<20)
	for written < limit {
		if err := ctx.Err(); err != nil {
			return written, false, err
		}
		n, err := w.Write(buf[:min(int64(len(buf)), limit-written)])
		written += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return written, true, nil
		}
		if err != nil {
			return written, false, err
		}
	}
	if err := w.Sync(); errors.Is(err, syscall.ENOSPC) {
		return written, true, nil
	} else if err != nil {
		return written, false, err
	}
	return written, false, nil
}
