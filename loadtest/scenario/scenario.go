// Package scenario reads load-test scenarios: strict YAML files (or the
// embedded presets of loadtest/scenarios) that say who arrives when
// (package arrival), what the players do, what the operator does to the
// gates' admission line and when, and what a passing run is (package
// threshold). The language is documented in loadtest/scenarios/README.md.
//
// Parse rejects a bad file before anything is sent, with an *Error naming
// the file, the line and the field ("launch.yaml:12:
// arrivals.phases[2].duration: "ten" is not a duration"); unknown fields
// are errors. Overrides ("--set players.think=2s") are applied to the YAML
// tree before it is decoded, so their errors name them too.
//
// Times: scenario time is what the file says; a run at Speed s happens in
// wall time = scenario time / s (Wall). Scale multiplies players, release
// rates and capacity.
package scenario

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/loadtest/arrival"
	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/reqtmpl"
	"github.com/leveehq/levee/loadtest/threshold"
)

// Duration is a time.Duration written in YAML as a Go duration ("10s",
// "5m", "1m30s"; "0" too).
type Duration time.Duration

// String is the Go duration form.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the Go duration form.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads the Go duration form (for decoding with yaml.v3
// elsewhere; Parse does its own stricter decoding).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// parseDuration reads a Go duration >= 0.
func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 500ms, 10s, 5m, 1m30s)", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("must be >= 0, got %s", s)
	}
	return v, nil
}

// EnginePlayers is the one value of engine (optional): the players
// engine, loadtest/engine. The older engines (smoke, overload, line, hold)
// are gone; their presets are players-engine files.
const EnginePlayers = "players"

// DefaultPreset is the preset run when none is named.
const DefaultPreset = "launch"

// Bounds checked by Parse.
const (
	MaxScale       = 10
	MaxSpeed       = 100
	MaxWorkers     = 64
	MaxRequests    = 10_000_000
	MaxPeakPlayers = 1_000_000
	MaxOffered     = 1000
	MaxReplayCheck = 100_000
	// Pool bounds.
	MaxPoolConns       = 10_000
	MaxPoolRate        = 20_000
	MaxPoolConcurrency = 10_000
	DefaultPoolConns   = 200
	DefaultReplyGrace  = time.Second
	// PlayersPerWorker sizes Run.Workers 0: one load process per this many
	// players (scaled peak).
	PlayersPerWorker = 15_000
)

// Scenario is one load test. Parse fills the defaults (see the fields)
// and the derived fields (File, Curve, Checks, Action.Offset and Conds).
type Scenario struct {
	Version     int      `yaml:"version"`     // 1 (0 means 1; anything else: error)
	Name        string   `yaml:"name"`        // default: the file's base name without .yaml
	Description string   `yaml:"description"` //
	Engine      string   `yaml:"engine"`      // optional; only players (EnginePlayers)
	Scale       float64  `yaml:"scale"`       // (0, 10], default 1; players and release rates x scale (capacity is not scaled)
	Speed       float64  `yaml:"speed"`       // (0, 100], default 1; scenario time runs Speed x faster than wall time
	Seed        uint64   `yaml:"seed"`        // random seed of the players' choices; 0: the engine picks one
	T0          Duration `yaml:"t0"`          // where "T+0" is in scenario time (launch: 5m)
	Capacity    float64  `yaml:"capacity"`    // requests/s the cluster is known to serve (for thresholds); 0 unknown
	// Offered sizes the run from Capacity: the peak offered requests per
	// wall second as a multiple of it. With Capacity > 0 Parse sets Scale
	// to OfferedScale; 0: not used (Scale is the file's).
	Offered  float64  `yaml:"offered"`
	Arrivals Arrivals `yaml:"arrivals"`
	// Pool, instead of Arrivals, offers the players' action mix open loop
	// over a fixed pool of connections, in named phases (see Pool).
	Pool       *Pool    `yaml:"pool"`
	Players    Players  `yaml:"players"`
	Client     Client   `yaml:"client"`
	Timeline   []Action `yaml:"timeline"`
	Thresholds []string `yaml:"thresholds"`
	Run        Run      `yaml:"run"`
	// Ledger keeps the load tool's own record of every mutation and
	// checks the players' state against it after the run: the game's
	// auditor (loadtest/audit; arena's is examples/arena/arenaledger).
	Ledger bool `yaml:"ledger"`
	// ReplayCheck, a check that needs no game knowledge: after the run
	// (and the ledger's check) each load process resends up to this many
	// of its acknowledged mutations with their own request ids; each must
	// be answered with its stored first outcome, marked replayed. 0: none;
	// at most MaxReplayCheck.
	ReplayCheck int `yaml:"replay_check"`

	File   string                `yaml:"-"` // where it came from ("preset:launch" for presets)
	Curve  arrival.Curve         `yaml:"-"` // the arrivals in scenario time, unscaled
	Checks []threshold.Threshold `yaml:"-"` // Thresholds parsed

	bound *gamedef.Def // the declaration Bind checked the actions against
}

