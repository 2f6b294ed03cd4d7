package gate

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"levee/queue"
)

// The admin API lives on the ops listener, behind a bearer token:
//
//	GET  /admin/line   the line's state, as JSON (lineView)
//	POST /admin/line   change any of mode, rate, interval, max_length,
//	                   retry_after, auto_min_rate, auto_max_rate (a form or
//	                   a JSON object), effective at once
//
// With no -admin-token the API is off and answers 404. A missing or wrong
// token is 401 and changes nothing. A POST is validated whole before
// anything is applied: one bad value is a 400 naming it, and nothing
// changes. Every change is logged with the old and new values and the
// caller's address.

const adminLinePath = "/admin/line"

// maxAdminBody bounds a POST's body.
const maxAdminBody = 64 << 10

func (s *Server) adminHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AdminToken == "" {
			http.NotFound(w, r)
			return
		}
		if !s.adminAuthorized(r) {
			s.log.Warn("admin API: unauthorized call", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
			w.Header().Set("WWW-Authenticate", `Bearer realm="levee gate admin"`)
			http.Error(w, "unauthorized: send the admin token as \"Authorization: Bearer <token>\"", http.StatusUnauthorized)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			s.writeLine(w, http.StatusOK)
		case http.MethodPost:
			s.postLine(w, r)
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			http.Error(w, "method not allowed: use GET or POST", http.StatusMethodNotAllowed)
		}
	})
}

// adminAuthorized compares the bearer token in constant time (of the
// hashes, so the length does not leak either).
func (s *Server) adminAuthorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	want := sha256.Sum256([]byte(s.cfg.AdminToken))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// lineView is GET /admin/line's answer.
type lineView struct {
	Mode          string   `json:"mode"`
	Rate          rateView `json:"rate"`
	Length        int      `json:"length"`   // in line, away ones included
	Waiting       int      `json:"waiting"`  // in line with a connection open
	Away          int      `json:"away"`     // in line, dropped, within grace
	Held          int      `json:"held"`     // released while away, kept for their return
	Priority      int      `json:"priority"` // in the priority lane
	MaxLength     int      `json:"max_length"`
	RetryAfter    string   `json:"retry_after"` // given to newcomers while closed
	Grace         string   `json:"grace"`
	AdmittedTotal uint64   `json:"admitted_total"`
	DroppedTotal  uint64   `json:"dropped_total"`
	RefusedFull   uint64   `json:"refused_full_total"`
	RefusedClosed uint64   `json:"refused_closed_total"`
	MeasuredRate  float64  `json:"measured_rate"` // per second; 0 until measured
	Measured      bool     `json:"measured"`
	OldestWaitMs  int64    `json:"oldest_wait_ms"`
	Room          *int     `json:"room"` // players the gate may let in now; null: no limit
	Auto          autoView `json:"auto"`
}

type rateView struct {
	N         int     `json:"n"`
	Interval  string  `json:"interval"`
	PerSecond float64 `json:"per_second"`
}

type autoView struct {
	Enabled      bool        `json:"enabled"`
	MinRate      float64     `json:"min_rate"` // per second
	MaxRate      float64     `json:"max_rate"`
	Rate         float64     `json:"rate"` // the auto pacer's current rate, per second
	Up           float64     `json:"up"`
	Down         float64     `json:"down"`
	Interval     string      `json:"interval"`
	LastVerdict  string      `json:"last_verdict,omitempty"`
	LastReason   string      `json:"last_reason,omitempty"`
	LastStepAt   *time.Time  `json:"last_step_at,omitempty"`
	Signals      signalsView `json:"signals"`
	MaxDepth     float64     `json:"max_queue_depth"`
	MaxP99Ms     int64       `json:"max_battle_p99_ms"`
	MaxPressure  float64     `json:"max_backpressure"`
	MetricsURLs  []string    `json:"metrics_urls"`
	ScrapeErrors []string    `json:"scrape_errors,omitempty"`
}

type signalsView struct {
	QueueDepth   any `json:"logic_queue_depth"` // null when unknown
	BattleP99Ms  any `json:"battle_p99_ms"`
	Backpressure any `json:"backpressure"`
}

