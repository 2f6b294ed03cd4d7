package loadtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"levee/internal/clock"
	"levee/loadtest/record"
	"levee/loadtest/report"
)

// runFlushEvery is how often a run's recorder hands its finished seconds
// to the run file.
const runFlushEvery = time.Second

// RunFile is the common run file (levee/loadtest/report: the versioned
// NDJSON that `loadtest report` and `loadtest compare` read) of a legacy
// scenario, -run-file. A run given one records every request into one
// record.Recorder as well as into its own report; a goroutine the run owns
// flushes the recorder once a second and each point is written as it comes,
// after the meta line, so a run cut short still leaves its seconds. End
// rewrites the file whole, with the phases that ran in its meta line (they
// are known only then) and the end line.
//
// A nil *RunFile records nothing: every method is then a no-op.
type RunFile struct {
	path string
	f    *os.File

	mu      sync.Mutex
	run     report.Run // meta, events and points so far
	w       *report.Writer
	err     error // the first write error
	clk     clock.Clock
	start   time.Time
	open    int // index in run.Meta.Phases of the phase running, -1 for none
	started bool
}

// CreateRunFile creates (or truncates) the run file at path, to be filled
// by one run; m is its meta line's start (Scenario, Label, Command, ...):
// the run sets Started, RunID and Phases.
func CreateRunFile(path string, m report.Meta) (*RunFile, error) {
	if path == "" {
		return nil, errors.New("-run-file: empty path")
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-run-file: %w", err)
	}
	return &RunFile{path: path, f: f, run: report.Run{Meta: m}, open: -1}, nil
}

// begin starts the run's record on clk, now: it writes the meta line and
// starts the flusher. The recorder returned takes every request; stop (call
// it once every request has ended) stops the flusher and writes the last
// points. Without a run file, rec is nil and stop does nothing.
func (rf *RunFile) begin(ctx context.Context, clk clock.Clock, runID string) (rec *record.Recorder, stop func()) {
	if rf == nil {
		return nil, func() {}
	}
	rf.mu.Lock()
	rf.clk, rf.start, rf.started = clk, clk.Now(), true
	rf.run.Meta.Started, rf.run.Meta.RunID = rf.start, runID
	w, err := report.NewWriter(rf.f, rf.run.Meta)
	rf.w, rf.err = w, err
	rf.mu.Unlock()

	rec = record.New(rf.start)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := clk.NewTicker(runFlushEvery)
		defer t.Stop()
		for {
			select {
			case <-fctx.Done():
				return
			case <-t.C():
				rf.points(rec.Flush(clk.Now()))
			}
		}
	}()
	var once sync.Once
	return rec, func() {
		once.Do(func() {
			cancel()
			<-done
			rf.phase("")
			rf.points(rec.Close(clk.Now()))
		})
	}
}

// points writes flushed points.
func (rf *RunFile) points(ps []record.Point) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	for _, p := range ps {
		rf.run.Points = append(rf.run.Points, p)
		if rf.w != nil && rf.err == nil {
			rf.err = rf.w.Point(p)
		}
	}
}

// since is wall seconds from the run's start to now.
func (rf *RunFile) since() float64 { return rf.clk.Now().Sub(rf.start).Seconds() }

