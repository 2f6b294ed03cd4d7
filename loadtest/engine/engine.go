// Package engine runs a players scenario (loadtest/scenario) against a
// local Levee cluster: players arrive on the scenario's curve (an open
// model: on schedule whether or not the servers keep up), wait in the
// gates' admission lines, play a weighted mix of actions with think times,
// drop and come back with their ticket, and leave; the operator timeline
// changes the lines through the gates' admin API; a probe reads the
// servers' own figures each second. Everything goes into one recorder
// (loadtest/record) per process and, merged per second, into one run file
// (loadtest/report) that the table, the thresholds and the HTML report
// are made from.
//
// A scenario with a pool instead of arrivals is played by the pool source
// (pool.go): a fixed set of connections dialled before the start, then
// named phases back to back, each offering the mix open loop at a rate
// (latency also counted from each request's due time) or as a closed loop;
// the phases are the run file's, so thresholds can be windowed by them.
//
// Past one process's file limit the players are spread over worker
// processes (this same binary, `loadtest worker`), each holding at most
// Config.PerWorker players and dialling from its own 127.0.0.x source
// address; the engine starts them, feeds them their share of the curve
// through stdin and merges the points they stream back on stdout.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/probe"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/scenario"
	"github.com/leveehq/levee/loadtest/target"
)

// DefaultPerWorker is how many players one process holds at most: below
// the 20,000 open files a process may have here, with room for the rest.
const DefaultPerWorker = 15_000

// Config is one run.
type Config struct {
	Scenario  *scenario.Scenario
	Name      string   // how the scenario was named (file or preset), for the workers to load it too
	Overrides []string // its --set overrides, likewise

	Gates         []string // WebSocket URLs of the gates; player n goes to Gates[n % len]
	Admin         []string // the gates' line admin URLs (http://.../admin/line), for the timeline
	AdminToken    string
	Faults        fault.Injector // injects the timeline's fault steps; nil: they are recorded as skipped
	Metrics       []probe.Target
	TokenSecret   string
	TokenKeyID    string // with TokenSecret: sign v2 tokens under this key id (-token-keys); empty: v1 tokens
	AllowNonlocal bool
	// TLS is how the bots trust wss:// gates (CA file, skip verification,
	// session cache); the zero value: the system roots, sessions resumed.
	TLS target.TLS

	// PID, when > 0, is a server process on this machine whose resident
	// memory is read each second (probe.ServerRSS) and once before the
	// first player (probe.ServerRSSBefore): the rss_per_conn figure.
	PID int

	Workers     int      // load processes; 0: ceil(peak / PerWorker); 1 runs in this process
	PerWorker   int      // players one process holds at most; 0: DefaultPerWorker
	SourceAddrs []string // worker i dials from SourceAddrs[i % len]; empty: the system's choice
	Exe         string   // the binary started as `Exe worker`; "" the running one

	Label   string   // the report's label ("protected", "unprotected")
	Command []string // the command line, for the report
	RunID   string   // names the players p-<run id>-<n>; "" picks one

	Out      io.Writer // the NDJSON run file (nil: none)
	Progress io.Writer // the progress line (nil: none)
	TTY      bool      // Progress is a terminal: one updating line
	Log      *slog.Logger
	Clock    clock.Clock

	// Game is the game driven: the declaration the scenario's actions are
	// checked against and sent by, and its auditor (ledger: true).
	Game Game
}