// Arrivals says who arrives when: exactly one of Phases, CSV and
// Prometheus (players engine).
type Arrivals struct {
	Start      float64 `yaml:"start"`      // value at t=0 of a phases curve
	Phases     []Phase `yaml:"phases"`     // linear ramps from one target to the next
	CSV        string  `yaml:"csv"`        // "time,players" file, path relative to the scenario file
	Prometheus string  `yaml:"prometheus"` // query_range JSON file, path relative to the scenario file
}

// Phase is one linear ramp of the arrivals curve.
type Phase struct {
	Duration Duration `yaml:"duration"` // > 0
	Players  *float64 `yaml:"players"`  // target players present at the phase's end, or
	Rate     *float64 `yaml:"rate"`     // target arrivals/s at its end (one of the two; all phases the same kind)
}

// Pool is the open-loop source over a fixed pool of connections: Conns
// connections are dialled first (the SDK's retries and pacing off, so that
// every request is sent once, when the schedule says), then the phases run
// back to back, each offering the players.actions mix (spread evenly, in
// their order) whatever the replies do. Times are wall time.
type Pool struct {
	Conns int `yaml:"conns"` // connections, 1..MaxPoolConns; default DefaultPoolConns
	// ReplyGrace is how long past client.request_timeout (the budget the
	// server is told) a reply is still awaited before the request counts as
	// lost; default 1s.
	ReplyGrace Duration `yaml:"reply_grace"`
	// MaxOutstanding bounds the requests of a phase in flight; 0: rate x
	// (request_timeout + reply_grace) x 1.1 + 64.
	MaxOutstanding int `yaml:"max_outstanding"`
	// MaxRate bounds every open-loop phase's rate: offered x capacity above
	// it is cut to it (the run warns); (0, MaxPoolRate], default MaxPoolRate.
	MaxRate float64     `yaml:"max_rate"`
	Phases  []PoolPhase `yaml:"phases"` // at least one
}

// PoolPhase is one phase of a pool: an open loop at Rate requests/s or at
// Offered x capacity, or a closed loop of Concurrency requests outstanding
// (exactly one of the three). Its name is a window of the thresholds
// (p(99)[overload]).
type PoolPhase struct {
	Name        string   `yaml:"name"`        // required, unique: letters, digits, _ and -
	Duration    Duration `yaml:"duration"`    // wall time, > 0
	Rate        float64  `yaml:"rate"`        // requests/s, (0, MaxPoolRate]
	Offered     float64  `yaml:"offered"`     // requests/s as a multiple of capacity (> 0; needs capacity at run time)
	Concurrency int      `yaml:"concurrency"` // closed loop: requests outstanding, 1..MaxPoolConcurrency
}

// PoolRate is the phase's open-loop rate at capacity c: Rate, or Offered x
// c (0 when c is unknown, or for a closed loop).
func (p PoolPhase) PoolRate(c float64) float64 {
	if p.Offered > 0 {
		return p.Offered * c
	}
	return p.Rate
}

// SetPool replaces the pool's phases (keeping its connections and bounds)
// and makes Run.Duration their sum, as Parse would: for tools that run one
// phase of a scenario at a time (loadtest capacity).
func (s *Scenario) SetPool(p Pool) {
	s.Pool = &p
	var d time.Duration
	for _, ph := range p.Phases {
		d += time.Duration(ph.Duration)
	}
	s.Run.Duration = Duration(d)
}

// Players is what every player does once admitted.
type Players struct {
	// Login is the request every session makes at once when it gets in
	// (as a game client fetches the player's state); nil: none, the mix
	// starts at once. Its weight is not used.
	Login       *Act     `yaml:"login"`
	Actions     []Act    `yaml:"actions"`      // weighted mix, at least one for the players engine
	Think       Duration `yaml:"think"`        // mean pause between a player's actions (scenario time)
	ThinkJitter float64  `yaml:"think_jitter"` // pauses uniform in think x (1 ± jitter), [0,1]
	Session     Duration `yaml:"session"`      // mean play time once admitted (exponential); 0 = till the end
	Reconnect   float64  `yaml:"reconnect"`    // share who drop once and come back with their ticket, [0,1]
	JSON        float64  `yaml:"json"`         // share speaking protojson, [0,1]
}

