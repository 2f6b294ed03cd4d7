package engine

import (
	"fmt"
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/gamedef"
	"github.com/leveehq/levee/internal/priority"
	"github.com/leveehq/levee/loadtest/arrival"
	"github.com/leveehq/levee/loadtest/audit"
	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/reqtmpl"
	"github.com/leveehq/levee/loadtest/scenario"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// plan is a scenario resolved for one run, in wall time: what the drivers
// and the operator timeline need, and nothing of YAML.
type plan struct {
	name       string
	curve      arrival.Curve // wall time, scaled
	end        time.Duration // no arrival and no new request after it (wall)
	drain      time.Duration // replies still awaited after end (wall)
	acts       []act         // cumulative weights
	login      act           // every session's first action: a profile fetch
	think      time.Duration // wall
	jitter     float64
	session    time.Duration // mean, wall; 0: till the end
	reconnect  float64
	json       float64
	naive      bool
	bare       bool          // plain WebSockets, no request (bare.go)
	timeout    time.Duration // per request (wall, not scaled)
	retryBase  time.Duration
	retryCap   time.Duration
	attempts   int
	pace       float64
	maxReqs    int64
	timeline   []step
	scale      float64
	speed      float64
	t0         time.Duration // wall time of T+0
	peak       float64       // players present at the peak (scaled)
	thresholds []string
	ledger     bool      // keep the game's record and check it after the drain (loadtest/audit)
	pool       *poolPlan // the pool source instead of the players; nil: players
	game       Game      // the game driven
	hasLogin   bool      // login is every session's first request
	// replayCheck is how many acknowledged mutations each process resends
	// after the run (replay.go); 0: none.
	replayCheck int
}

// Game is what the engine knows of the game it drives: its declaration
// (the actions the scenario names, their request types and classes, the
// messages the JSON subprotocol needs) and, optionally, its auditor.
type Game struct {
	Game *game.Game
	// Audit makes a load process's auditor, for scenarios with
	// ledger: true; nil: the game has none, and such a scenario is
	// refused.
	Audit audit.Factory
}

// act is one kind of player action with its share of the mix.
type act struct {
	do     string // the action's name (the report's op label)
	cum    float64
	action *gamedef.Action
	tmpl   *reqtmpl.Template
	crit   leveev2.Criticality
	critNm string
	// fixed is the encoded request of a template without a placeholder
	// or a generator (fixedMsg its message), built once.
	fixed    []byte
	fixedMsg proto.Message
}

// step is one operator action, in wall time.
type step struct {
	at       time.Duration
	label    string // "T+5:00" or "1:30"
	mode     string
	rate     int
	interval time.Duration
	conds    []string
	sc       scenario.Action
	note     string
	fault    *fault.Fault // a fault step (wall time); nil: a line change
}

func newPlan(sc *scenario.Scenario, gm Game) (*plan, error) {
	if gm.Game == nil {
		return nil, fmt.Errorf("scenario %s: no game to drive", sc.Name)
	}
	if err := gm.Game.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	if err := sc.Bind(gm.Game.Def()); err != nil {
		return nil, err
	}
	if sc.Ledger && gm.Audit == nil {
		return nil, fmt.Errorf("scenario %s: ledger: true, but game %s has no auditor (loadtestcmd.Options.Audit)", sc.Name, gm.Game.Name())
	}
	if sc.Engine != "" && sc.Engine != scenario.EnginePlayers {
		return nil, fmt.Errorf("scenario %s: engine %q is not the players engine", sc.Name, sc.Engine)
	}
	if sc.Offered > 0 && sc.Capacity <= 0 {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, scenario.ErrOfferedNoCapacity)
	}
	p := &plan{
		name:      sc.Name,
		curve:     sc.WallCurve(),
		end:       sc.WallDuration(),
		drain:     time.Duration(sc.Run.Drain),
		think:     sc.Wall(time.Duration(sc.Players.Think)),
		jitter:    sc.Players.ThinkJitter,
		session:   sc.Wall(time.Duration(sc.Players.Session)),
		reconnect: sc.Players.Reconnect,
		json:      sc.Players.JSON,
		naive:     sc.Client.Policy == "naive",
		bare:      sc.Client.Policy == "bare",
		timeout:   time.Duration(sc.Client.RequestTimeout),
		retryBase: time.Duration(sc.Client.Retry.Base),
		retryCap:  time.Duration(sc.Client.Retry.Cap),
		attempts:  sc.Client.Retry.Attempts,
		pace:      sc.Client.Pace,
		maxReqs:   int64(sc.Run.MaxRequests),
		scale:     sc.Scale,
		speed:     sc.Speed,
		t0:        sc.Wall(time.Duration(sc.T0)),
		peak:      sc.WallCurve().Peak(),
		ledger:    sc.Ledger,
		game:      gm,

		replayCheck: sc.ReplayCheck,
	}
	p.thresholds = slices.Clone(sc.Thresholds)
	var err error
	if p.pool, err = newPoolPlan(sc); err != nil {
		return nil, err
	}
	if p.timeout <= 0 {
		p.timeout = 5 * time.Second
	}
	if p.maxReqs <= 0 {
		p.maxReqs = 10_000_000
	}
	total := 0.0
	for _, a := range sc.Players.Actions {
		total += a.Weight
	}
	if p.bare {
		p.acts = []act{{do: "none", cum: 1}} // never played: bare players make no request
	} else if total <= 0 {
		return nil, fmt.Errorf("scenario %s: players.actions: no action with a weight", sc.Name)
	}
	cum := 0.0
	for _, a := range sc.Players.Actions {
		cum += a.Weight / total
		x, err := newAct(&a)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		x.cum = cum
		p.acts = append(p.acts, x)
	}
	p.acts[len(p.acts)-1].cum = 1
	if l := sc.Players.Login; l != nil {
		if p.login, err = newAct(l); err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		p.login.cum, p.hasLogin = 1, true
	}
	for _, a := range sc.Timeline {
		s := step{at: sc.Wall(a.Offset), sc: a, note: a.Note, conds: a.If}
		s.label = p.label(s.at)
		if a.Fault != nil {
			f := sc.WallFault(*a.Fault)
			s.fault = &f
		}
		if a.Line != nil {
			s.mode = a.Line.Mode
			if a.Line.Rate > 0 {
				s.rate = max(1, int(math.Round(float64(a.Line.Rate)*sc.Scale)))
			}
			s.interval = sc.Wall(time.Duration(a.Line.Interval))
		}
		p.timeline = append(p.timeline, s)
	}
	return p, nil
}