// Run plays the scenario and returns the run (points, summary, criteria).
// It returns an error only when the run could not start; an interrupted
// run (ctx cancelled) is returned with a warning saying so.
func Run(ctx context.Context, cfg Config) (*report.Run, error) {
	p, err := newPlan(cfg.Scenario, cfg.Game)
	if err != nil {
		return nil, err
	}
	if len(cfg.Gates) == 0 {
		return nil, errors.New("engine: no gate to send players to")
	}
	if !cfg.AllowNonlocal {
		for _, g := range cfg.Gates {
			if err := target.CheckTarget(ctx, g, nil); err != nil {
				return nil, err
			}
		}
		// The admin API and the probed pages too, before anything is sent
		// (their clients also refuse other addresses at dial time).
		for _, u := range cfg.Admin {
			if err := target.CheckHTTP(ctx, "-admin-urls", u, net.DefaultResolver); err != nil {
				return nil, err
			}
		}
		for _, m := range cfg.Metrics {
			if err := target.CheckHTTP(ctx, "-metrics", m.URL, net.DefaultResolver); err != nil {
				return nil, err
			}
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.PerWorker <= 0 {
		cfg.PerWorker = DefaultPerWorker
	}
	if cfg.Workers <= 0 {
		cfg.Workers = cfg.Scenario.Run.Workers
	}
	if cfg.Workers <= 0 {
		cfg.Workers = max(1, int(math.Ceil(p.peak/float64(cfg.PerWorker))))
	}
	if need := int(math.Ceil(p.peak / float64(cfg.PerWorker))); cfg.Workers < need {
		return nil, fmt.Errorf("engine: %d worker(s) of at most %d players cannot hold the peak of %.0f players: use at least %d",
			cfg.Workers, cfg.PerWorker, p.peak, need)
	}
	if cfg.RunID == "" {
		cfg.RunID = randomID()
	}
	seed := cfg.Scenario.Seed
	if seed == 0 {
		seed = randomSeed()
	}
	r := &run{cfg: cfg, p: p, seed: seed}
	return r.run(ctx)
}

type run struct {
	cfg  Config
	p    *plan
	seed uint64

	start  time.Time
	tl     *timeline // sets report.LevelLineRate in every point
	w      *report.Writer
	out    *report.Run
	levels map[int]map[string]float64 // probe figures by second
	pool   *pool                      // the pool source, dialled before the start; nil: players
	// rssFailed: a read of Config.PID's memory failed (warned once).
	rssFailed bool
}

func (r *run) meta() report.Meta {
	sc := r.cfg.Scenario
	m := report.Meta{
		Schema: report.Schema, Tool: "levee-loadtest",
		Scenario: sc.Name, File: sc.File, Description: sc.Description, Label: r.cfg.Label,
		Scale: sc.Scale, Speed: sc.Speed, Seed: r.seed, RunID: r.cfg.RunID,
		Started: r.start, Command: r.cfg.Command, Gates: len(r.cfg.Gates), Workers: r.cfg.Workers,
		T0: r.p.t0.Seconds(), Capacity: sc.Capacity, Offered: sc.Offered, OfferedRate: sc.OfferedRate(), Thresholds: r.p.thresholds,
		Mix: sc.Mix(),
	}
	if r.p.t0 <= 0 {
		m.T0 = 0
	}
	m.Phases = []report.Phase{{Name: "run", From: 0, To: r.p.end.Seconds()}, {Name: "drain", From: r.p.end.Seconds(), To: (r.p.end + r.p.drain).Seconds()}}
	if r.p.pool != nil {
		m.Phases = r.p.pool.metaPhases(r.p.end, r.p.drain)
	}
	return m
}

func (r *run) run(ctx context.Context) (*report.Run, error) {
	clk := r.cfg.Clock
	// Workers get a moment to start, so that all count from one start.
	lead := time.Duration(0)
	if r.cfg.Workers > 1 {
		lead = 1500 * time.Millisecond
	}
	if r.p.pool != nil {
		// The pool's connections are dialled first: its phases start
		// with every connection up.
		if err := r.dialPool(ctx); err != nil {
			return nil, err
		}
	}
	r.start = clk.Now().Add(lead)
	r.out = &report.Run{Meta: r.meta()}
	r.levels = map[int]map[string]float64{}
	if r.cfg.Out != nil {
		w, err := report.NewWriter(r.cfg.Out, r.out.Meta)
		if err != nil {
			return nil, err
		}
		r.w = w
	}

	if r.cfg.PID > 0 {
		rss, err := probe.ReadRSS(r.cfg.PID)
		if err != nil {
			return nil, fmt.Errorf("engine: the server's memory (pid %d): %w", r.cfg.PID, err)
		}
		r.levels[0] = map[string]float64{probe.ServerRSSBefore: rss / (1 << 20)}
	}
	// The probe trusts what the bots trust: a gate's ops port may serve
	// https with the edge certificate.
	probeTLS, err := r.cfg.TLS.Config()
	if err != nil {
		return nil, err
	}
	srcs, err := r.startSources(ctx)
	if err != nil {
		return nil, err
	}
	m := newMerger(len(srcs))
	points := make(chan sourcePoint, 256)
	var wg sync.WaitGroup
	for i, s := range srcs {
		wg.Go(func() { s.run(ctx, i, points) })
	}
	go func() { wg.Wait(); close(points) }()

	pr := probe.New(r.cfg.Metrics, target.HTTPSClient(900*time.Millisecond, r.cfg.AllowNonlocal, probeTLS))
	t := clk.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	// Faults are injected from here, the main process, only: the workers
	// get the scenario but no injector.
	tl := newTimeline(r.p, r.cfg.Admin, r.cfg.AdminToken, target.HTTPSClient(5*time.Second, r.cfg.AllowNonlocal, probeTLS), r.cfg.Faults,
		func() time.Duration { return clk.Now().Sub(r.start) })
	r.tl = tl
	prog := newProgress(r.cfg.Progress, r.cfg.TTY, r.p)
	lastProbe := -1
	hardEnd := r.start.Add(r.p.end + r.p.drain + 30*time.Second)
	if r.p.ledger {
		hardEnd = hardEnd.Add(auditCheckTime)
	}
	if r.p.replayCheck > 0 {
		hardEnd = hardEnd.Add(replayCheckTime)
	}
	open := true
	for open {
		select {
		case sp, ok := <-points:
			if !ok {
				open = false
				break
			}
			m.add(sp)
		case <-t.C():
		}
		now := clk.Now()
		el := now.Sub(r.start)
		if sec := int(el/time.Second) - 1; sec > lastProbe && el >= 0 && sec < int((r.p.end+r.p.drain)/time.Second)+1 {
			lastProbe = sec
			if len(r.cfg.Metrics) > 0 {
				pctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
				r.addLevels(sec, pr.Sample(pctx, now))
				cancel()
			}
			r.sampleRSS(sec)
		}
		for _, p := range m.ready() {
			r.emit(p, prog)
		}
		for _, ev := range tl.poll(ctx, el, r.out.Points) {
			r.event(ev)
		}
		if now.After(hardEnd) {
			r.out.Warnings = append(r.out.Warnings, "workers did not finish by the end of the drain (and the ledger check) + 30 s; their last points are missing")
			break
		}
	}
	for _, p := range m.rest() {
		r.emit(p, prog)
	}
	for _, ev := range tl.finish() {
		r.event(ev)
	}
	prog.done()
	var entries []entry
	for i, s := range srcs {
		r.out.Warnings = append(r.out.Warnings, s.warnings()...)
		res := s.result()
		entries = append(entries, res.Entries...)
		r.out.Workers = append(r.out.Workers, report.Worker{Index: i, Peak: res.Peak, Capped: res.Capped,
			Players: len(res.Entries), Source: r.sourceAddr(i)})
	}
	r.out.Fairness = fairness(entries, len(r.cfg.Gates))
	r.out.Warnings = append(r.out.Warnings, pr.Errors()...)
	if ctx.Err() != nil {
		r.out.Warnings = append(r.out.Warnings, "interrupted: the run was stopped before its end")
	}
	r.out.Summary = report.Summarize(r.out.Points)
	crits, _ := report.Evaluate(r.out, r.cfg.Scenario.Checks)
	r.out.Criteria = crits
	if r.w != nil {
		if err := r.w.EndRun(r.out); err != nil {
			return r.out, err
		}
	}
	return r.out, nil
}

func (r *run) emit(p record.Point, prog *progress) {
	if lv := r.levels[p.T]; lv != nil {
		if p.Levels == nil {
			p.Levels = map[string]float64{}
		}
		for k, v := range lv {
			p.Levels[k] = v
		}
		delete(r.levels, p.T)
	}
	if r.tl != nil {
		if v, ok := r.tl.lineRateDuring(p.T); ok {
			if p.Levels == nil {
				p.Levels = map[string]float64{}
			}
			p.Levels[report.LevelLineRate] = v
		}
	}
	r.out.Points = append(r.out.Points, p)
	if r.w != nil {
		_ = r.w.Point(p) // a write error shows at End
	}
	prog.point(p, r.out.Points)
}

func (r *run) event(ev report.Event) {
	r.out.Events = append(r.out.Events, ev)
	if r.w != nil {
		_ = r.w.Event(ev)
	}
	r.cfg.Log.Info("timeline", "t", ev.T, "kind", ev.Kind, "what", ev.What)
}

// sourcePoint is a point from source src (a worker, or this process).
type sourcePoint struct {
	src  int
	p    record.Point
	done bool // the source has ended: no more points from it
}

// merger sums the sources' points second by second, and hands a second on
// once every source still running has reported a later one.
type merger struct {
	pending map[int]*record.Point
	upto    []int // each source has reported every second before this
	done    []bool
	next    int
}

func newMerger(n int) *merger {
	return &merger{pending: map[int]*record.Point{}, upto: make([]int, n), done: make([]bool, n)}
}

func (m *merger) add(sp sourcePoint) {
	if sp.done {
		m.done[sp.src] = true
		return
	}
	p := sp.p
	if p.T < m.next {
		p.T = m.next // a straggler: counted in the first second still open
	}
	if q := m.pending[p.T]; q != nil {
		*q = record.Merge(*q, p)
	} else {
		m.pending[p.T] = &p
	}
	m.upto[sp.src] = max(m.upto[sp.src], sp.p.T+1)
}

// ready returns the seconds every running source has passed.
func (m *merger) ready() []record.Point {
	lim := math.MaxInt
	for i, u := range m.upto {
		if !m.done[i] {
			lim = min(lim, u)
		}
	}
	var out []record.Point
	if lim == math.MaxInt {
		return out
	}
	for ; m.next < lim; m.next++ {
		if p := m.pending[m.next]; p != nil {
			out = append(out, *p)
			delete(m.pending, m.next)
		} else {
			out = append(out, record.Point{T: m.next})
		}
	}
	return out
}

// rest returns every second still pending, in order.
func (m *merger) rest() []record.Point {
	var ts []int
	for t := range m.pending {
		ts = append(ts, t)
	}
	sort.Ints(ts)
	var out []record.Point
	for _, t := range ts {
		for ; m.next < t; m.next++ {
			out = append(out, record.Point{T: m.next})
		}
		out = append(out, *m.pending[t])
		m.next = t + 1
	}
	return out
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// describe joins a line change for the timeline's events.
func describe(s step) string {
	var parts []string
	if s.mode != "" {
		parts = append(parts, "mode "+s.mode)
	}
	switch {
	case s.rate > 0 && s.interval > 0:
		parts = append(parts, fmt.Sprintf("%d per %v", s.rate, s.interval))
	case s.rate > 0:
		parts = append(parts, fmt.Sprintf("%d per interval (kept)", s.rate))
	case s.interval > 0:
		parts = append(parts, fmt.Sprintf("interval %v", s.interval))
	}
	return strings.Join(parts, ", ")
}
