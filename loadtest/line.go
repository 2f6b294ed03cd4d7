package loadtest

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"levee/client"
	"levee/internal/clock"
	"levee/internal/lineapi"
	"levee/internal/token"
	"levee/loadtest/record"
	leveev1 "levee/proto/leveev1"
)

// LineConfig is the line scenario: Bots players connect at once (at most
// DialParallel handshakes in progress) to a gate whose admission line is
// active, each waits in line until the gate admits it, and the run measures
// whether they were admitted in the order they arrived, at the configured
// pace, and none lost. Optionally it changes the pace through the gate's
// admin API in the middle of the run and measures the pace before and after.
type LineConfig struct {
	Bots         int
	DialParallel int           // WebSocket handshakes in progress at once
	Bound        time.Duration // the longest any bot waits, from the start of the run
	// Rate is the configured pace in admissions per second that the
	// measured pace is judged against; 0 takes Start's, else the one the
	// admin API reports (GET), else the pace is only reported.
	Rate float64
	// Window is the width of the windows the pace is counted in.
	Window time.Duration
	// Settle is left out of the measured pace after a pace change.
	Settle time.Duration
	// PaceTolerance: the measured pace passes within ± this share of the
	// configured one.
	PaceTolerance float64
	// OrderSlack is added to the uncertainty of each release time before
	// two releases count as surely inverted (the release times come from
	// the gate's waited_ms, so 0 is sound).
	OrderSlack time.Duration
	// MaxStatusGap: the longest a waiting bot may go without a QueueStatus.
	// The gate pushes on change, else at a heartbeat that is -line-push
	// near the front and up to 30 times that far back in a standing line
	// (lineapi.MaxStatusInterval: 62 s at the default 2 s).
	MaxStatusGap time.Duration

	Admin *Admin // the gate's admin API; nil: none (no Start, no Change)
	// Start, when not zero, is applied through Admin before the bots dial,
	// or with StartWhenJoined once every bot has its place in line (or
	// has failed): with the gate's line in queueing mode that measures
	// the pace on a full line however slowly the bots could connect.
	Start           LineSetting
	StartWhenJoined bool
	// ChangeAt, when > 0, applies Change through Admin this long after the
	// first admission.
	ChangeAt time.Duration
	Change   LineSetting

	// RunFile, when set, also gets the run's common record (-run-file):
	// per second the bots that arrived (began their handshake), were
	// connected, waited in line and were admitted, dial failures (also
	// the bots never dialed when the run ended first, as the report's
	// failures), drops and leaves, each admitted bot's wait in line, and
	// the phases (dial, pace once every bot is in line, change, close);
	// the caller Ends it.
	RunFile *RunFile
}

// DefaultLine is 3,000 bots, 64 handshakes at a time, a 5-minute bound,
// 1 s windows, ±20 % pace tolerance, no order slack, a 63 s status gap
// (the gate's longest at its default -line-push, and 1 s for delivery).
func DefaultLine() LineConfig {
	return LineConfig{
		Bots:          3000,
		DialParallel:  64,
		Bound:         5 * time.Minute,
		Window:        time.Second,
		Settle:        time.Second,
		PaceTolerance: 0.2,
		OrderSlack:    0,
		MaxStatusGap:  lineapi.MaxStatusInterval(lineapi.DefaultPush) + time.Second,
	}
}

