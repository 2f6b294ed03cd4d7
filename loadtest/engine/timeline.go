package engine

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/lineadmin"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/threshold"
)

// timeline plays the operator's actions: at each step's time it checks the
// step's conditions on the last minute (scenario time) of points, then
// changes every gate's line through the admin API or injects the step's
// fault, off the caller's goroutine; poll returns the events of the steps
// that have finished and of the faults in progress.
type timeline struct {
	p      *plan
	admins []lineadmin.Admin
	faults fault.Injector       // nil: fault steps are skipped
	since  func() time.Duration // wall time since the run's start, for the faults' events
	next   int
	wg     sync.WaitGroup
	mu     sync.Mutex
	done   []report.Event
	line   lineRate // what the line steps applied so far configured (under mu)
}

// NoInjector is why a fault step is skipped when the run has no injector.
const NoInjector = "no fault injector: run with -faults docker:PROJECT"

// newTimeline calls the admin API at urls with hc (target.HTTPClient or
// HTTPSClient: unless the run allows other addresses, one that dials only
// loopback; for https admin URLs, one that trusts the run's CA). faults
// injects the fault steps (nil: they are skipped); since is the wall time
// since the run's start.
func newTimeline(p *plan, urls []string, token string, hc *http.Client, faults fault.Injector, since func() time.Duration) *timeline {
	t := &timeline{p: p, faults: faults, since: since}
	for _, u := range urls {
		t.admins = append(t.admins, lineadmin.Admin{URL: u, Token: token, HTTP: hc})
	}
	return t
}

// poll starts the steps due by elapsed and returns the finished ones (and
// what the faults in progress emitted). A fault step's goroutine ends when
// the fault is over and undone; ctx ending cuts it short (it is undone
// then too).
func (t *timeline) poll(ctx context.Context, elapsed time.Duration, points []record.Point) []report.Event {
	for t.next < len(t.p.timeline) && t.p.timeline[t.next].at <= elapsed {
		s := t.p.timeline[t.next]
		t.next++
		at := s.at.Seconds()
		kind, what := report.EventLine, s.label+" "+describe(s)
		if s.fault != nil {
			kind, what = report.EventFault, s.label+" fault "+s.fault.String()
		}
		if s.note != "" {
			what += " (" + s.note + ")"
		}
		if why := t.unmet(s, points); why != "" {
			t.add(report.Event{T: at, Kind: kind, What: what + ": skipped, " + why})
			continue
		}
		switch {
		case s.fault != nil && t.faults == nil:
			t.add(report.Event{T: at, Kind: kind, What: what + ": skipped, " + NoInjector})
			continue
		case s.fault != nil:
			t.add(report.Event{T: at, Kind: kind, What: what})
			t.wg.Go(func() { t.inject(ctx, s, at, what) })
			continue
		case len(t.admins) == 0:
			t.add(report.Event{T: at, Kind: kind, What: what + ": skipped, no admin URL given"})
			continue
		}
		t.wg.Go(func() {
			failed := t.apply(ctx, s)
			t.mu.Lock()
			t.line.applied(t.elapsed(elapsed), s, len(t.admins), failed == "")
			t.mu.Unlock()
			if failed != "" {
				what += failed
			} else {
				what += t.applyNote(s)
			}
			t.add(report.Event{T: at, Kind: kind, What: what})
		})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.done
	t.done = nil
	return out
}

// inject runs a fault step: each thing the fault emits is an event at its
// time, and the end is an event at the step's time that lasts until the
// fault was over.
func (t *timeline) inject(ctx context.Context, s step, at float64, what string) {
	label := s.label + " " + s.fault.Do + " " + s.fault.Target + ": "
	err := t.faults.Inject(ctx, *s.fault, func(msg string) {
		t.add(report.Event{T: t.since().Seconds(), Kind: report.EventFault, What: label + msg})
	})
	end := max(t.since().Seconds(), at)
	took := fmt.Sprintf("%.1f s", end-at)
	switch {
	case err != nil && ctx.Err() != nil:
		what += ": cut short after " + took + " (the run was stopped; undone)"
	case err != nil:
		what += ": failed after " + took + ": " + err.Error()
	default:
		what += ": over after " + took
	}
	t.add(report.Event{T: at, End: end, Kind: report.EventFault, What: what})
}

// finish waits for the steps in progress and returns their events.
func (t *timeline) finish() []report.Event {
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.done
	t.done = nil
	return out
}

func (t *timeline) add(e report.Event) {
	t.mu.Lock()
	t.done = append(t.done, e)
	t.mu.Unlock()
}

// unmet evaluates the step's conditions on the last minute of scenario
// time; "" when they all hold.
func (t *timeline) unmet(s step, points []record.Point) string {
	if len(s.sc.Conds) == 0 {
		return ""
	}
	window := int(60/t.p.speed + 0.5)
	from := max(0, len(points)-max(window, 1))
	last := &report.Run{Points: points[from:]}
	last.Summary = report.Summarize(last.Points)
	var failed []string
	for _, c := range s.sc.Conds {
		if r := c.Eval(last.Facts()); !r.Passed {
			failed = append(failed, fmt.Sprintf("%s (was %s)", c.String(), valueOf(r)))
		}
	}
	if len(failed) == 0 {
		return ""
	}
	return "not healthy: " + strings.Join(failed, ", ")
}

func valueOf(r threshold.Result) string {
	if r.Detail != "" {
		return r.Detail
	}
	return fmt.Sprintf("%.4g", r.Value)
}

// apply sends the step's change to every gate; it returns "" or what
// failed. A release rate is the cluster's: each of n gates' lines gets
// 1/n of it (at least 1 per interval).
func (t *timeline) apply(ctx context.Context, s step) string {
	set := lineadmin.LineSetting{Mode: s.mode, Rate: perGate(s.rate, len(t.admins)), Interval: s.interval}
	var errs []string
	for _, a := range t.admins {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := a.Set(actx, set); err != nil {
			errs = append(errs, err.Error())
		}
		cancel()
	}
	if len(errs) > 0 {
		return fmt.Sprintf(": failed on %d of %d gates: %s", len(errs), len(t.admins), errs[0])
	}
	return ""
}

// applyNote is what a step applied on every gate adds to its event.
func (t *timeline) applyNote(s step) string {
	if s.rate > 0 && len(t.admins) > 1 {
		return fmt.Sprintf(" (%d gates, %d each)", len(t.admins), perGate(s.rate, len(t.admins)))
	}
	return fmt.Sprintf(" (%d gates)", len(t.admins))
}

// elapsed is the wall time since the run's start (the poll's, without a
// since).
func (t *timeline) elapsed(poll time.Duration) time.Duration {
	if t.since == nil {
		return poll
	}
	return t.since()
}

// lineRateDuring is the configured release rate over wall second sec
// (report.LevelLineRate); ok false when it is not known all through it.
func (t *timeline) lineRateDuring(sec int) (float64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.line.during(time.Duration(sec)*time.Second, time.Duration(sec+1)*time.Second)
}

// perGate is a cluster-wide release rate's share of one of n gates.
func perGate(rate, n int) int {
	if rate <= 0 || n <= 1 {
		return rate
	}
	return max(1, int(math.Round(float64(rate)/float64(n))))
}
