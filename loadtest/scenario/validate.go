package scenario

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/leveehq/levee/loadtest/arrival"
	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/reqtmpl"
	"github.com/leveehq/levee/loadtest/threshold"
)

// Defaults applied by Parse.
const (
	DefaultRequestTimeout = 5 * time.Second
	// DefaultRunTail is added to the later of the curve's end and the
	// last action for the default run.duration.
	DefaultRunTail = time.Minute
	// DefaultDrainExtra is added to request_timeout for the default
	// run.drain.
	DefaultDrainExtra = 2 * time.Second
)

// The gate's bounds on a line change's interval (queue.MinInterval,
// queue.MaxInterval).
const (
	minLineInterval = time.Millisecond
	maxLineInterval = time.Hour
)

// retiredEngines are the engines cmd/loadtest had before the players
// engine learnt what they did (issue 20): named in a file, they get an
// error saying which preset replaces them.
var retiredEngines = []string{"smoke", "overload", "line", "hold"}

// validate applies the defaults, checks every bound and fills the derived
// fields.
func (d *decoder) validate(s *Scenario, readFile func(string) ([]byte, error)) error {
	switch s.Version {
	case 0:
		s.Version = 1
	case 1:
	default:
		return d.fail("version", "must be 1, got %d", s.Version)
	}
	if s.Name == "" {
		base := s.File[strings.LastIndexAny(s.File, `/\`)+1:]
		s.Name = strings.TrimSuffix(base, ".yaml")
	}
	if s.Engine == "" {
		s.Engine = EnginePlayers
	}
	if s.Engine != EnginePlayers {
		if slices.Contains(retiredEngines, s.Engine) {
			return d.fail("engine", "engine %s is gone: the %s preset runs on the players engine (loadtest run %s); leave engine out", s.Engine, s.Engine, s.Engine)
		}
		return d.fail("engine", "unknown engine %q; the one engine is %s (leave it out)", s.Engine, EnginePlayers)
	}
	if err := d.defaultFloat(&s.Scale, "scale", 1, MaxScale); err != nil {
		return err
	}
	if err := d.defaultFloat(&s.Speed, "speed", 1, MaxSpeed); err != nil {
		return err
	}
	if s.Capacity < 0 {
		return d.fail("capacity", "must be >= 0, got %v", s.Capacity)
	}
	if s.ReplayCheck < 0 || s.ReplayCheck > MaxReplayCheck {
		return d.fail("replay_check", "must be in 0..%d (acknowledged mutations resent after the run), got %d", MaxReplayCheck, s.ReplayCheck)
	}
	if d.has("offered") && !(s.Offered > 0 && s.Offered <= MaxOffered) {
		return d.fail("offered", "must be in (0, %d], got %v", MaxOffered, s.Offered)
	}
	if d.has("offered") && d.has("scale") {
		return d.fail("offered", "sets scale from capacity: give scale or offered, not both")
	}
	if s.Pool != nil {
		if err := d.validatePool(s); err != nil {
			return err
		}
	} else if err := d.validateArrivals(s, readFile); err != nil {
		return err
	}
	if s.Client.Policy == "bare" {
		if err := d.validateBare(s); err != nil {
			return err
		}
	} else if err := d.validatePlayers(&s.Players); err != nil {
		return err
	}
	if err := d.validateClient(&s.Client); err != nil {
		return err
	}
	if err := d.validateOffered(s); err != nil {
		return err
	}
	if err := d.validateTimeline(s); err != nil {
		return err
	}
	for i, th := range s.Thresholds {
		c, err := threshold.Parse(th)
		if err != nil {
			return d.fail(fmt.Sprintf("thresholds[%d]", i), "%v", err)
		}
		s.Checks = append(s.Checks, c)
	}
	return d.validateRun(s)
}

// validateOffered checks offered against the curve and the think time
// and, with a capacity, sets Scale from it.
func (d *decoder) validateOffered(s *Scenario) error {
	if !d.has("offered") {
		return nil
	}
	switch {
	case s.Curve.Kind() == arrival.Rate:
		return d.fail("offered", "needs a players curve (phases with players, csv or prometheus): a rate curve's peak is not known")
	case s.Players.Think <= 0:
		return d.fail("offered", "needs players.think > 0: each player offers one request per think time")
	case s.Capacity == 0:
		return nil // ErrOfferedNoCapacity at run time
	}
	sc := s.OfferedScale()
	if !(sc > 0) || sc > MaxScale {
		return d.fail("offered", "%v x capacity %v needs scale %.3g, want (0, %d]: raise or lower the curve's players", s.Offered, s.Capacity, sc, MaxScale)
	}
	s.Scale = sc
	return nil
}

// defaultFloat gives *v its default def when absent; when given it must
// be in (0, hi].
func (d *decoder) defaultFloat(v *float64, path string, def, hi float64) error {
	if !d.has(path) {
		*v = def
		return nil
	}
	if !(*v > 0 && *v <= hi) {
		return d.fail(path, "must be in (0, %v], got %v", hi, *v)
	}
	return nil
}

// share checks a value in [0, 1].
func (d *decoder) share(v float64, path string) error {
	if v < 0 || v > 1 {
		return d.fail(path, "must be a share in [0, 1], got %v", v)
	}
	return nil
}

// or lists choices: "a, b or c".
func or(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

func (d *decoder) validateArrivals(s *Scenario, readFile func(string) ([]byte, error)) error {
	a := &s.Arrivals
	var sources []string
	for _, x := range []struct {
		name string
		set  bool
	}{{"phases", len(a.Phases) > 0}, {"csv", a.CSV != ""}, {"prometheus", a.Prometheus != ""}} {
		if x.set {
			sources = append(sources, x.name)
		}
	}
	switch {
	case len(sources) == 0:
		return d.fail("arrivals", "required: give one of phases, csv or prometheus")
	case len(sources) > 1:
		return d.fail("arrivals."+sources[1], "two arrival sources (%s); give one", strings.Join(sources, " and "))
	}
	if a.Start < 0 {
		return d.fail("arrivals.start", "must be >= 0, got %v", a.Start)
	}
	if d.has("arrivals.start") && len(a.Phases) == 0 {
		return d.fail("arrivals.start", "only with phases (a file's curve starts at its first row)")
	}
	var (
		c   arrival.Curve
		err error
	)
	switch {
	case len(a.Phases) > 0:
		c, err = d.phases(a)
		if err != nil {
			return err
		}
	case a.CSV != "":
		c, err = d.curveFile(s.File, "arrivals.csv", a.CSV, readFile, arrival.ReadCSV)
	default:
		c, err = d.curveFile(s.File, "arrivals.prometheus", a.Prometheus, readFile, arrival.ReadPrometheus)
	}
	if err != nil {
		return err
	}
	s.Curve = c
	return nil
}

func (d *decoder) phases(a *Arrivals) (arrival.Curve, error) {
	if len(a.Phases) >= arrival.MaxPoints {
		return arrival.Curve{}, d.fail("arrivals.phases", "%d phases, at most %d", len(a.Phases), arrival.MaxPoints-1)
	}
	var kind arrival.Kind
	steps := make([]arrival.Step, len(a.Phases))
	for i, p := range a.Phases {
		path := fmt.Sprintf("arrivals.phases[%d]", i)
		if p.Duration <= 0 {
			if !d.has(path + ".duration") {
				return arrival.Curve{}, d.fail(path+".duration", "required (how long the ramp to the target takes, e.g. 2m)")
			}
			return arrival.Curve{}, d.fail(path+".duration", "must be > 0, got %v", p.Duration)
		}
		var k arrival.Kind
		var v *float64
		switch {
		case p.Players != nil && p.Rate != nil:
			return arrival.Curve{}, d.fail(path+".rate", "players and rate both given; a phase has one target")
		case p.Players != nil:
			k, v = arrival.Players, p.Players
		case p.Rate != nil:
			k, v = arrival.Rate, p.Rate
		default:
			return arrival.Curve{}, d.fail(path, "required: players (present at the phase's end) or rate (arrivals/s at its end)")
		}
		if kind == 0 {
			kind = k
		} else if k != kind {
			return arrival.Curve{}, d.fail(path+"."+k.String(), "phases mix players and rate (phases[0] has %s); use one kind", kind)
		}
		if *v < 0 {
			return arrival.Curve{}, d.fail(path+"."+k.String(), "must be >= 0, got %v", *v)
		}
		steps[i] = arrival.Step{Duration: time.Duration(p.Duration), Value: *v}
	}
	c, err := arrival.Phases(kind, a.Start, steps)
	if err != nil {
		return arrival.Curve{}, d.fail("arrivals.phases", "%v", err)
	}
	return c, nil
}

func (d *decoder) curveFile(file, path, name string, readFile func(string) ([]byte, error),
	read func(r io.Reader) (arrival.Curve, error)) (arrival.Curve, error) {
	data, err := readFile(relative(file, name))
	if err != nil {
		return arrival.Curve{}, d.fail(path, "%v", err)
	}
	c, err := read(bytes.NewReader(data))
	if err != nil {
		return arrival.Curve{}, d.fail(path, "%s: %s", name, strings.TrimPrefix(err.Error(), "arrival: "))
	}
	return c, nil
}

func (d *decoder) validatePlayers(p *Players) error {
	if len(p.Actions) == 0 {
		return d.fail("players.actions", "required: at least one action ({do: ACTION, weight: W, request: {...}})")
	}
	if p.Login != nil {
		if err := d.validateAct(p.Login, "players.login", false); err != nil {
			return err
		}
	}
	for i := range p.Actions {
		if err := d.validateAct(&p.Actions[i], fmt.Sprintf("players.actions[%d]", i), true); err != nil {
			return err
		}
	}
	for _, x := range []struct {
		path string
		v    float64
	}{{"players.think_jitter", p.ThinkJitter}, {"players.reconnect", p.Reconnect}, {"players.json", p.JSON}} {
		if err := d.share(x.v, x.path); err != nil {
			return err
		}
	}
	return nil
}

// validateAct checks what an action says without the game's declaration
// (Bind checks the rest).
func (d *decoder) validateAct(a *Act, path string, weighted bool) error {
	a.path = path
	if n := d.node(path + ".do"); n != nil {
		a.line = n.Line
	}
	switch {
	case a.Do == "":
		return d.fail(path+".do", "required: the game's action name")
	case weighted && !(a.Weight > 0):
		if !d.has(path + ".weight") {
			return d.fail(path+".weight", "required: a weight > 0 (the action's share of the mix)")
		}
		return d.fail(path+".weight", "must be > 0, got %v", a.Weight)
	case !weighted && d.has(path+".weight"):
		return d.fail(path+".weight", "not for the login (it is made once, first)")
	case a.Criticality != "" && !slices.Contains(Criticalities, a.Criticality):
		return d.fail(path+".criticality", "unknown criticality %q; want %s", a.Criticality, or(Criticalities))
	}
	if a.Request == nil {
		a.Request, _ = reqtmpl.Compile(nil, path+".request") // {}: cannot fail
	}
	return nil
}

// validateBare checks the players of client policy bare: plain WebSocket
// connections that make no request, so no action, think time, session or
// reconnect.
func (d *decoder) validateBare(s *Scenario) error {
	for _, f := range []string{"players.actions", "players.login", "players.think", "players.think_jitter", "players.session",
		"players.reconnect", "players.json"} {
		if d.has(f) {
			return d.fail(f, "not with client.policy bare (its connections make no request)")
		}
	}
	return nil
}

func (d *decoder) validateClient(c *Client) error {
	switch {
	case c.Policy == "":
		c.Policy = "sdk"
	case !slices.Contains(Policies, c.Policy):
		return d.fail("client.policy", "unknown policy %q; want %s", c.Policy, or(Policies))
	}
	if c.RequestTimeout == 0 {
		if d.has("client.request_timeout") {
			return d.fail("client.request_timeout", "must be > 0")
		}
		c.RequestTimeout = Duration(DefaultRequestTimeout)
	}
	if c.RequestTimeout > Duration(10*time.Minute) {
		return d.fail("client.request_timeout", "must be at most 10m, got %v", c.RequestTimeout)
	}
	if c.Policy != "sdk" {
		for _, f := range []string{"client.retry", "client.pace"} {
			if d.has(f) {
				return d.fail(f, "only with policy sdk (the naive and bare clients neither retry nor pace)")
			}
		}
	}
	switch r := c.Retry; {
	case r.Attempts < 0 || r.Attempts > 100:
		return d.fail("client.retry.attempts", "must be in 0..100, got %d", r.Attempts)
	case r.Base > 0 && r.Cap > 0 && r.Cap < r.Base:
		return d.fail("client.retry.cap", "must be >= base (%v), got %v", r.Base, r.Cap)
	}
	if c.Pace < 0 {
		return d.fail("client.pace", "must be >= 0, got %v", c.Pace)
	}
	return nil
}

var atPattern = regexp.MustCompile(`^T\s*(?:([+-])\s*(\S+))?$`)

func (d *decoder) validateTimeline(s *Scenario) error {
	var last time.Duration
	for i := range s.Timeline {
		a := &s.Timeline[i]
		path := fmt.Sprintf("timeline[%d]", i)
		at := strings.TrimSpace(a.At)
		if at == "" {
			return d.fail(path+".at", "required: T-5m, T+0, T+15m (from t0) or a duration from the start")
		}
		off, err := d.offset(at, s.T0)
		if err != nil {
			return d.fail(path+".at", "%v", err)
		}
		if off < last {
			return d.fail(path+".at", "%s is before timeline[%d]'s %s; keep the timeline in order", at, i-1, s.Timeline[i-1].At)
		}
		a.Offset, last = off, off
		switch {
		case a.Line != nil && a.Fault != nil:
			return d.fail(path+".fault", "a step is a line change or a fault, not both; make it two steps")
		case a.Fault != nil:
			if err := d.validateFault(s, a, path+".fault"); err != nil {
				return err
			}
		case a.Line == nil:
			return d.fail(path, "required: line (a line change: mode, rate, interval) or fault (%s)", or(fault.Kinds))
		default:
			if err := d.validateLine(s, a.Line, path+".line"); err != nil {
				return err
			}
		}
		for j, c := range a.If {
			th, err := threshold.Parse(c)
			if err != nil {
				return d.fail(fmt.Sprintf("%s.if[%d]", path, j), "%v", err)
			}
			a.Conds = append(a.Conds, th)
		}
	}
	return nil
}

// validateLine checks a line change at lp.
func (d *decoder) validateLine(s *Scenario, l *LineChange, lp string) error {
	switch {
	case l.Mode == "" && l.Rate == 0 && l.Interval == 0:
		return d.fail(lp, "changes nothing; give mode, rate or interval")
	case l.Mode != "" && !slices.Contains(LineModes, l.Mode):
		return d.fail(lp+".mode", "unknown line mode %q; want %s", l.Mode, or(LineModes))
	case l.Rate < 0 || (l.Rate == 0 && d.has(lp+".rate")):
		return d.fail(lp+".rate", "must be >= 1 (players per interval), got %d", l.Rate)
	case l.Interval == 0 && d.has(lp+".interval"):
		return d.fail(lp+".interval", "must be > 0")
	case l.Interval != 0 && (l.Interval < Duration(minLineInterval) || l.Interval > Duration(maxLineInterval)):
		return d.fail(lp+".interval", "must be in %v..%v, got %v", minLineInterval, maxLineInterval, l.Interval)
	case l.Interval != 0 && s.Wall(time.Duration(l.Interval)) < minLineInterval:
		return d.fail(lp+".interval", "%v at speed %v is below the gate's %v", l.Interval, s.Speed, minLineInterval)
	}
	return nil
}

// timedFaults are the fault kinds that last a given time (for).
var timedFaults = []string{fault.Pause, fault.CPU, fault.Cut, fault.Fill}

// validateFault checks a fault step at fp and fills its defaults.
func (d *decoder) validateFault(s *Scenario, a *Action, fp string) error {
	f := a.Fault
	switch {
	case f.Do == "":
		return d.fail(fp+".do", "required: %s", or(fault.Kinds))
	case !slices.Contains(fault.Kinds, f.Do):
		return d.fail(fp+".do", "unknown fault %q; want %s", f.Do, or(fault.Kinds))
	case strings.TrimSpace(f.Target) == "":
		return d.fail(fp+".target", "required: what to hurt (a compose service name: gate, logic, battle-1)")
	case strings.TrimSpace(f.Target) != f.Target:
		return d.fail(fp+".target", "bad target %q", f.Target)
	}
	if slices.Contains(timedFaults, f.Do) {
		if f.For <= 0 {
			if !d.has(fp + ".for") {
				return d.fail(fp+".for", "required for %s: how long (e.g. 20s)", f.Do)
			}
			return d.fail(fp+".for", "must be > 0")
		}
		if s.Wall(time.Duration(f.For)) < time.Millisecond {
			return d.fail(fp+".for", "%v at speed %v is under 1ms", f.For, s.Speed)
		}
	} else if d.has(fp + ".for") {
		return d.fail(fp+".for", "not for %s: it is over when the target is back", f.Do)
	}
	if f.Do == fault.CPU {
		if !(f.Factor > 0 && f.Factor < 1) {
			if !d.has(fp + ".factor") {
				return d.fail(fp+".factor", "required for cpu: the share of the CPU limit left, in (0, 1) (0.2 takes 80 %% away)")
			}
			return d.fail(fp+".factor", "must be in (0, 1), got %v", f.Factor)
		}
	} else if d.has(fp + ".factor") {
		return d.fail(fp+".factor", "only for cpu")
	}
	if f.Do == fault.Fill {
		if f.Path == "" {
			return d.fail(fp+".path", "required for fill: the absolute path inside the target whose filesystem fills (e.g. /data)")
		}
		if !strings.HasPrefix(f.Path, "/") {
			return d.fail(fp+".path", "must be absolute, got %q", f.Path)
		}
	} else if d.has(fp + ".path") {
		return d.fail(fp+".path", "only for fill")
	}
	if f.Do == fault.Restart {
		if f.Grace == 0 {
			if d.has(fp + ".grace") {
				return d.fail(fp+".grace", "must be > 0")
			}
			f.Grace = Duration(fault.DefaultGrace)
		}
		if f.Grace > Duration(10*time.Minute) {
			return d.fail(fp+".grace", "must be at most 10m, got %v", f.Grace)
		}
	} else if d.has(fp + ".grace") {
		return d.fail(fp+".grace", "only for restart")
	}
	if err := s.WallFault(*f).Check(); err != nil { // the same rules; a difference is a bug here
		return d.fail(fp, "%v", err)
	}
	return nil
}

// offset resolves an action's at: "T", "T+5m", "T-5m" from t0, or a plain
// duration from the start.
func (d *decoder) offset(at string, t0 Duration) (time.Duration, error) {
	m := atPattern.FindStringSubmatch(at)
	if m == nil {
		v, err := parseDuration(at)
		if err != nil {
			return 0, fmt.Errorf("%q is not T±DURATION (T-5m, T+0, T+15m) or a duration from the start", at)
		}
		return v, nil
	}
	if m[1] == "" {
		return time.Duration(t0), nil
	}
	v, err := parseDuration(m[2])
	if err != nil {
		return 0, fmt.Errorf("%q is not T±DURATION (T-5m, T+0, T+15m): %v", at, err)
	}
	if m[1] == "+" {
		return time.Duration(t0) + v, nil
	}
	if v > time.Duration(t0) {
		return 0, fmt.Errorf("%s is before the start (t0 is %v)", at, t0)
	}
	return time.Duration(t0) - v, nil
}

func (d *decoder) validateRun(s *Scenario) error {
	r := &s.Run
	if s.Pool != nil {
		if d.has("run.duration") {
			return d.fail("run.duration", "not with pool: the run lasts its phases")
		}
		if r.Workers > 1 {
			return d.fail("run.workers", "a pool runs in one load process, got %d", r.Workers)
		}
		s.SetPool(*s.Pool)
	}
	if r.Duration == 0 {
		if d.has("run.duration") {
			return d.fail("run.duration", "must be > 0")
		}
		end := s.Curve.End()
		for i := range s.Timeline {
			end = max(end, s.Timeline[i].End())
		}
		r.Duration = Duration(end + DefaultRunTail)
	}
	if n := len(s.Timeline); n > 0 && s.Timeline[n-1].Offset >= time.Duration(r.Duration) {
		return d.fail(fmt.Sprintf("timeline[%d].at", n-1), "%s is at or after the end of the run (run.duration %v)", s.Timeline[n-1].At, r.Duration)
	}
	for i := range s.Timeline {
		if a := &s.Timeline[i]; a.End() > time.Duration(r.Duration) {
			return d.fail(fmt.Sprintf("timeline[%d].fault.for", i), "the fault lasts until %v, after the end of the run (run.duration %v)", a.End(), r.Duration)
		}
	}
	if !d.has("run.drain") {
		r.Drain = s.Client.RequestTimeout + Duration(DefaultDrainExtra)
	}
	if r.Workers < 0 || r.Workers > MaxWorkers {
		return d.fail("run.workers", "must be in 0..%d, got %d", MaxWorkers, r.Workers)
	}
	if r.MaxRequests == 0 && !d.has("run.max_requests") {
		r.MaxRequests = MaxRequests
	}
	if r.MaxRequests < 1 || r.MaxRequests > MaxRequests {
		return d.fail("run.max_requests", "must be in 1..%d, got %d", MaxRequests, r.MaxRequests)
	}
	if p := s.PeakPlayers(); p > MaxPeakPlayers || math.IsNaN(p) {
		what := "peak players"
		if s.Curve.Kind() == arrival.Rate {
			what = "arrivals by the end of the run"
		}
		return d.fail("arrivals", "%s %.0f x scale %v = %.0f, at most %d", what, p/s.Scale, s.Scale, p, MaxPeakPlayers)
	}
	return nil
}

// poolName is a pool phase's name: a threshold window ([baseline]).
var poolName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// poolOnlyWithArrivals are the fields a pool does not use: its connections
// neither think nor leave, and never retry nor pace.
var poolOnlyWithArrivals = []string{"arrivals", "players.think", "players.think_jitter", "players.session",
	"players.reconnect", "players.login", "client.policy", "client.retry", "client.pace", "ledger", "replay_check", "scale", "speed", "offered"}

// validatePool checks the pool (instead of arrivals) and fills its defaults.
func (d *decoder) validatePool(s *Scenario) error {
	for _, f := range poolOnlyWithArrivals {
		if d.has(f) {
			return d.fail(f, "not with pool (a fixed pool of connections that send the mix open loop, never retrying nor pacing)")
		}
	}
	p := s.Pool
	switch {
	case p.Conns == 0 && !d.has("pool.conns"):
		p.Conns = DefaultPoolConns
	case p.Conns < 1 || p.Conns > MaxPoolConns:
		return d.fail("pool.conns", "must be in 1..%d, got %d", MaxPoolConns, p.Conns)
	}
	if !d.has("pool.reply_grace") {
		p.ReplyGrace = Duration(DefaultReplyGrace)
	} else if p.ReplyGrace > Duration(time.Minute) {
		return d.fail("pool.reply_grace", "must be at most 1m, got %v", p.ReplyGrace)
	}
	if p.MaxOutstanding < 0 || p.MaxOutstanding > 1_000_000 {
		return d.fail("pool.max_outstanding", "must be in 0..1000000, got %d", p.MaxOutstanding)
	}
	if err := d.defaultFloat(&p.MaxRate, "pool.max_rate", MaxPoolRate, MaxPoolRate); err != nil {
		return err
	}
	if len(p.Phases) == 0 {
		return d.fail("pool.phases", "required: at least one phase (name, duration and rate, offered or concurrency)")
	}
	seen := map[string]bool{}
	for i, ph := range p.Phases {
		path := fmt.Sprintf("pool.phases[%d]", i)
		switch {
		case ph.Name == "":
			return d.fail(path+".name", "required: the phase's name (a threshold window: p(99)[NAME])")
		case !poolName.MatchString(ph.Name):
			return d.fail(path+".name", "%q: want a letter, then letters, digits, _ or -", ph.Name)
		case ph.Name == "run" || ph.Name == "drain":
			return d.fail(path+".name", "%q is the engine's own phase name", ph.Name)
		case seen[ph.Name]:
			return d.fail(path+".name", "%q names two phases", ph.Name)
		case ph.Duration <= 0:
			if !d.has(path + ".duration") {
				return d.fail(path+".duration", "required (how long the phase offers its load, e.g. 10s)")
			}
			return d.fail(path+".duration", "must be > 0")
		case ph.Duration > Duration(10*time.Minute):
			return d.fail(path+".duration", "must be at most 10m, got %v", ph.Duration)
		}
		seen[ph.Name] = true
		var given []string
		for _, f := range []string{"rate", "offered", "concurrency"} {
			if d.has(path + "." + f) {
				given = append(given, f)
			}
		}
		switch {
		case len(given) == 0:
			return d.fail(path, "required: rate (requests/s), offered (x capacity) or concurrency (a closed loop)")
		case len(given) > 1:
			return d.fail(path+"."+given[1], "%s both given; a phase has one load", strings.Join(given, " and "))
		case given[0] == "rate" && !(ph.Rate > 0 && ph.Rate <= p.MaxRate):
			return d.fail(path+".rate", "must be in (0, %v] (pool.max_rate), got %v", p.MaxRate, ph.Rate)
		case given[0] == "offered" && !(ph.Offered > 0 && ph.Offered <= 1000):
			return d.fail(path+".offered", "must be in (0, 1000], got %v", ph.Offered)
		case given[0] == "concurrency" && (ph.Concurrency < 1 || ph.Concurrency > MaxPoolConcurrency):
			return d.fail(path+".concurrency", "must be in 1..%d, got %d", MaxPoolConcurrency, ph.Concurrency)
		}
	}
	return nil
}