// view builds the line's state.
func (s *Server) view(now time.Time) lineView {
	l := s.line
	st := l.q.Stats(now)
	l.ctl.Lock()
	auto, pace, sig := l.auto, l.pace, l.signals
	l.ctl.Unlock()
	v := lineView{
		Mode:          st.Mode.String(),
		Rate:          rateView{N: st.Rate.N, Interval: st.Rate.Interval.String(), PerSecond: st.ConfiguredPerSecond},
		Length:        st.Length,
		Waiting:       st.Length - st.Away,
		Away:          st.Away,
		Held:          st.Held,
		Priority:      st.Priority,
		MaxLength:     st.MaxLength,
		RetryAfter:    st.RetryAfter.String(),
		Grace:         l.grace.String(),
		AdmittedTotal: st.Admitted,
		DroppedTotal:  st.Dropped,
		RefusedFull:   st.RefusedFull,
		RefusedClosed: st.RefusedClosed,
		MeasuredRate:  st.MeasuredPerSecond,
		Measured:      st.Measured,
		OldestWaitMs:  st.OldestWait.Milliseconds(),
		Auto: autoView{
			Enabled: auto, MinRate: pace.min, MaxRate: pace.max, Rate: pace.rate, Up: pace.up, Down: pace.down,
			Interval: pace.interval.String(),
			Signals: signalsView{
				QueueDepth:   signalValue(sig.QueueKnown, sig.QueueDepth),
				BattleP99Ms:  signalValue(sig.P99Known, float64(sig.BattleP99.Milliseconds())),
				Backpressure: signalValue(sig.BPKnown, sig.Backpressure),
			},
			MaxDepth: pace.th.maxQueueDepth, MaxP99Ms: pace.th.maxP99.Milliseconds(), MaxPressure: pace.th.maxBackpressure,
			MetricsURLs:  append([]string{}, s.cfg.AutoMetricsURLs...),
			ScrapeErrors: sig.Errors,
		},
	}
	if auto {
		v.Mode = modeAuto
	}
	if d := pace.lastDecision; !d.At.IsZero() {
		v.Auto.LastVerdict, v.Auto.LastReason, v.Auto.LastStepAt = d.Verdict, d.Reason, &d.At
	}
	if room := s.room(); room != math.MaxInt {
		v.Room = &room
	}
	return v
}

func (s *Server) writeLine(w http.ResponseWriter, code int) {
	b, err := json.MarshalIndent(s.view(s.clock.Now()), "", "  ")
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// lineChange is a validated POST: nil fields stay as they are.
type lineChange struct {
	mode       *string // an operator's mode name, auto included
	n          *int
	interval   *time.Duration
	maxLength  *int
	retryAfter *time.Duration
	autoMin    *float64
	autoMax    *float64
}

// errAdmin wraps every 400 of the admin API.
var errAdmin = errors.New("invalid admin request")

// adminFields are the fields a POST may set.
var adminFields = []string{"mode", "rate", "interval", "max_length", "retry_after", "auto_min_rate", "auto_max_rate"}

func (s *Server) postLine(w http.ResponseWriter, r *http.Request) {
	fields, err := readAdminFields(w, r)
	if err == nil {
		var ch lineChange
		if ch, err = parseLineChange(fields); err == nil {
			err = s.applyLineChange(ch, r.RemoteAddr)
		}
	}
	if err != nil {
		s.log.Info("admin API: change refused", "remote", r.RemoteAddr, "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.writeLine(w, http.StatusOK)
}

// readAdminFields reads a POST's fields from a JSON object (Content-Type
// application/json) or a form, each field once.
func readAdminFields(w http.ResponseWriter, r *http.Request) (map[string]string, error) {
	r.Body = http.MaxBytesReader(w, r.Body, maxAdminBody)
	out := map[string]string{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		var raw map[string]json.RawMessage
		dec := json.NewDecoder(r.Body)
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: the body is not a JSON object: %v", errAdmin, err)
		}
		for k, v := range raw {
			v = bytes.TrimSpace(v)
			var str string
			switch {
			case len(v) > 0 && v[0] == '"':
				if err := json.Unmarshal(v, &str); err != nil {
					return nil, fmt.Errorf("%w: %q: %v", errAdmin, k, err)
				}
			case len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9'):
				str = string(v)
			default:
				return nil, fmt.Errorf("%w: %q: want a string or a number, got %s", errAdmin, k, v)
			}
			out[k] = str
		}
	} else {
		if err := r.ParseForm(); err != nil {
			return nil, fmt.Errorf("%w: %v", errAdmin, err)
		}
		for k, vs := range r.Form {
			if len(vs) != 1 {
				return nil, fmt.Errorf("%w: %q given %d times", errAdmin, k, len(vs))
			}
			out[k] = vs[0]
		}
	}
	var unknown []string
	for k := range out {
		if !isAdminField(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%w: unknown field(s) %s; the fields are %s", errAdmin, strings.Join(unknown, ", "), strings.Join(adminFields, ", "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: nothing to change; the fields are %s", errAdmin, strings.Join(adminFields, ", "))
	}
	return out, nil
}

func isAdminField(k string) bool {
	for _, f := range adminFields {
		if k == f {
			return true
		}
	}
	return false
}

// parseLineChange checks each field on its own; applyLineChange checks
// them together with the current settings.
func parseLineChange(f map[string]string) (lineChange, error) {
	var ch lineChange
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", errAdmin, field, fmt.Sprintf(format, args...))
	}
	if v, ok := f["mode"]; ok {
		m, auto, err := parseLineMode(strings.TrimSpace(v))
		if err != nil {
			return ch, bad("mode", "%v", err)
		}
		name := m.String()
		if auto {
			name = modeAuto
		}
		ch.mode = &name
	}
	if v, ok := f["rate"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return ch, bad("rate", "want a whole number of players per interval, at least 1, got %q", v)
		}
		ch.n = &n
	}
	if v, ok := f["interval"]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < queue.MinInterval || d > queue.MaxInterval {
			return ch, bad("interval", "want a duration from %s to %s such as 10s, got %q", queue.MinInterval, queue.MaxInterval, v)
		}
		ch.interval = &d
	}
	if v, ok := f["max_length"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > queue.MaxMaxLength {
			return ch, bad("max_length", "want a whole number from 1 to %d, got %q", queue.MaxMaxLength, v)
		}
		ch.maxLength = &n
	}
	if v, ok := f["retry_after"]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 || d > queue.MaxRetryAfter {
			return ch, bad("retry_after", "want a duration above 0 and at most %s such as 10m, got %q", queue.MaxRetryAfter, v)
		}
		ch.retryAfter = &d
	}
	for _, x := range []struct {
		field string
		dst   **float64
	}{{"auto_min_rate", &ch.autoMin}, {"auto_max_rate", &ch.autoMax}} {
		if v, ok := f[x.field]; ok {
			r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(r > 0) || r > queue.MaxPerSecond {
				return ch, bad(x.field, "want players per second above 0 and at most %d, got %q", queue.MaxPerSecond, v)
			}
			*x.dst = &r
		}
	}
	return ch, nil
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
	ls := lineSettings{mode: st.Mode.String(), rate: st.Rate, maxLength: st.MaxLength, retryAfter: st.RetryAfter, autoMin: l.pace.min, autoMax: l.pace.max}
	if l.auto {
		ls.mode = modeAuto
	}
	return ls
}

