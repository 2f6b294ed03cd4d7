// Package fault injects the faults of a scenario's timeline into the
// cluster a load test runs against: kill a target (SIGKILL, its supervisor
// brings it back), pause it (it stops answering, then resumes), restart it
// gracefully (SIGTERM, SIGKILL after a grace, start again), take CPU away
// for a while, cut its network for a while, fill the filesystem under one
// of its paths for a while; or start a target that is not running (a
// node joining the cluster: a scale-out).
//
// An Injector blocks until the fault is over and the target is back or
// restored, and undoes what it did also when its context is cancelled
// (with a fresh short context for the undo). Docker injects into the
// containers of a compose project through the docker CLI; Procs into
// processes a Go test started; Func is any function.
package fault

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"time"
)

// The kinds of fault (Fault.Do).
const (
	Kill    = "kill"    // SIGKILL; the supervisor restarts it; over when it is back (healthy)
	Pause   = "pause"   // stop answering (SIGSTOP, docker pause) for For, then resume
	Restart = "restart" // SIGTERM, SIGKILL after Grace, start again; over when it is back
	CPU     = "cpu"     // CPU limit x Factor for For, then the old limit
	Cut     = "cut"     // off every network for For, then reconnected
	Fill    = "fill"    // the filesystem at Path filled until ENOSPC for For, then freed
	Start   = "start"   // start a target that is not running (a scale-out); over when it is up (healthy)
)

// Kinds are the values of Fault.Do.
var Kinds = []string{Kill, Pause, Restart, CPU, Cut, Fill, Start}

// DefaultGrace is a restart's grace when Fault.Grace is 0.
const DefaultGrace = 10 * time.Second

// Fault is one fault to inject. Times are wall time.
type Fault struct {
	Do     string        // one of Kinds
	Target string        // what to hurt: a compose service name (Docker), a key of Procs
	For    time.Duration // pause, cpu, cut, fill: how long (> 0)
	Grace  time.Duration // restart: SIGTERM to SIGKILL (0: DefaultGrace)
	Factor float64       // cpu: the new limit is the old one x Factor, in (0, 1)
	Path   string        // fill: an absolute path inside the target
}

// Injector injects faults. Inject blocks until the fault is over and the
// target back or restored; emit records what happened on the way ("battle-1
// back (healthy) after 3.4 s"). It undoes the fault also when ctx is
// cancelled, and then returns ctx's error.
type Injector interface {
	Inject(ctx context.Context, f Fault, emit func(what string)) error
}

// String names the fault: "kill battle-1", "pause battle-1 for 20s",
// "cpu battle-1 x0.2 for 10s", "fill logic /data for 20s".
func (f Fault) String() string {
	s := f.Do + " " + f.Target
	switch f.Do {
	case CPU:
		s += " x" + strconv.FormatFloat(f.Factor, 'g', -1, 64)
	case Fill:
		s += " " + f.Path
	case Restart:
		s += fmt.Sprintf(" (grace %v)", f.grace())
	}
	if f.For > 0 {
		s += fmt.Sprintf(" for %v", f.For)
	}
	return s
}

func (f Fault) grace() time.Duration {
	if f.Grace > 0 {
		return f.Grace
	}
	return DefaultGrace
}

// Check says what is wrong with f, or nil: the same rules as the scenario
// language (a target; For > 0 exactly for pause, cpu, cut and fill; Factor
// in (0, 1) only for cpu; an absolute Path only for fill; Grace only for
// restart).
func (f Fault) Check() error {
	switch {
	case !slices.Contains(Kinds, f.Do):
		return fmt.Errorf("fault: unknown kind %q", f.Do)
	case f.Target == "":
		return errors.New("fault: no target")
	}
	timed := f.Do == Pause || f.Do == CPU || f.Do == Cut || f.Do == Fill
	switch {
	case timed && f.For <= 0:
		return fmt.Errorf("fault %s: needs a duration > 0", f.Do)
	case !timed && f.For != 0:
		return fmt.Errorf("fault %s: takes no duration (it is over when the target is back)", f.Do)
	case f.Do == CPU && !(f.Factor > 0 && f.Factor < 1):
		return fmt.Errorf("fault cpu: factor must be in (0, 1), got %v", f.Factor)
	case f.Do != CPU && f.Factor != 0:
		return fmt.Errorf("fault %s: factor is only for cpu", f.Do)
	case f.Do == Fill && !path.IsAbs(f.Path):
		return fmt.Errorf("fault fill: path must be absolute, got %q", f.Path)
	case f.Do != Fill && f.Path != "":
		return fmt.Errorf("fault %s: path is only for fill", f.Do)
	case f.Do != Restart && f.Grace != 0:
		return fmt.Errorf("fault %s: grace is only for restart", f.Do)
	case f.Grace < 0:
		return errors.New("fault restart: grace must be >= 0")
	}
	return nil
}

// Func is an Injector made of a function.
type Func func(ctx context.Context, f Fault, emit func(what string)) error

// Inject calls fn.
func (fn Func) Inject(ctx context.Context, f Fault, emit func(string)) error { return fn(ctx, f, emit) }

// undoTimeout bounds an undo step run after the fault's context ended.
const undoTimeout = 30 * time.Second

// undoContext is for undoing a fault: not cancelled with ctx, but bounded.
func undoContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
}

// secs formats a duration as "3.4 s".
func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
