package gate

import (
	"errors"
	"fmt"
	"time"

	"github.com/leveehq/levee/gate/autopace"
	"github.com/leveehq/levee/queue"
)

// An operator's change of the line (POST /admin/line): the admin API
// parses the request into a lineChange (parseLineChange, admin.go) and the
// line applies it here, under ctl, the lock the auto pacer takes too.

// lineChange is a parsed POST: nil fields stay as they are.
type lineChange struct {
	mode       *string // an operator's mode name, auto included
	n          *int
	interval   *time.Duration
	maxLength  *int
	retryAfter *time.Duration
	autoMin    *float64
	autoMax    *float64
}

// lineSettings are what an operator sets, for the change log.
type lineSettings struct {
	mode       string
	rate       queue.Rate
	maxLength  int
	retryAfter time.Duration
	autoMin    float64
	autoMax    float64
}

// settings reads the current ones; l.ctl must be held.
func (l *line) settings(now time.Time) lineSettings {
	st := l.q.Stats(now)
	pc := l.pace.Config()
	ls := lineSettings{mode: st.Mode.String(), rate: st.Rate, maxLength: st.MaxLength, retryAfter: st.RetryAfter, autoMin: pc.MinRate, autoMax: pc.MaxRate}
	if l.auto {
		ls.mode = modeAuto
	}
	return ls
}

// apply checks ch together with the current settings and, if all is well,
// applies all of it and has the walker release and push at once;
// otherwise it changes nothing and the error (wrapping errAdmin) names the
// field. It returns the settings before and after.
func (l *line) apply(ch lineChange, now time.Time) (old, applied lineSettings, err error) {
	l.ctl.Lock()
	defer l.ctl.Unlock()
	old = l.settings(now)
	want := old
	if ch.mode != nil {
		want.mode = *ch.mode
	}
	if ch.n != nil {
		want.rate.N = *ch.n
	}
	if ch.interval != nil {
		want.rate.Interval = *ch.interval
	}
	if ch.maxLength != nil {
		want.maxLength = *ch.maxLength
	}
	if ch.retryAfter != nil {
		want.retryAfter = *ch.retryAfter
	}
	if ch.autoMin != nil {
		want.autoMin = *ch.autoMin
	}
	if ch.autoMax != nil {
		want.autoMax = *ch.autoMax
	}
	// Everything together, before anything is applied.
	if err := want.rate.Validate(); err != nil {
		return old, old, fmt.Errorf("%w: rate and interval: %v", errAdmin, err)
	}
	if want.autoMin > want.autoMax {
		return old, old, fmt.Errorf("%w: auto_min_rate (%g) is above auto_max_rate (%g)", errAdmin, want.autoMin, want.autoMax)
	}
	rateGiven := ch.n != nil || ch.interval != nil
	toAuto := want.mode == modeAuto
	if toAuto && rateGiven {
		if ps := want.rate.PerSecond(); ps < want.autoMin || ps > want.autoMax {
			return old, old, fmt.Errorf("%w: rate %v (%.3g per second) is outside the auto bounds [%g, %g] per second", errAdmin, want.rate, ps, want.autoMin, want.autoMax)
		}
	}
	qmode, _, err := parseLineMode(want.mode)
	if err != nil {
		return old, old, fmt.Errorf("%w: mode: %v", errAdmin, err)
	}

	// Apply. The values are valid, so the setters cannot refuse them.
	l.pace.SetBounds(want.autoMin, want.autoMax)
	if toAuto {
		if !l.auto {
			l.pace.Restart()
		}
		l.pace.SetRate(want.rate.PerSecond()) // inside the bounds when given (checked above)
		if !rateGiven {
			want.rate = autopace.RateFor(l.pace.Rate(), want.rate.Interval)
			if want.rate.PerSecond() == old.rate.PerSecond() {
				want.rate = old.rate // no change worth a restart of the pace
			}
		}
	}
	var errs []error
	if want.rate != old.rate {
		errs = append(errs, l.q.SetRate(want.rate.N, want.rate.Interval, now))
		l.s.m.line.releaseRate.Set(want.rate.PerSecond())
	}
	if want.maxLength != old.maxLength {
		errs = append(errs, l.q.SetMaxLength(want.maxLength))
	}
	if want.retryAfter != old.retryAfter {
		errs = append(errs, l.q.SetRetryAfter(want.retryAfter))
	}
	if want.mode != old.mode {
		errs = append(errs, l.q.SetMode(qmode, now))
		l.auto = toAuto
		l.setModeName(qmode, toAuto)
	}
	if err := errors.Join(errs...); err != nil {
		l.s.log.Error("admin API: applying a validated change", "err", err)
	}
	applied = l.settings(now)
	l.poke()
	return old, applied, nil
}