// Validate checks the config; errors name the flag.
func (c LineConfig) Validate() error {
	switch {
	case c.Bots < 1 || c.Bots > MaxBots:
		return scenarioErr("-bots: must be in 1..%d, got %d", MaxBots, c.Bots)
	case c.DialParallel < 1 || c.DialParallel > 10_000:
		return scenarioErr("-dial-parallel: must be in 1..10000, got %d", c.DialParallel)
	case c.Bound <= 0:
		return scenarioErr("-bound: must be > 0, got %v", c.Bound)
	case c.Rate < 0:
		return scenarioErr("-line-rate: must be >= 0, got %v", c.Rate)
	case c.Window <= 0:
		return scenarioErr("-window: must be > 0, got %v", c.Window)
	case c.Settle < 0:
		return scenarioErr("-settle: must be >= 0, got %v", c.Settle)
	case c.PaceTolerance <= 0 || c.PaceTolerance >= 1:
		return scenarioErr("-pace-tolerance: must be in (0, 1), got %v", c.PaceTolerance)
	case c.OrderSlack < 0:
		return scenarioErr("-order-slack: must be >= 0, got %v", c.OrderSlack)
	case c.MaxStatusGap <= 0:
		return scenarioErr("-max-status-gap: must be > 0, got %v", c.MaxStatusGap)
	case c.ChangeAt < 0:
		return scenarioErr("-change-at: must be >= 0, got %v", c.ChangeAt)
	case c.ChangeAt > 0 && c.Change == (LineSetting{}):
		return scenarioErr("-change-at: needs -change-rate (and -change-interval) or -change-mode")
	case (c.ChangeAt > 0 || c.Start != LineSetting{}) && (c.Admin == nil || c.Admin.URL == ""):
		return scenarioErr("-admin-url: required by -change-at and -start-*")
	case c.StartWhenJoined && c.Start == LineSetting{}:
		return scenarioErr("-start-when-joined: needs -start-mode (and -start-rate, -start-interval)")
	}
	return nil
}

// lineBot is what one bot saw. Only its own goroutine writes it (OnQueue
// and OnAdmitted run on the dialing goroutine), except dialStart, written
// before that goroutine starts.
type lineBot struct {
	dialStart   time.Time
	firstStatus time.Time // zero: never in line
	lastStatus  time.Time
	firstPos    uint64
	statuses    int
	maxGap      time.Duration // longest wait between statuses, or from the last status to the admission
	admitted    time.Time     // zero: not admitted
	welcomed    time.Time
	gateWaited  time.Duration
	err         error
	c           *client.Client
	// connected and waiting say what the run file counts the bot as: a
	// connected player, one in line.
	connected, waiting bool
}

