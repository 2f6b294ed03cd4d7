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

	"github.com/leveehq/levee/internal/lineapi"
	"github.com/leveehq/levee/queue"
)

// The admin API lives on the ops listener, behind a bearer token:
//
//	GET  /admin/line   the line's state, as JSON (lineapi.View)
//	POST /admin/line   change any of mode, rate, interval, max_length,
//	                   retry_after, auto_min_rate, auto_max_rate (a form or
//	                   a JSON object), effective at once
//
// With no -admin-token the API is off and answers 404. A missing or wrong
// token is 401 and changes nothing. A POST is validated whole before
// anything is applied: one bad value is a 400 naming it, and nothing
// changes. Every change is logged with the old and new values and the
// caller's address. The wire format (the answer, a POST's fields) is
// levee/internal/lineapi's, shared with the tools that call the API.
//
// A POST goes through three steps: readAdminFields reads the body (HTTP),
// parseLineChange turns the fields into a lineChange (pure: each field on
// its own), and the line applies it (line.apply, in linechange.go: the
// fields together with the current settings, all or nothing).

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
			s.writeLine(w)
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

// view is the line's state at now.
func (l *line) view(now time.Time) lineapi.View {
	st := l.q.Stats(now)
	l.ctl.Lock()
	auto, pace, sig := l.auto, l.pace, l.signals
	l.ctl.Unlock()
	pc := pace.Config()
	v := lineapi.View{
		Mode:          st.Mode.String(),
		Rate:          lineapi.RateView{N: st.Rate.N, Interval: st.Rate.Interval.String(), PerSecond: st.ConfiguredPerSecond},
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
		Auto: lineapi.AutoView{
			Enabled: auto, MinRate: pc.MinRate, MaxRate: pc.MaxRate, Rate: pace.Rate(), Up: pc.Up, Down: pc.Down,
			Interval: pc.Interval.String(),
			Signals: lineapi.SignalsView{
				QueueDepth:   signalValue(sig.QueueKnown, sig.QueueDepth),
				BattleP99Ms:  signalValue(sig.P99Known, float64(sig.BattleP99.Milliseconds())),
				Backpressure: signalValue(sig.BPKnown, sig.Backpressure),
			},
			MaxDepth: pc.MaxQueueDepth, MaxP99Ms: pc.MaxBattleP99.Milliseconds(), MaxPressure: pc.MaxBackpressure,
			MetricsURLs:  append([]string{}, l.s.cfg.AutoMetricsURLs...),
			ScrapeErrors: sig.Errors,
		},
	}
	if auto {
		v.Mode = modeAuto
	}
	if d := pace.Last(); !d.At.IsZero() {
		v.Auto.LastVerdict, v.Auto.LastReason, v.Auto.LastStepAt = d.Verdict, d.Reason, &d.At
	}
	if room := l.s.room(); room != math.MaxInt {
		v.Room = &room
	}
	return v
}

// writeLine answers with the line's state.
func (s *Server) writeLine(w http.ResponseWriter) {
	b, err := json.MarshalIndent(s.line.view(s.clock.Now()), "", "  ")
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// errAdmin wraps every 400 of the admin API.
var errAdmin = errors.New("invalid admin request")

// adminFields are the fields a POST may set.
var adminFields = lineapi.Fields

// postLine parses the request into a change, has the line apply it, logs
// it and answers with the line's new state; a bad request is a 400 that
// names the field, and changes nothing.
func (s *Server) postLine(w http.ResponseWriter, r *http.Request) {
	fields, err := readAdminFields(w, r)
	if err == nil {
		var ch lineChange
		if ch, err = parseLineChange(fields); err == nil {
			var old, now lineSettings
			if old, now, err = s.line.apply(ch, s.clock.Now()); err == nil {
				s.logLineChange(old, now, r.RemoteAddr)
			}
		}
	}
	if err != nil {
		s.log.Info("admin API: change refused", "remote", r.RemoteAddr, "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.writeLine(w)
}

// readAdminFields reads a POST's fields from a JSON object (Content-Type
// application/json) or a form, each field once, as strings.
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

// parseLineChange turns a POST's fields into a change, checking each field
// on its own: the field names (at least one, none unknown) and each value.
// It is pure; an error (wrapping errAdmin) names the field. The line
// checks the fields together with its current settings (line.apply).
func parseLineChange(f map[string]string) (lineChange, error) {
	var ch lineChange
	var unknown []string
	for k := range f {
		if !isAdminField(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return ch, fmt.Errorf("%w: unknown field(s) %s; the fields are %s", errAdmin, strings.Join(unknown, ", "), strings.Join(adminFields, ", "))
	}
	if len(f) == 0 {
		return ch, fmt.Errorf("%w: nothing to change; the fields are %s", errAdmin, strings.Join(adminFields, ", "))
	}
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
