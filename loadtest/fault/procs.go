package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

// Proc is what a Go test can do to one process it started. A nil func
// makes the faults that need it unsupported for the process.
type Proc struct {
	Kill    func() error                                         // kill: SIGKILL it
	Stop    func() error                                         // pause: SIGSTOP it
	Cont    func() error                                         // pause: SIGCONT it
	Restart func(ctx context.Context, grace time.Duration) error // restart: SIGTERM, SIGKILL after grace, start it again
	Start   func(ctx context.Context) error                      // start: start it (it is not running: a node that joins)
	Back    func(ctx context.Context) error                      // kill, restart, start: wait until it serves (again) (it brings a killed one back); nil: do not wait
}

// Procs injects kill, pause, restart and start into processes a Go test
// started (the other kinds are errors: they need Docker).
type Procs struct {
	Targets map[string]Proc
	Clock   clock.Clock // nil: the wall clock
}

// Inject does f to Targets[f.Target].
func (p Procs) Inject(ctx context.Context, f Fault, emit func(string)) error {
	if err := f.Check(); err != nil {
		return err
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	pr, ok := p.Targets[f.Target]
	if !ok {
		return fmt.Errorf("fault %s: no process %q", f, f.Target)
	}
	start := clk.Now()
	back := func(what string) error {
		if pr.Back == nil {
			return nil
		}
		if err := pr.Back(ctx); err != nil {
			return fmt.Errorf("fault %s: %s did not come back: %w", f, f.Target, err)
		}
		emit(fmt.Sprintf("%s back after %s %s", f.Target, secs(clk.Now().Sub(start)), what))
		return nil
	}
	switch {
	case f.Do == Kill && pr.Kill != nil:
		if err := pr.Kill(); err != nil {
			return fmt.Errorf("fault %s: %w", f, err)
		}
		emit(f.Target + " killed (SIGKILL)")
		return back("the kill")
	case f.Do == Pause && pr.Stop != nil && pr.Cont != nil:
		if err := pr.Stop(); err != nil {
			return fmt.Errorf("fault %s: %w", f, err)
		}
		emit(f.Target + " paused (SIGSTOP)")
		herr := clock.Sleep(ctx, clk, f.For)
		if err := pr.Cont(); err != nil {
			return fmt.Errorf("fault %s: resume: %w", f, err)
		}
		emit(fmt.Sprintf("%s resumed (SIGCONT) after %s", f.Target, secs(clk.Now().Sub(start))))
		return herr
	case f.Do == Restart && pr.Restart != nil:
		if err := pr.Restart(ctx, f.grace()); err != nil {
			return fmt.Errorf("fault %s: %w", f, err)
		}
		emit(f.Target + " restarted (SIGTERM, then started again)")
		return back("the SIGTERM")
	case f.Do == Start && pr.Start != nil:
		if err := pr.Start(ctx); err != nil {
			return fmt.Errorf("fault %s: %w", f, err)
		}
		emit(f.Target + " started")
		return back("the start")
	}
	return fmt.Errorf("fault %s: not supported for process %s", f, f.Target)
}