// phase ends the phase running, if any, and starts the one named (an event
// marks its start on the plots); "" only ends it.
func (rf *RunFile) phase(name string) {
	if rf == nil {
		return
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if !rf.started {
		return
	}
	now := rf.since()
	if rf.open >= 0 {
		rf.run.Meta.Phases[rf.open].To = now
		rf.open = -1
	}
	if name == "" {
		return
	}
	rf.run.Meta.Phases = append(rf.run.Meta.Phases, report.Phase{Name: name, From: now, To: now})
	rf.open = len(rf.run.Meta.Phases) - 1
	ev := report.Event{T: now, What: name}
	rf.run.Events = append(rf.run.Events, ev)
	if rf.w != nil && rf.err == nil {
		rf.err = rf.w.Event(ev)
	}
}

// setCapacity sets the meta line's capacity (requests/s), written by End.
func (rf *RunFile) setCapacity(c float64) {
	if rf == nil {
		return
	}
	rf.mu.Lock()
	rf.run.Meta.Capacity = c
	rf.mu.Unlock()
}

// End finishes the file: it is rewritten (a new file renamed over it) with
// the meta line holding the phases, the events and points, and the end
// line with the points' summary, cs and warnings. It returns the first
// error writing the file met, also one while the run went on.
func (rf *RunFile) End(cs []report.Criterion, warnings []string) error {
	if rf == nil {
		return nil
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	err := rf.err
	mode := os.FileMode(0o644)
	if fi, serr := rf.f.Stat(); serr == nil {
		mode = fi.Mode().Perm() // what os.Create gave it, not CreateTemp's 0600
	}
	if cerr := rf.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("-run-file: %s: %w", rf.path, err)
	}
	rf.run.Summary = report.Summarize(rf.run.Points)
	rf.run.Criteria, rf.run.Warnings = cs, warnings
	tmp, err := os.CreateTemp(filepath.Dir(rf.path), "."+filepath.Base(rf.path)+".*")
	if err == nil {
		err = tmp.Chmod(mode)
		if err == nil {
			err = writeRun(tmp, &rf.run)
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), rf.path)
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
		return fmt.Errorf("-run-file: %s: %w", rf.path, err)
	}
	return nil
}

func writeRun(f *os.File, run *report.Run) error {
	w, err := report.NewWriter(f, run.Meta)
	if err != nil {
		return err
	}
	for _, e := range run.Events {
		if err := w.Event(e); err != nil {
			return err
		}
	}
	for _, p := range run.Points {
		if err := w.Point(p); err != nil {
			return err
		}
	}
	return w.EndRun(run)
}

// Discard closes and removes the file, for a run that did not start.
func (rf *RunFile) Discard() {
	if rf == nil {
		return
	}
	rf.f.Close()
	os.Remove(rf.path)
}

// recSample is one request's record sample.
func recSample(op, crit string, o Outcome, due, sent, done time.Time) record.Sample {
	return record.Sample{Op: op, Crit: crit, Class: o.Class, Reason: o.Reason, Due: due, Sent: sent, Done: done}
}

// RunCriteria are the report's criteria as the run file's: what each
// checks, its verdict and what was measured.
func (r *OverloadReport) RunCriteria() []report.Criterion {
	out := make([]report.Criterion, 0, len(r.Criteria))
	for _, c := range r.Criteria {
		out = append(out, report.Criterion{Threshold: c.Name, Passed: c.Pass, Detail: c.Got})
	}
	return out
}

// SmokeCriterion is the smoke scenario's one criterion, what Problems
// judges.
const SmokeCriterion = "every request got exactly one reply and the only errors were typed business errors"

// RunCriteria is the report's verdict as the run file's criterion, the
// problems found its detail.
func (r *Report) RunCriteria() []report.Criterion {
	ps := r.Problems()
	detail := "no problem"
	if len(ps) > 0 {
		detail = strings.Join(ps, "; ")
	}
	return []report.Criterion{{Threshold: SmokeCriterion, Passed: len(ps) == 0, Detail: detail}}
}

// RunCriteria are the line report's criteria as the run file's: what each
// checks, its verdict and what was measured.
func (r *LineReport) RunCriteria() []report.Criterion {
	out := make([]report.Criterion, 0, len(r.Criteria))
	for _, c := range r.Criteria {
		out = append(out, report.Criterion{Threshold: c.Name, Passed: c.Pass, Detail: c.Got})
	}
	return out
}

// HoldCriterion is the hold scenario's one criterion, what Passed judges.
const HoldCriterion = "the run completed, every connection was held and none dropped (and, with -target-pid, RSS sampled)"

// RunCriteria is the hold report's verdict as the run file's criterion,
// what was held and dropped its detail.
func (r *HoldReport) RunCriteria() []report.Criterion {
	detail := fmt.Sprintf("held %d of %d, dropped %d%s", r.Held, r.Conns, r.Dropped, paren(r.DropReasons))
	if r.PID > 0 {
		detail += fmt.Sprintf(", %d RSS samples", r.Samples)
	}
	if r.Interrupted {
		detail += ", interrupted"
	}
	return []report.Criterion{{Threshold: HoldCriterion, Passed: r.Passed, Detail: detail}}
}
