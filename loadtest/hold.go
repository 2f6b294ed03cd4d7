package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"levee/client"
	"levee/internal/clock"
	"levee/internal/token"
	"levee/loadtest/record"
	leveev1 "levee/proto/leveev1"
)

// HoldConfig is the hold scenario, the memory benchmark's load: Conns
// connections dial (DialParallel handshakes at a time) and are held open
// for Hold, then closed. Against a gate each one is a player waiting in the
// admission line (it counts as held at its first QueueStatus; put the line
// in queueing mode so that nobody is admitted); with Bare each is a plain
// WebSocket that only completes the upgrade and reads (any server, no Levee
// protocol). With PID set it reads that process's resident memory
// (/proc/PID/status VmRSS) before the dials and while the connections are
// held, and reports the memory per held connection.
//
// A player the line lets in during the hold (a paced line) logs in and
// stays connected: it is still held, and counted as admitted. Any
// connection that ends before the hold does, waiting or admitted, is
// dropped.
type HoldConfig struct {
	Conns        int
	DialParallel int
	Hold         time.Duration // how long all connections are held once up
	DialBound    time.Duration // the longest the dials may take in all
	Bare         bool
	PID          int           // the server's process id; 0: no memory figures
	SampleEvery  time.Duration // RSS samples during the hold
	Settle       time.Duration // the part of the hold before the RSS samples count
	// MetricsURL, when set, is the server's /metrics page (loopback), read
	// at the end of the hold for its goroutines and Go memory figures.
	MetricsURL string
	// EndFile, when set, ends the hold early, as if Hold had passed, once
	// a file exists at this path (looked for every SampleEvery): a script
	// running several load processes ends their holds together.
	EndFile string
	// RunFile, when set, also gets the run's common record (-run-file):
	// per second the connections that arrived (began their dial), were
	// connected and waited in line, admissions, dial failures (the
	// report's failures, also the connections never dialed), drops and
	// leaves, the server's RSS as it is sampled (level rss_gate_mb, or
	// rss_server_mb with Bare), and the phases (dial, settle, hold,
	// close); the caller Ends it.
	RunFile *RunFile
}

// DefaultHold is 15,000 connections, 128 handshakes at a time, held 30 s
// (10 s settling first), RSS sampled every 500 ms, dials bounded to 5 min.
func DefaultHold() HoldConfig {
	return HoldConfig{Conns: 15_000, DialParallel: 128, Hold: 30 * time.Second, DialBound: 5 * time.Minute,
		SampleEvery: 500 * time.Millisecond, Settle: 10 * time.Second}
}

// Validate checks the config; errors name the flag.
func (c HoldConfig) Validate() error {
	switch {
	case c.Conns < 1 || c.Conns > MaxBots:
		return scenarioErr("-conns: must be in 1..%d, got %d", MaxBots, c.Conns)
	case c.DialParallel < 1 || c.DialParallel > 10_000:
		return scenarioErr("-dial-parallel: must be in 1..10000, got %d", c.DialParallel)
	case c.Hold <= 0:
		return scenarioErr("-hold: must be > 0, got %v", c.Hold)
	case c.DialBound <= 0:
		return scenarioErr("-bound: must be > 0, got %v", c.DialBound)
	case c.PID < 0:
		return scenarioErr("-target-pid: must be >= 0, got %d", c.PID)
	case c.SampleEvery <= 0:
		return scenarioErr("-sample-every: must be > 0, got %v", c.SampleEvery)
	case c.Settle < 0 || c.Settle >= c.Hold:
		return scenarioErr("-hold-settle: must be in [0, -hold), got %v", c.Settle)
	}
	return nil
}