// newAct is a bound scenario action as the drivers play it.
func newAct(a *scenario.Act) (act, error) {
	c, _ := priority.Parse(a.Criticality) // bound: the declared class or a lower one
	x := act{do: a.Do, action: a.Action, tmpl: a.Request, crit: c.Proto(), critNm: c.String()}
	if x.tmpl.Fixed() {
		m, b, err := x.build(reqtmpl.Vars{}, nil)
		if err != nil {
			return act{}, err
		}
		x.fixedMsg, x.fixed = m, b
	}
	return x, nil
}

// label names a wall offset in scenario time: "T-5:00" when the scenario
// has a T0 (t0 > 0 or a timeline), else "m:ss".
func (p *plan) label(wall time.Duration) string {
	st := time.Duration(float64(wall) * p.speed)
	if p.t0 <= 0 {
		return mmss(st)
	}
	rel := st - time.Duration(float64(p.t0)*p.speed)
	sign := "+"
	if rel < 0 {
		sign, rel = "-", -rel
	}
	return "T" + sign + mmss(rel)
}

func mmss(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// pick returns the action for a uniform draw u in [0, 1).
func (p *plan) pick(u float64) *act {
	for i := range p.acts {
		if u < p.acts[i].cum {
			return &p.acts[i]
		}
	}
	return &p.acts[len(p.acts)-1]
}

// inFault reports whether wall offset at falls in a fault step that lasts
// (pause, cpu, cut, fill: from its time to its end, as planned), so that
// the requests due then can be judged apart (fault_attempts_per_request).
func (p *plan) inFault(at time.Duration) bool {
	for _, s := range p.timeline {
		if s.fault != nil && s.fault.For > 0 && at >= s.at && at < s.at+s.fault.For {
			return true
		}
	}
	return false
}