// applyLineChange validates ch against the current settings and, if all
// is well, applies all of it; otherwise it changes nothing.
func (s *Server) applyLineChange(ch lineChange, remote string) error {
	l := s.line
	l.ctl.Lock()
	defer l.ctl.Unlock()
	now := s.clock.Now()
	old := l.settings(now)
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
		return fmt.Errorf("%w: rate and interval: %v", errAdmin, err)
	}
	if want.autoMin > want.autoMax {
		return fmt.Errorf("%w: auto_min_rate (%g) is above auto_max_rate (%g)", errAdmin, want.autoMin, want.autoMax)
	}
	rateGiven := ch.n != nil || ch.interval != nil
	toAuto := want.mode == modeAuto
	if toAuto && rateGiven {
		if ps := want.rate.PerSecond(); ps < want.autoMin || ps > want.autoMax {
			return fmt.Errorf("%w: rate %v (%.3g per second) is outside the auto bounds [%g, %g] per second", errAdmin, want.rate, ps, want.autoMin, want.autoMax)
		}
	}
	qmode, _, err := parseLineMode(want.mode)
	if err != nil {
		return fmt.Errorf("%w: mode: %v", errAdmin, err)
	}

	// Apply. The values are valid, so the setters cannot refuse them.
	l.pace.setBounds(want.autoMin, want.autoMax)
	if toAuto {
		if !l.auto {
			l.pace.last, l.pace.coolDown = time.Time{}, false
		}
		if rateGiven {
			l.pace.rate = want.rate.PerSecond()
		} else {
			l.pace.rate = l.pace.clamp(want.rate.PerSecond())
			want.rate = rateFor(l.pace.rate, want.rate.Interval)
			if want.rate.PerSecond() == old.rate.PerSecond() {
				want.rate = old.rate // no change worth a restart of the pace
			}
		}
	}
	var errs []error
	if want.rate != old.rate {
		errs = append(errs, l.q.SetRate(want.rate.N, want.rate.Interval, now))
		s.m.line.releaseRate.Set(want.rate.PerSecond())
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
		s.log.Error("admin API: applying a validated change", "err", err)
	}
	s.logLineChange(old, l.settings(now), remote)
	l.poke()
	return nil
}

// logLineChange logs what changed, old and new.
func (s *Server) logLineChange(old, now lineSettings, remote string) {
	attrs := []any{"remote", remote}
	add := func(field string, o, n any) {
		if o != n {
			attrs = append(attrs, slog.Group(field, "old", o, "new", n))
		}
	}
	add("mode", old.mode, now.mode)
	add("rate", old.rate.String(), now.rate.String())
	add("max_length", old.maxLength, now.maxLength)
	add("retry_after", old.retryAfter.String(), now.retryAfter.String())
	add("auto_min_rate", old.autoMin, now.autoMin)
	add("auto_max_rate", old.autoMax, now.autoMax)
	if len(attrs) == 2 {
		s.log.Info("admin API: admission line unchanged (same values)", attrs...)
		return
	}
	s.log.Info("admin API: admission line changed", attrs...)
}