// HoldReport is what the hold scenario measured.
type HoldReport struct {
	Scenario    string        `json:"scenario"`
	RunID       string        `json:"run_id"`
	Target      string        `json:"target"`
	Bare        bool          `json:"bare"`
	Started     time.Time     `json:"started"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	Interrupted bool          `json:"interrupted"`
	Conns       int           `json:"conns"`
	Held        int           `json:"held"`    // up at the start of the hold
	Dropped     int           `json:"dropped"` // of those, ended before the hold was over
	// DropReasons says why the dropped ones ended (e.g. "close 1006").
	DropReasons map[string]int `json:"drop_reasons"`
	// Admitted is how many of the held the line let in (they stay
	// connected, logged in, and count as held).
	Admitted int            `json:"admitted"`
	Failures map[string]int `json:"failures"` // why the others did not come up
	// The first error seen for each reason of DropReasons and Failures.
	DropExamples    map[string]string `json:"drop_examples"`
	FailureExamples map[string]string `json:"failure_examples"`
	DialTime        time.Duration     `json:"dial_time_ns"`
	Hold            time.Duration     `json:"hold_ns"`
	// HeldFor is how long the hold lasted: Hold, or less when EndFile
	// ended it (EndedByFile) or the run was interrupted.
	HeldFor     time.Duration `json:"held_for_ns"`
	EndedByFile bool          `json:"ended_by_file"`

	PID        int     `json:"pid"`
	RSSBefore  float64 `json:"rss_before_bytes"`
	RSSHeld    float64 `json:"rss_held_bytes"` // median of the samples after Settle
	RSSHeldMax float64 `json:"rss_held_max_bytes"`
	Samples    int     `json:"samples"`
	// PerConn is (RSSHeld - RSSBefore) / Held.
	PerConn float64 `json:"rss_per_conn_bytes"`

	// From MetricsURL at the end of the hold (0 without it): the server's
	// goroutines and its Go heap and stack in use.
	Goroutines float64 `json:"goroutines"`
	HeapInuse  float64 `json:"heap_inuse_bytes"`
	StackInuse float64 `json:"stack_inuse_bytes"`

	Warnings []string `json:"warnings"`
	Passed   bool     `json:"passed"`
}

// RunHold plays the hold scenario. It returns an error only when the run
// could not start; an interrupted run still reports.
func (r *Runner) RunHold(ctx context.Context, cfg HoldConfig) (*HoldReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !r.cfg.AllowNonlocal {
		if err := CheckTarget(ctx, r.cfg.GateURL, r.resolver); err != nil {
			return nil, err
		}
	}
	runID := r.cfg.RunID
	if runID == "" {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(randomUint64()))
		runID = hex.EncodeToString(b[:])
	}
	rep := &HoldReport{Scenario: "hold", RunID: runID, Target: r.cfg.GateURL, Bare: cfg.Bare, Conns: cfg.Conns,
		Hold: cfg.Hold, PID: cfg.PID, Failures: map[string]int{}, DropReasons: map[string]int{}, Started: time.Now(),
		DropExamples: map[string]string{}, FailureExamples: map[string]string{}}
	if cfg.PID > 0 {
		rss, err := ReadRSS(cfg.PID)
		if err != nil {
			return nil, fmt.Errorf("-target-pid: %w", err)
		}
		rep.RSSBefore = rss
	}
	r.log.Info("hold test starting", "run_id", runID, "conns", cfg.Conns, "bare", cfg.Bare, "target", r.cfg.GateURL, "pid", cfg.PID)
	rec, stopRecord := cfg.RunFile.begin(ctx, clock.Real{}, runID)
	defer stopRecord()
	rssLevel := "rss_gate_mb"
	if cfg.Bare {
		rssLevel = "rss_server_mb"
	}
	if rec != nil && cfg.PID > 0 {
		rec.Set(rssLevel, rep.RSSBefore/(1<<20))
	}
	cfg.RunFile.phase("dial")

	// live ends every connection: at the end of the hold, or on interrupt.
	live, endAll := context.WithCancel(ctx)
	defer endAll()
	h := &holdRun{r: r, cfg: cfg, runID: runID, errs: make([]error, cfg.Conns), up: make([]chan struct{}, cfg.Conns),
		ended: make([]atomic.Bool, cfg.Conns), dropErrs: make([]error, cfg.Conns), rec: rec}
	var wg sync.WaitGroup
	h.dialAll(ctx, live, &wg)
	rep.DialTime = time.Since(rep.Started)
	for i, ch := range h.up {
		select {
		case <-ch:
			rep.Held++
		default:
			if h.errs[i] == nil {
				h.errs[i] = errors.New("not up")
				h.add("dial_failures", 1)
			}
			countWithExample(rep.Failures, rep.FailureExamples, h.errs[i])
		}
	}
	r.log.Info("connections held", "held", rep.Held, "failed", Sum(rep.Failures), "took", rep.DialTime.Round(time.Millisecond).String())

	var rss []float64
	holdStart := time.Now()
	hold := time.NewTimer(cfg.Hold)
	defer hold.Stop()
	settled := time.Now().Add(cfg.Settle)
	var settleC <-chan time.Time // the run file's hold phase starts
	if cfg.Settle > 0 {
		cfg.RunFile.phase("settle")
		settleT := time.NewTimer(cfg.Settle)
		defer settleT.Stop()
		settleC = settleT.C
	} else {
		cfg.RunFile.phase("hold")
	}
	tick := time.NewTicker(cfg.SampleEvery)
	defer tick.Stop()
sampling:
	for {
		select {
		case <-hold.C:
			break sampling
		case <-ctx.Done():
			break sampling
		case <-settleC:
			cfg.RunFile.phase("hold")
			settleC = nil
		case <-tick.C:
			if cfg.EndFile != "" {
				if _, err := os.Stat(cfg.EndFile); err == nil {
					rep.EndedByFile = true
					break sampling
				}
			}
			if cfg.PID == 0 || time.Now().Before(settled) {
				continue
			}
			v, err := ReadRSS(cfg.PID)
			if err != nil {
				rep.Warnings = append(rep.Warnings, "reading RSS: "+err.Error())
				break sampling
			}
			rss = append(rss, v)
			if rec != nil {
				rec.Set(rssLevel, v/(1<<20))
			}
		}
	}
	rep.HeldFor = time.Since(holdStart)
	cfg.RunFile.phase("close")
	if cfg.MetricsURL != "" && ctx.Err() == nil {
		if err := h.scrapeGo(ctx, rep); err != nil {
			rep.Warnings = append(rep.Warnings, "-metrics-urls: "+err.Error())
		}
	}
	for i, ch := range h.up {
		select {
		case <-ch:
			if h.ended[i].Load() {
				rep.Dropped++
				countWithExample(rep.DropReasons, rep.DropExamples, h.dropErrs[i])
			}
		default:
		}
	}
	rep.Admitted = int(h.admitted.Load())
	endAll()
	wg.Wait()
	stopRecord()

	rep.Interrupted = ctx.Err() != nil
	rep.Elapsed = time.Since(rep.Started)
	rep.Samples = len(rss)
	if len(rss) > 0 {
		slices.Sort(rss)
		rep.RSSHeld, rep.RSSHeldMax = rss[len(rss)/2], rss[len(rss)-1]
		if rep.Held > 0 {
			rep.PerConn = (rep.RSSHeld - rep.RSSBefore) / float64(rep.Held)
		}
	} else if cfg.PID > 0 {
		rep.Warnings = append(rep.Warnings, "no RSS sample after the settling time")
	}
	rep.Passed = !rep.Interrupted && rep.Held == cfg.Conns && rep.Dropped == 0 && (cfg.PID == 0 || rep.Samples > 0)
	r.log.Info("hold test done", "held", rep.Held, "dropped", rep.Dropped, "admitted", rep.Admitted, "rss_per_conn", rep.PerConn)
	return rep, nil
}

// holdRun is one hold run's shared state.
type holdRun struct {
	r     *Runner
	cfg   HoldConfig
	runID string
	errs  []error         // why connection i did not come up; written by its goroutine before up[i] could be read
	up    []chan struct{} // closed when connection i is held
	ended []atomic.Bool   // connection i ended (before the hold's end or after)
	// dropErrs[i] says why held connection i ended before the hold's end;
	// written by its goroutine before ended[i] is set.
	dropErrs []error
	admitted atomic.Int64     // players the line let in
	rec      *record.Recorder // the run file's, nil for none
}

// add counts a player event in the run file, if any (see record.Recorder.Add).
func (h *holdRun) add(name string, n int64) {
	if h.rec != nil {
		h.rec.Add(name, n)
	}
}

// countUp counts a connection up in the run file: connected, and waiting
// in line unless admitted.
func (h *holdRun) countUp(waiting bool) {
	h.add("connected", 1)
	if waiting {
		h.add("waiting", 1)
	}
}

// countEnd counts the end of a connection that was up in the run file:
// dropped before the hold's end, else left.
func (h *holdRun) countEnd(waiting, dropped bool) {
	h.add("connected", -1)
	if waiting {
		h.add("waiting", -1)
	}
	if dropped {
		h.add("dropped", 1)
	} else {
		h.add("left", 1)
	}
}

// dialAll starts every connection, DialParallel handshakes at a time, and
// returns once each is up or has failed (or DialBound passed). The
// connections' goroutines, counted in wg, keep them until live ends.
func (h *holdRun) dialAll(ctx, live context.Context, wg *sync.WaitGroup) {
	dctx, cancel := context.WithTimeout(ctx, h.cfg.DialBound)
	defer cancel()
	secret := []byte(h.r.cfg.TokenSecret)
	exp := time.Now().Add(h.cfg.DialBound + h.cfg.Hold + 10*time.Minute)
	sem := make(chan struct{}, h.cfg.DialParallel)
	settled := make(chan struct{}, h.cfg.Conns) // one per connection: up or failed
	for i := range h.up {
		h.up[i] = make(chan struct{})
	}
	started := 0
	for n := range h.cfg.Conns {
		select {
		case sem <- struct{}{}:
		case <-dctx.Done():
		}
		if dctx.Err() != nil {
			h.errs[n] = dctx.Err()
			h.add("dial_failures", 1)
			continue
		}
		started++
		h.add("arrived", 1)
		wg.Go(func() {
			var once sync.Once
			settle := func() { once.Do(func() { <-sem; settled <- struct{}{} }) }
			defer settle()
			if h.cfg.Bare {
				h.holdBare(dctx, live, n, settle)
			} else {
				h.holdLine(dctx, live, n, secret, exp, settle)
			}
		})
	}
	// Each settles soon after dctx ends, if not before: a dial not up by
	// then is cancelled.
	for range started {
		<-settled
	}
}

// Go runtime metrics the hold scenario reads.
const (
	metricHeapInuse  = "go_memstats_heap_inuse_bytes"
	metricStackInuse = "go_memstats_stack_inuse_bytes"
)

// scrapeGo reads the server's goroutines, heap and stack in use.
func (h *holdRun) scrapeGo(ctx context.Context, rep *HoldReport) error {
	body, err := getPage(ctx, h.cfg.MetricsURL, h.r.cfg.AllowNonlocal)
	if err != nil {
		return err
	}
	vals, err := ParseMetrics(bytes.NewReader(body), MetricGoroutines, metricHeapInuse, metricStackInuse)
	if err != nil {
		return err
	}
	rep.Goroutines, rep.HeapInuse, rep.StackInuse = vals[MetricGoroutines], vals[metricHeapInuse], vals[metricStackInuse]
	return nil
}

// holdLine is one player waiting in the gate's line until live ends.
func (h *holdRun) holdLine(dctx, live context.Context, n int, secret []byte, exp time.Time, settle func()) {
	tok, err := token.Sign(secret, botID(h.runID, n), exp)
	if err != nil {
		h.errs[n] = err
		h.add("dial_failures", 1)
		return
	}
	// The dial runs until live ends: a waiting player's Dial does not
	// return. Up to its first status it is also bounded by dctx.
	ctx, cancel := context.WithCancel(live)
	defer cancel()
	stop := context.AfterFunc(dctx, func() {
		select {
		case <-h.up[n]:
		default:
			cancel()
		}
	})
	defer stop()
	waiting := false // in line, in the run file (OnQueue runs on this goroutine)
	opts := client.Options{
		JSON: useJSON(n, h.r.cfg.JSONFraction), Dialer: h.r.dialer, Logger: h.r.log, NoRetry: true, NoPacing: true,
		OnQueue: func(*leveev1.QueueStatus) {
			select {
			case <-h.up[n]:
			default:
				close(h.up[n])
				waiting = true
				h.countUp(true)
				settle()
			}
		},
	}
	c, err := client.Dial(ctx, h.r.cfg.GateURL, tok, opts)
	if c != nil {
		// Let in: by a paced line during the hold (after its first
		// status), or at once by a line that was not holding. Either
		// way it is held, logged in, until the hold ends.
		h.admitted.Add(1)
		h.add("admitted", 1)
		if waiting {
			waiting = false
			h.add("waiting", -1)
		}
		select {
		case <-h.up[n]:
		default:
			close(h.up[n])
			h.countUp(false)
			settle()
		}
		dropped := false
		select {
		case <-live.Done():
		case <-c.Done():
			if live.Err() == nil {
				h.dropErrs[n] = c.Err()
				h.ended[n].Store(true) // dropped after admission
				dropped = true
			}
		}
		c.Close()
		h.countEnd(false, dropped)
		return
	}
	select {
	case <-h.up[n]:
		dropped := live.Err() == nil
		if dropped {
			h.dropErrs[n] = err
			h.ended[n].Store(true) // dropped while held
		}
		h.countEnd(waiting, dropped)
	default:
		h.errs[n] = err
		h.add("dial_failures", 1)
	}
}

// holdBare is one plain WebSocket, read until live ends.
func (h *holdRun) holdBare(dctx, live context.Context, n int, settle func()) {
	ws, resp, err := h.r.dialer.DialContext(dctx, h.r.cfg.GateURL, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		h.errs[n] = err
		h.add("dial_failures", 1)
		return
	}
	close(h.up[n])
	h.countUp(false)
	settle()
	readDone := make(chan struct{})
	dropped := false
	go func() {
		defer close(readDone)
		for {
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}()
	select {
	case <-live.Done():
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	case <-readDone:
		h.dropErrs[n] = errBareEnded
		h.ended[n].Store(true)
		dropped = true
	}
	ws.Close()
	<-readDone
	h.countEnd(false, dropped)
}

// countWithExample counts err under its reason and keeps the first error
// of each reason.
func countWithExample(counts map[string]int, examples map[string]string, err error) {
	reason := dialReason(err)
	counts[reason]++
	if _, ok := examples[reason]; !ok && err != nil {
		examples[reason] = err.Error()
	}
}

// errBareEnded is why a bare connection ended before the hold: the
// server closed it (the reader's error says no more).
var errBareEnded = errors.New("ended by the server")

// ReadRSS is a process's resident memory in bytes, from /proc/PID/status
// (VmRSS).
func ReadRSS(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("/proc/%d/status: odd VmRSS line %q", pid, line)
			}
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// writeExamples writes one line per reason, in order: "kind, reason: error".
func writeExamples(b *strings.Builder, kind string, examples map[string]string) {
	for _, reason := range slices.Sorted(maps.Keys(examples)) {
		fmt.Fprintf(b, "first %s, %s: %s\n", kind, reason, examples[reason])
	}
}

// WriteJSON writes the report as indented JSON.
func (r *HoldReport) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// WriteTable writes the report for people.
func (r *HoldReport) WriteTable(w io.Writer) error {
	var b strings.Builder
	kind := "players waiting in the gate's line"
	if r.Bare {
		kind = "bare WebSocket connections"
	}
	fmt.Fprintf(&b, "levee hold test: run %s, target %s, elapsed %v", r.RunID, r.Target, r.Elapsed.Round(time.Millisecond))
	if r.Interrupted {
		b.WriteString(", INTERRUPTED")
	}
	fmt.Fprintf(&b, "\n%d %s, up in %v, held %v", r.Conns, kind, r.DialTime.Round(time.Millisecond), r.HeldFor.Round(time.Millisecond))
	if r.EndedByFile {
		b.WriteString(" (ended by -hold-end-file)")
	}
	fmt.Fprintf(&b, "\nheld %d, dropped %d%s, failed %d%s", r.Held, r.Dropped, paren(r.DropReasons), Sum(r.Failures), paren(r.Failures))
	if r.Admitted > 0 {
		fmt.Fprintf(&b, "; of the held, admitted %d (let in by the line, still connected unless dropped)", r.Admitted)
	}
	b.WriteString("\n")
	if r.PID > 0 {
		fmt.Fprintf(&b, "server pid %d: RSS before %s, held %s (median of %d samples, max %s); %.2f KiB per connection\n",
			r.PID, mib(r.RSSBefore), mib(r.RSSHeld), r.Samples, mib(r.RSSHeldMax), r.PerConn/1024)
	}
	if r.Goroutines > 0 && r.Held > 0 {
		n := float64(r.Held)
		fmt.Fprintf(&b, "server's Go runtime at the end: %.0f goroutines (%.2f per connection), heap in use %s (%.2f KiB per connection), stacks %s (%.2f KiB per connection)\n",
			r.Goroutines, r.Goroutines/n, mib(r.HeapInuse), r.HeapInuse/n/1024, mib(r.StackInuse), r.StackInuse/n/1024)
	}
	writeExamples(&b, "dropped", r.DropExamples)
	writeExamples(&b, "failed", r.FailureExamples)
	for _, s := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", s)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