// Act is one kind of request in the players' mix: one of the game's
// actions with its request template (package reqtmpl).
type Act struct {
	Do      string            `yaml:"do"`      // the game's action name (checked by Bind)
	Weight  float64           `yaml:"weight"`  // > 0 (not for players.login)
	Request *reqtmpl.Template `yaml:"request"` // the request's template; absent: {} (checked by Bind)
	// Criticality lowers the action's declared class (critical | default
	// | sheddable); empty: the declared class, which Bind fills in.
	Criticality string `yaml:"criticality"`

	// Action is the declaration of Do (Bind).
	Action *gamedef.Action `yaml:"-"`
	path   string          // "players.actions[2]"
	line   int             // of do
}

// Criticalities are the values of Act.Criticality.
var Criticalities = []string{priority.Critical.String(), priority.Default.String(), priority.Sheddable.String()}

// Client is how the players' client behaves.
type Client struct {
	Policy         string   `yaml:"policy"`          // sdk (default) | naive | bare
	RequestTimeout Duration `yaml:"request_timeout"` // wall time; default 5s
	Retry          Retry    `yaml:"retry"`           // sdk: 0 = SDK defaults; wall time
	Pace           float64  `yaml:"pace"`            // sdk: pacer rate per wall second; 0 = SDK default
}

// Retry is the SDK's retry backoff; zero fields take the SDK's defaults.
type Retry struct {
	Base     Duration `yaml:"base"`     // first backoff
	Cap      Duration `yaml:"cap"`      // longest backoff, >= base
	Attempts int      `yaml:"attempts"` // tries in all, 0..100
}

// Policies are the values of Client.Policy.
var Policies = []string{"sdk", "naive", "bare"}

// Action is one step of the operator's timeline: a line change or a
// fault (exactly one of the two).
type Action struct {
	At    string      `yaml:"at"`    // "T-5m", "T+0", "T+15m" (relative to t0) or a plain duration from the start
	Line  *LineChange `yaml:"line"`  // the gate admin API change (all gates), or
	Fault *FaultStep  `yaml:"fault"` // a fault injected into the cluster (loadtest/fault)
	If    []string    `yaml:"if"`    // threshold-syntax conditions on the last minute; all must hold or the action is skipped
	Note  string      `yaml:"note"`  // shown in the report

	Offset time.Duration         `yaml:"-"` // At resolved, scenario time from the start (>= 0)
	Conds  []threshold.Threshold `yaml:"-"` // If parsed
}

// LineChange is a change of the gates' admission line; zero fields are
// not sent (at least one is set).
type LineChange struct {
	Mode     string   `yaml:"mode"`     // open | queueing | paced | closed | auto
	Rate     int      `yaml:"rate"`     // players per interval (x scale at run time, at least 1)
	Interval Duration `yaml:"interval"` // scenario time (/ speed at run time), 1ms..1h
}

// FaultStep is a fault of the timeline (see package fault for what each
// kind does).
type FaultStep struct {
	Do     string   `yaml:"do"`     // kill | pause | restart | cpu | cut | fill
	Target string   `yaml:"target"` // a compose service name (gate, logic, battle-1); required
	For    Duration `yaml:"for"`    // pause, cpu, cut, fill: how long (> 0), scenario time (/ speed at run time)
	Grace  Duration `yaml:"grace"`  // restart: SIGTERM to SIGKILL, wall time; default 10s
	Factor float64  `yaml:"factor"` // cpu: the CPU limit x factor, in (0, 1); required
	Path   string   `yaml:"path"`   // fill: the absolute path inside the target whose filesystem fills; required
}

// WallFault is a fault step as injected at run time: For in wall time
// (Grace is wall time already; its default filled in by Parse).
func (s *Scenario) WallFault(f FaultStep) fault.Fault {
	return fault.Fault{Do: f.Do, Target: f.Target, For: s.Wall(time.Duration(f.For)), Grace: time.Duration(f.Grace),
		Factor: f.Factor, Path: f.Path}
}

// End is when the step is over in scenario time, as far as the file
// says: Offset, plus For for a timed fault.
func (a *Action) End() time.Duration {
	if a.Fault != nil {
		return a.Offset + time.Duration(a.Fault.For)
	}
	return a.Offset
}