// RunLine plays the line scenario (see LineConfig) and reports. It returns
// an error only when the run could not start (an invalid config, a target
// that is not loopback, a failed Start setting); an interrupted run still
// reports.
//
// Bounds: every bot's dial, its wait in line included, ends by Bound after
// the start; then every connection is closed.
func (r *Runner) RunLine(ctx context.Context, cfg LineConfig) (*LineReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !r.cfg.AllowNonlocal {
		if err := CheckTarget(ctx, r.cfg.GateURL, r.resolver); err != nil {
			return nil, err
		}
		if cfg.Admin != nil && cfg.Admin.URL != "" {
			if err := checkLoopbackURL(ctx, "-admin-url", cfg.Admin.URL, r.resolver); err != nil {
				return nil, err
			}
		}
	}
	runID := r.cfg.RunID
	if runID == "" {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(randomUint64()))
		runID = hex.EncodeToString(b[:])
	}
	rep := &LineReport{Scenario: "line", RunID: runID, Target: r.cfg.GateURL, Bots: cfg.Bots,
		DialParallel: cfg.DialParallel, Bound: cfg.Bound, Window: cfg.Window, OrderSlack: cfg.OrderSlack,
		PaceTolerance: cfg.PaceTolerance, MaxStatusGapAllowed: cfg.MaxStatusGap,
		Failures: map[string]int{}}

	rep.ConfiguredRate = cfg.Rate
	if cfg.Start != (LineSetting{}) {
		if !cfg.StartWhenJoined {
			if err := cfg.Admin.Set(ctx, cfg.Start); err != nil {
				return nil, fmt.Errorf("-start-*: %w", err)
			}
			r.log.Info("line set", "setting", cfg.Start.String())
		}
		if rep.ConfiguredRate == 0 {
			rep.ConfiguredRate = cfg.Start.PerSecond()
		}
	}
	if rep.ConfiguredRate == 0 && cfg.Admin != nil && cfg.Admin.URL != "" {
		if st, err := cfg.Admin.Get(ctx); err == nil {
			rep.ConfiguredRate = st.Rate.PerSecond
		} else {
			rep.Warnings = append(rep.Warnings, "reading the pace: "+err.Error())
		}
	}
	if cfg.ChangeAt > 0 {
		rep.ChangeAt = cfg.ChangeAt
		rep.ChangedRate = cfg.Change.PerSecond()
	}

	r.log.Info("line test starting", "run_id", runID, "bots", cfg.Bots, "target", r.cfg.GateURL,
		"pace", rep.ConfiguredRate, "bound", cfg.Bound.String())
	lr := &lineRun{r: r, cfg: cfg, runID: runID, bots: make([]lineBot, cfg.Bots), firstAdmitted: make(chan struct{}),
		allJoined: make(chan struct{})}
	start := time.Now()
	rep.Started = start
	runCtx, cancel := context.WithDeadline(ctx, start.Add(cfg.Bound))
	defer cancel()
	rec, stopRecord := cfg.RunFile.begin(ctx, clock.Real{}, runID)
	defer stopRecord()
	lr.rec = rec
	lr.toPhase(phaseDial)

	openDone := lr.opener(runCtx)
	changeDone := lr.changer(runCtx, rep)
	progressDone := lr.progress(runCtx, start)
	stallDone := lr.watchStalls(runCtx)
	lr.launch(runCtx, start)
	cancel()
	<-openDone
	<-changeDone
	<-progressDone
	<-stallDone
	rep.MaxStall = time.Duration(lr.maxStall.Load())
	if cfg.StartWhenJoined {
		if lr.openErr != nil {
			rep.Warnings = append(rep.Warnings, "-start-when-joined: "+lr.openErr.Error())
		} else {
			rep.OpenedAfter = lr.openDone.Sub(start)
		}
	}
	lr.toPhase(phaseClose)
	lr.closeAll()
	stopRecord()

	rep.Interrupted = ctx.Err() != nil
	rep.Elapsed = time.Since(start)
	lr.fill(rep)
	rep.Evaluate()
	r.log.Info("line test done", "admitted", rep.Admitted, "lost", rep.Lost, "inversions", rep.Inversions,
		"passed", rep.Passed, "elapsed", rep.Elapsed.Round(time.Millisecond).String())
	return rep, nil
}

// lineRun is one line run's shared state.
type lineRun struct {
	r     *Runner
	cfg   LineConfig
	runID string
	bots  []lineBot

	joined, admitted atomic.Int64
	firstOnce        sync.Once
	firstAdmitted    chan struct{} // closed at the first admission
	firstAt          atomic.Int64  // its time, UnixNano

	changeSent, changeDone time.Time // written by the changer before changeDone is closed
	changeErr              error

	maxStall    atomic.Int64  // ns; see watchStalls
	settledJoin atomic.Int64  // bots that have their place in line or whose dial ended
	allJoined   chan struct{} // closed when settledJoin reaches len(bots)
	openDone    time.Time     // written by the opener before it ends
	openErr     error

	rec     *record.Recorder // the run file's, nil for none
	phaseMu sync.Mutex
	phase   linePhase // the run file's phase so far
}

// linePhase is a phase of a line run in the run file, in the order they
// come.
type linePhase int

const (
	phaseNone   linePhase = iota
	phaseDial             // the bots dial and join the line
	phasePace             // every bot has its place in line (or failed)
	phaseChange           // the pace change was sent
	phaseClose            // the run's end: every connection is closed
)

var linePhaseNames = [...]string{phaseDial: "dial", phasePace: "pace", phaseChange: "change", phaseClose: "close"}

// toPhase starts phase p in the run file unless the run is past it (the
// last bot may join the line after the pace change).
func (lr *lineRun) toPhase(p linePhase) {
	lr.phaseMu.Lock()
	defer lr.phaseMu.Unlock()
	if p <= lr.phase {
		return
	}
	lr.phase = p
	lr.cfg.RunFile.phase(linePhaseNames[p])
}

// add counts a player event in the run file, if any (see record.Recorder.Add).
func (lr *lineRun) add(name string, n int64) {
	if lr.rec != nil {
		lr.rec.Add(name, n)
	}
}

