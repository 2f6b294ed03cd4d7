package loadtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"levee/client"
	"levee/internal/clock"
	"levee/internal/token"
	"levee/loadtest/target"
)

// RunnerConfig says where and how bots connect and how long a request may
// take; it is the same for every scenario.
type RunnerConfig struct {
	GateURL        string
	TokenSecret    string // the gate's token signing secret
	AllowNonlocal  bool   // allow a target that is not loopback (never used)
	RequestTimeout time.Duration
	DialTimeout    time.Duration // 0 means RequestTimeout
	JSONFraction   float64       // share of bots that speak protojson
	Seed           uint64        // 0 picks one at random (reported)
	RunID          string        // names the bots' players; "" picks one at random
	ProgressEvery  time.Duration // log progress this often; 0 never
	// SourceAddr, when set, is the loopback address the bots' connections
	// come from (the dialer's LocalAddr): one per load process spreads
	// their ephemeral ports, about 28,000 per source address and
	// destination, over several addresses.
	SourceAddr string
}

// DefaultRunnerConfig targets a gate on this machine's port 8080.
func DefaultRunnerConfig() RunnerConfig {
	return RunnerConfig{
		GateURL:        "ws://127.0.0.1:8080/ws",
		TokenSecret:    "levee-dev-secret",
		RequestTimeout: 5 * time.Second,
		JSONFraction:   0.1,
		ProgressEvery:  5 * time.Second,
	}
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9]{1,16}$`)

// Validate checks the config; errors name the flag.
func (c RunnerConfig) Validate() error {
	u, err := url.Parse(c.GateURL)
	switch {
	case err != nil:
		return fmt.Errorf("-gate-url: %v", err)
	case u.Scheme != "ws" && u.Scheme != "wss":
		return fmt.Errorf("-gate-url: scheme must be ws or wss, got %q", c.GateURL)
	case u.Hostname() == "":
		return fmt.Errorf("-gate-url: no host in %q", c.GateURL)
	case c.TokenSecret == "":
		return fmt.Errorf("-token-secret: must not be empty")
	case c.RequestTimeout <= 0:
		return fmt.Errorf("-request-timeout: must be > 0, got %v", c.RequestTimeout)
	case c.DialTimeout < 0:
		return fmt.Errorf("-dial-timeout: must be >= 0, got %v", c.DialTimeout)
	case c.JSONFraction < 0 || c.JSONFraction > 1:
		return fmt.Errorf("-json-fraction: must be in [0, 1], got %v", c.JSONFraction)
	case c.RunID != "" && !runIDPattern.MatchString(c.RunID):
		return fmt.Errorf("-run-id: must be 1..16 of [A-Za-z0-9], got %q", c.RunID)
	case c.ProgressEvery < 0:
		return fmt.Errorf("-progress: must be >= 0, got %v", c.ProgressEvery)
	}
	if c.SourceAddr != "" {
		if _, err := target.ParseSourceAddr(c.SourceAddr); err != nil {
			return err
		}
	}
	return nil
}

// Runner runs scenarios against one gate.
type Runner struct {
	cfg      RunnerConfig
	log      *slog.Logger
	resolver Resolver
	dialer   *websocket.Dialer
}

// NewRunner validates cfg. The loopback check happens in Run.
func NewRunner(cfg RunnerConfig, logger *slog.Logger) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = cfg.RequestTimeout
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dialer, err := target.NewDialer(cfg.DialTimeout, cfg.SourceAddr, cfg.AllowNonlocal)
	if err != nil {
		return nil, err
	}
	return &Runner{
		cfg:      cfg,
		log:      logger,
		resolver: net.DefaultResolver,
		dialer:   dialer,
	}, nil
}

// Run plays sc and reports. It returns an error only when the run could not
// start (an invalid scenario, a target that is not loopback); an interrupted
// run (ctx cancelled) still reports, with Interrupted set.
//
// Bounds: no bot starts and no request is sent after sc.Duration; a request
// in flight then ends within RequestTimeout; at most sc.MaxRequests requests.
func (r *Runner) Run(ctx context.Context, sc Scenario) (*Report, error) {
	return r.RunRecorded(ctx, sc, nil)
}

// RunRecorded is Run that also records the run into rf (nil: none): every
// request, the bots' arrivals, connections and failed dials, per second,
// in one phase "run" (the caller Ends rf).
func (r *Runner) RunRecorded(ctx context.Context, sc Scenario, rf *RunFile) (*Report, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if !r.cfg.AllowNonlocal {
		if err := CheckTarget(ctx, r.cfg.GateURL, r.resolver); err != nil {
			return nil, err
		}
	}
	seed := r.cfg.Seed
	if seed == 0 {
		seed = randomUint64()
	}
	runID := r.cfg.RunID
	if runID == "" {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(randomUint64()))
		runID = hex.EncodeToString(b[:])
	}

	start := time.Now()
	deadline := start.Add(sc.Duration)
	stopCtx, stop := context.WithDeadline(ctx, deadline)
	defer stop()
	secret := []byte(r.cfg.TokenSecret)
	exp := deadline.Add(r.cfg.RequestTimeout + 10*time.Minute)
	rec := newRecorder(sc.MaxRequests)
	rr, stopRecord := rf.begin(ctx, clock.Real{}, runID)
	defer stopRecord()
	rec.rr = rr
	rf.phase("run")

	r.log.Info("load test starting", "scenario", sc.Name, "run_id", runID, "seed", seed, "bots", sc.Bots,
		"duration", sc.Duration.String(), "target", r.cfg.GateURL)
	progressDone := r.progress(stopCtx, rec, start)

	order := arrivalOrder(sc)
	var wg sync.WaitGroup
	arrived := 0
	timer := time.NewTimer(0)
	<-timer.C
launch:
	for _, n := range order {
		at := start.Add(sc.Arrivals(n, sc.Bots))
		if !at.Before(deadline) {
			break
		}
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-stopCtx.Done():
				timer.Stop()
				break launch
			}
		}
		arrived++
		rec.add("arrived", 1)
		wg.Go(func() {
			r.runBot(ctx, stopCtx, sc, n, runID, seed, secret, exp, rec)
		})
	}
	wg.Wait()
	stop()
	<-progressDone
	stopRecord()

	rep := rec.report()
	rep.Scenario, rep.RunID, rep.Seed, rep.Target = sc.Name, runID, seed, r.cfg.GateURL
	rep.Started, rep.Elapsed = start, time.Since(start)
	rep.Interrupted = ctx.Err() != nil
	rep.Bots, rep.Arrived = sc.Bots, arrived
	if s := rep.Elapsed.Seconds(); s > 0 {
		rep.Throughput = float64(rep.Answered) / s
	}
	r.log.Info("load test done", "sent", rep.Sent, "answered", rep.Answered, "lost", Sum(rep.Lost),
		"elapsed", rep.Elapsed.Round(time.Millisecond).String(), "passed", rep.Passed())
	return rep, nil
}

// arrivalOrder is the bots' ranks sorted by arrival time.
func arrivalOrder(sc Scenario) []int {
	order := make([]int, sc.Bots)
	at := make([]time.Duration, sc.Bots)
	for i := range order {
		order[i] = i
		at[i] = sc.Arrivals(i, sc.Bots)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(at[a], at[b]) })
	return order
}

// runBot is one bot's life: token, dial, behaviour, close.
func (r *Runner) runBot(ctx, stopCtx context.Context, sc Scenario, n int, runID string, seed uint64, secret []byte, exp time.Time, rec *recorder) {
	id := botID(runID, n)
	// The dial is not cut by the run's deadline: once started it ends, within
	// DialTimeout, so that it is counted honestly.
	c, err := r.dialBot(ctx, id, n, secret, exp, client.Options{})
	rec.dial(err)
	if err != nil {
		r.log.Debug("dial failed", "bot", id, "err", err)
		return
	}
	b := &Bot{
		N: n, ID: id, Client: c,
		Rand:    mrand.New(mrand.NewPCG(seed, uint64(n))),
		stop:    stopCtx,
		req:     ctx,
		timeout: r.cfg.RequestTimeout,
		rec:     rec,
	}
	sc.Behaviour.Run(b)
	select {
	case <-c.Done():
		rec.disconnect(c.Err())
		r.log.Debug("connection lost", "bot", id, "err", c.Err())
	default:
	}
	c.Close()
	rec.add("connected", -1)
	rec.clientStats(c.Stats())
}

func botID(runID string, n int) string { return fmt.Sprintf("bot-%s-%d", runID, n) }

// dialBot signs bot n's token and connects it within DialTimeout, with opts
// plus the runner's dialer, logger and the bot's share of JSON.
func (r *Runner) dialBot(ctx context.Context, id string, n int, secret []byte, exp time.Time, opts client.Options) (*client.Client, error) {
	tok, err := token.Sign(secret, id, exp)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, r.cfg.DialTimeout)
	defer cancel()
	opts.JSON = useJSON(n, r.cfg.JSONFraction)
	opts.Dialer = r.dialer
	opts.Logger = r.log
	return client.Dial(dctx, r.cfg.GateURL, tok, opts)
}

// useJSON picks exactly round(fraction*bots) bots, spread evenly.
func useJSON(n int, fraction float64) bool {
	return int(float64(n+1)*fraction) > int(float64(n)*fraction)
}

// progress logs the running counts every ProgressEvery until ctx ends; the
// returned channel is closed when it has stopped.
func (r *Runner) progress(ctx context.Context, rec *recorder, start time.Time) <-chan struct{} {
	done := make(chan struct{})
	if r.cfg.ProgressEvery <= 0 {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		t := time.NewTicker(r.cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				rec.mu.Lock()
				sent, answered, connected := rec.sent, rec.answered, rec.connected
				rec.mu.Unlock()
				r.log.Info("progress", "elapsed", time.Since(start).Round(time.Second).String(), "connected", connected,
					"sent", sent, "answered", answered)
			}
		}
	}()
	return done
}

func randomUint64() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("loadtest: crypto/rand: " + err.Error())
	}
	if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
		return v
	}
	return 1
}