// LineModes are the values of LineChange.Mode.
var LineModes = []string{"open", "queueing", "paced", "closed", "auto"}

// Run bounds the run.
type Run struct {
	Duration    Duration `yaml:"duration"`     // scenario time; default: max(curve end, last action) + 1m
	Drain       Duration `yaml:"drain"`        // wall time after the end for replies in flight; default request_timeout + 2s
	Workers     int      `yaml:"workers"`      // load processes, 0..64; 0 = ceil(peak players x scale / 15000) (WorkerCount)
	MaxRequests int      `yaml:"max_requests"` // bound on all requests, 1..10,000,000; default 10,000,000
}

// Wall is scenario time d in wall time: d / Speed.
func (s *Scenario) Wall(d time.Duration) time.Duration {
	if !(s.Speed > 0) {
		return d
	}
	return time.Duration(math.Round(float64(d) / s.Speed))
}

// WallCurve is the arrivals in wall time at the run's size:
// Curve.Scale(Scale, Speed).
func (s *Scenario) WallCurve() arrival.Curve { return s.Curve.Scale(s.Scale, s.Speed) }

// WallDuration is Run.Duration in wall time.
func (s *Scenario) WallDuration() time.Duration { return s.Wall(time.Duration(s.Run.Duration)) }

// PeakPlayers bounds the players present at once at the run's size: the
// curve's peak x Scale (Rate curves: every arrival by the end of the run,
// as if none left).
func (s *Scenario) PeakPlayers() float64 {
	if s.Curve.Kind() == arrival.Rate {
		return s.Curve.Arrivals(time.Duration(s.Run.Duration)) * s.Scale
	}
	return s.Curve.Peak() * s.Scale
}

// WorkerCount is Run.Workers, or when 0 one load process per
// PlayersPerWorker players of PeakPlayers (at least 1, at most MaxWorkers).
func (s *Scenario) WorkerCount() int {
	if s.Run.Workers > 0 {
		return s.Run.Workers
	}
	n := int(math.Ceil(s.PeakPlayers() / PlayersPerWorker))
	return min(max(n, 1), MaxWorkers)
}

// OfferedRate is the peak offered requests per wall second at the run's
// size: the peak players x Scale, each making one request per think time
// (wall: think / Speed). 0 for a rate curve or without a think time.
func (s *Scenario) OfferedRate() float64 {
	if s.Curve.Kind() == arrival.Rate || s.Players.Think <= 0 {
		return 0
	}
	return s.Curve.Peak() * s.Scale * s.Speed / time.Duration(s.Players.Think).Seconds()
}

// OfferedScale is the Scale at which OfferedRate is Offered x Capacity.
func (s *Scenario) OfferedScale() float64 {
	peak, think := s.Curve.Peak(), time.Duration(s.Players.Think).Seconds()
	if peak <= 0 || think <= 0 || s.Speed <= 0 {
		return 0
	}
	return s.Offered * s.Capacity * think / (peak * s.Speed)
}

// ErrOfferedNoCapacity is returned at run time by a scenario that sizes
// itself with offered but was given no capacity.
var ErrOfferedNoCapacity = errors.New("scenario: offered needs capacity: measure it (loadtest capacity) and give --set capacity=N")

// WallLine is a line change as sent at run time: Rate x Scale (rounded, at
// least 1 when set) and Interval in wall time (at least 1ms when set).
func (s *Scenario) WallLine(l LineChange) LineChange {
	if l.Rate > 0 {
		l.Rate = max(1, int(math.Round(float64(l.Rate)*s.Scale)))
	}
	if l.Interval > 0 {
		l.Interval = Duration(max(time.Millisecond, s.Wall(time.Duration(l.Interval))))
	}
	return l
}

// Error is every error of Parse and Load: File:Line: Path: Msg. Path is
// the YAML path from the root ("arrivals.phases[2].duration"); Line is 0
// when unknown; an error in an override's value has Set (the override,
// "players.think=ten") and says "--set PATH" instead of a line.
type Error struct {
	File string
	Line int
	Path string
	Msg  string
	Set  string
}

func (e *Error) Error() string {
	s := e.File
	switch {
	case e.Set != "":
		p := e.Path
		if p == "" {
			p = e.Set
		}
		return s + ": --set " + p + ": " + e.Msg
	case e.Line > 0:
		s += fmt.Sprintf(":%d", e.Line)
	}
	if e.Path != "" {
		s += ": " + e.Path
	}
	return s + ": " + e.Msg
}