// joinSettled counts a bot that has its place in line, or whose dial
// ended; call it once per bot.
func (lr *lineRun) joinSettled() {
	if lr.settledJoin.Add(1) == int64(len(lr.bots)) {
		close(lr.allJoined)
		lr.toPhase(phasePace)
	}
}

// opener applies cfg.Start once every bot is in line, with
// StartWhenJoined; the returned channel is closed when it is done.
func (lr *lineRun) opener(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if !lr.cfg.StartWhenJoined {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		select {
		case <-lr.allJoined:
		case <-ctx.Done():
			lr.openErr = errors.New("not every bot was in line before the end of the run")
			return
		}
		lr.openErr = lr.cfg.Admin.Set(ctx, lr.cfg.Start)
		lr.openDone = time.Now()
		lr.r.log.Info("line opened", "setting", lr.cfg.Start.String(), "err", lr.openErr, "joined", lr.joined.Load())
	}()
	return done
}

// launch dials every bot, DialParallel handshakes at a time, in rank
// order, and waits until every dial has ended.
func (lr *lineRun) launch(ctx context.Context, start time.Time) {
	secret := []byte(lr.r.cfg.TokenSecret)
	exp := start.Add(lr.cfg.Bound + 10*time.Minute)
	sem := make(chan struct{}, lr.cfg.DialParallel)
	var wg sync.WaitGroup
	for n := range lr.bots {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			for m := n; m < len(lr.bots); m++ {
				lr.bots[m].err = ctx.Err()
				lr.add("dial_failures", 1) // as the report counts them
				lr.joinSettled()
			}
			wg.Wait()
			return
		}
		b := &lr.bots[n]
		b.dialStart = time.Now()
		lr.add("arrived", 1)
		wg.Go(func() {
			var once sync.Once
			release := func() { once.Do(func() { <-sem }) }
			defer release()
			lr.dial(ctx, n, b, secret, exp, release)
		})
	}
	wg.Wait()
}

// dial is one bot: it waits in line until admitted and welcomed, or until
// the run's bound. release frees its handshake slot: once the gate has
// answered the upgrade (or at the first status, or when the dial ends).
func (lr *lineRun) dial(ctx context.Context, n int, b *lineBot, secret []byte, exp time.Time, release func()) {
	id := botID(lr.runID, n)
	settled := false
	settle := func() {
		if !settled {
			settled = true
			lr.joinSettled()
		}
	}
	defer settle()
	tok, err := token.Sign(secret, id, exp)
	if err != nil {
		b.err = fmt.Errorf("token: %w", err)
		return
	}
	opts := client.Options{
		JSON:     useJSON(n, lr.r.cfg.JSONFraction),
		Dialer:   signalDialer(lr.r.dialer, release),
		Logger:   lr.r.log,
		NoRetry:  true,
		NoPacing: true,
		OnQueue: func(q *leveev1.QueueStatus) {
			now := time.Now()
			if b.statuses == 0 {
				b.firstStatus, b.firstPos = now, q.GetPosition()
				lr.joined.Add(1)
				b.connected, b.waiting = true, true
				lr.add("connected", 1)
				lr.add("waiting", 1)
				release()
				settle()
			} else {
				b.maxGap = max(b.maxGap, now.Sub(b.lastStatus))
			}
			b.lastStatus = now
			b.statuses++
		},
		OnAdmitted: func(a *leveev1.Admitted) {
			now := time.Now()
			b.admitted = now
			b.gateWaited = time.Duration(a.GetWaitedMs()) * time.Millisecond
			if b.statuses > 0 {
				b.maxGap = max(b.maxGap, now.Sub(b.lastStatus))
			}
			lr.admitted.Add(1)
			if b.waiting {
				b.waiting = false
				lr.add("waiting", -1)
			}
			lr.add("admitted", 1)
			if lr.rec != nil {
				lr.rec.Observe("wait", now.Sub(b.dialStart))
			}
			lr.firstOnce.Do(func() {
				lr.firstAt.Store(now.UnixNano())
				close(lr.firstAdmitted)
			})
		},
	}
	c, err := client.Dial(ctx, lr.r.cfg.GateURL, tok, opts)
	b.welcomed = time.Now()
	b.c, b.err = c, err
	if b.waiting {
		b.waiting = false
		lr.add("waiting", -1)
	}
	switch {
	case err != nil:
		lr.r.log.Debug("line bot failed", "bot", id, "err", err)
		lr.add("dial_failures", 1)
		if b.connected {
			b.connected = false
			lr.add("connected", -1)
			lr.add("dropped", 1)
		}
	case !b.connected:
		b.connected = true // welcomed without waiting in line
		lr.add("connected", 1)
	}
}

// signalDialer is d whose connections call f once the server has sent its
// first bytes (the answer to the upgrade request).
func signalDialer(d *websocket.Dialer, f func()) *websocket.Dialer {
	out := *d
	dial := d.NetDialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	out.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &signalConn{Conn: c, f: f}, nil
	}
	return &out
}

type signalConn struct {
	net.Conn
	f    func()
	done atomic.Bool
}

func (c *signalConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if (n > 0 || err != nil) && !c.done.Load() {
		c.done.Store(true)
		c.f()
	}
	return n, err
}

// changer applies cfg.Change ChangeAt after the first admission; the
// returned channel is closed when it is done (or gave up with ctx).
func (lr *lineRun) changer(ctx context.Context, rep *LineReport) <-chan struct{} {
	done := make(chan struct{})
	if lr.cfg.ChangeAt <= 0 {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		select {
		case <-lr.firstAdmitted:
		case <-ctx.Done():
			lr.changeErr = errors.New("no admission before the end of the run")
			return
		}
		first := time.Unix(0, lr.firstAt.Load())
		t := time.NewTimer(time.Until(first.Add(lr.cfg.ChangeAt)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			lr.changeErr = errors.New("the run ended before -change-at")
			return
		}
		lr.changeSent = time.Now()
		lr.toPhase(phaseChange)
		err := lr.cfg.Admin.Set(ctx, lr.cfg.Change)
		lr.changeDone = time.Now()
		lr.changeErr = err
		lr.r.log.Info("line changed", "setting", lr.cfg.Change.String(), "err", err,
			"took", lr.changeDone.Sub(lr.changeSent).String())
	}()
	return done
}

// stallTick is the period of the stall watcher's ticker.
const stallTick = 10 * time.Millisecond

// watchStalls records, until ctx ends, the longest time a 10 ms ticker of
// this process came late: how long the load tool (and, when they share the
// process, the servers) got no CPU. Timing figures measured across such a
// stall say more about the machine than about the gate.
func (lr *lineRun) watchStalls(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(stallTick)
		defer t.Stop()
		prev := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if late := now.Sub(prev) - stallTick; late > time.Duration(lr.maxStall.Load()) {
					lr.maxStall.Store(int64(late))
				}
				prev = now
			}
		}
	}()
	return done
}

// progress logs the counts every ProgressEvery until ctx ends.
func (lr *lineRun) progress(ctx context.Context, start time.Time) <-chan struct{} {
	done := make(chan struct{})
	every := lr.r.cfg.ProgressEvery
	if every <= 0 {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				lr.r.log.Info("progress", "elapsed", time.Since(start).Round(time.Second).String(),
					"joined", lr.joined.Load(), "admitted", lr.admitted.Load(), "bots", len(lr.bots))
			}
		}
	}()
	return done
}

// closeAll closes every connection, dialParallel at a time. In the run
// file a connection the server had already ended counts as dropped, the
// others as left.
func (lr *lineRun) closeAll() {
	sem := make(chan struct{}, dialParallel)
	var wg sync.WaitGroup
	for i := range lr.bots {
		c := lr.bots[i].c
		if c == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			lr.add("connected", -1)
			select {
			case <-c.Done():
				lr.add("dropped", 1)
			default:
				lr.add("left", 1)
				_ = c.Close()
			}
		})
	}
	wg.Wait()
}
