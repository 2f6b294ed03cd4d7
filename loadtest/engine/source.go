package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/loadtest/record"
	"github.com/leveehq/levee/loadtest/scenario"
	"github.com/leveehq/levee/loadtest/target"
)

// flushEvery is how often a source hands on its finished seconds.
const flushEvery = 250 * time.Millisecond

// source is where points come from: the players of this process, or a
// worker process.
type source interface {
	run(ctx context.Context, src int, out chan<- sourcePoint)
	warnings() []string
	result() sourceResult // once run has returned
}

// sourceResult is what a source tells at its end.
type sourceResult struct {
	Peak    int     `json:"peak"`   // most players it held at once
	Capped  int64   `json:"capped"` // arrivals it could not start (its cap)
	Entries []entry `json:"entries,omitempty"`
}

func (r *run) startSources(ctx context.Context) ([]source, error) {
	if r.pool != nil {
		r.pool.start = r.start
		return []source{r.pool}, nil
	}
	n := r.cfg.Workers
	if n == 1 {
		dc, err := r.driverConfig(0, 1, r.sourceAddr(0))
		if err != nil {
			return nil, err
		}
		return []source{&local{dc: dc, start: r.start}}, nil
	}
	exe := r.cfg.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("engine: finding this binary to start workers: %w", err)
		}
	}
	var out []source
	for i := range n {
		spec := workerSpec{
			Scenario: r.cfg.Name, Overrides: r.cfg.Overrides, File: r.cfg.Scenario.File,
			Index: i, Count: n, Cap: r.cfg.PerWorker,
			Gates: r.cfg.Gates, Secret: r.cfg.TokenSecret, KeyID: r.cfg.TokenKeyID, RunID: r.cfg.RunID, Seed: r.seed,
			Start: r.start, SourceAddr: r.sourceAddr(i), AllowNonlocal: r.cfg.AllowNonlocal, TLS: r.cfg.TLS,
		}
		out = append(out, &worker{exe: exe, spec: spec, log: r.cfg.Log})
	}
	return out, nil
}

func (r *run) sourceAddr(i int) string {
	if len(r.cfg.SourceAddrs) == 0 {
		return ""
	}
	return r.cfg.SourceAddrs[i%len(r.cfg.SourceAddrs)]
}

func (r *run) driverConfig(index, count int, source string) (driverConfig, error) {
	dialer, err := target.NewDialer(r.p.timeout, source, r.cfg.AllowNonlocal)
	if err != nil {
		return driverConfig{}, err
	}
	dialers, err := r.cfg.TLS.Dialers(dialer, r.cfg.Gates)
	if err != nil {
		return driverConfig{}, err
	}
	return driverConfig{
		plan: r.p, gates: r.cfg.Gates, secret: []byte(r.cfg.TokenSecret), keyID: r.cfg.TokenKeyID, runID: r.cfg.RunID, seed: r.seed,
		index: index, count: count, cap: r.cfg.PerWorker, dialer: dialer, dialers: dialers, clock: r.cfg.Clock, log: r.cfg.Log,
	}, nil
}

// local runs the players in this process.
type local struct {
	dc    driverConfig
	start time.Time
	res   sourceResult
}

func (l *local) run(ctx context.Context, src int, out chan<- sourcePoint) {
	defer func() { out <- sourcePoint{src: src, done: true} }()
	l.res = drive(ctx, l.dc, l.start, func(p record.Point) { out <- sourcePoint{src: src, p: p} })
}

func (l *local) warnings() []string   { return capWarning(l.res.Capped, 0) }
func (l *local) result() sourceResult { return l.res }

func capWarning(capped int64, worker int) []string {
	if capped == 0 {
		return nil
	}
	return []string{fmt.Sprintf("worker %d: %d arrivals were not started: the worker's cap of players was reached", worker, capped)}
}

// drive runs a driver with its recorder and hands every finished second
// to emit, until the players are done.
func drive(ctx context.Context, dc driverConfig, start time.Time, emit func(record.Point)) sourceResult {
	rec := record.New(start)
	d := newDriver(dc, rec, start)
	pump(dc.clock, rec, func() { d.Run(ctx) }, emit)
	d.mu.Lock()
	defer d.mu.Unlock()
	return sourceResult{Peak: d.peak, Capped: d.capped, Entries: d.entries}
}

// pump runs body and, until it returns, hands rec's finished seconds to
// emit every flushEvery (with the load process's own CPU each second);
// then the rest.
func pump(clk clock.Clock, rec *record.Recorder, body func(), emit func(record.Point)) {
	done := make(chan struct{})
	go func() { defer close(done); body() }()
	t := clk.NewTicker(flushEvery)
	defer t.Stop()
	cpu := newSelfCPU()
	var cpuAt time.Time
	for {
		select {
		case <-done:
			for _, p := range rec.Close(clk.Now()) {
				emit(p)
			}
			return
		case <-t.C():
			now := clk.Now()
			if now.Sub(cpuAt) >= time.Second {
				cpuAt = now
				if v, ok := cpu.rate(now); ok {
					rec.Set("cpu_loadtest", v)
				}
			}
			for _, p := range rec.Flush(now) {
				emit(p)
			}
		}
	}
}

// workerSpec is what a worker process is told on its stdin.
type workerSpec struct {
	Scenario      string     `json:"scenario"`
	File          string     `json:"file"`
	Overrides     []string   `json:"overrides"`
	Index         int        `json:"index"`
	Count         int        `json:"count"`
	Cap           int        `json:"cap"`
	Gates         []string   `json:"gates"`
	Secret        string     `json:"secret"`
	KeyID         string     `json:"key_id"`
	RunID         string     `json:"run_id"`
	Seed          uint64     `json:"seed"`
	Start         time.Time  `json:"start"`
	SourceAddr    string     `json:"source_addr"`
	AllowNonlocal bool       `json:"allow_nonlocal"`
	TLS           target.TLS `json:"tls"`
}

// workerLine is one line a worker writes on its stdout.
type workerLine struct {
	Point *record.Point `json:"point,omitempty"`
	Done  *sourceResult `json:"done,omitempty"`
	Error string        `json:"error,omitempty"`
}

// worker is a worker process's source.
type worker struct {
	exe  string
	spec workerSpec
	log  *slog.Logger

	mu   sync.Mutex
	warn []string
	res  sourceResult
}

func (w *worker) result() sourceResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.res
}

func (w *worker) warnings() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.warn
}

func (w *worker) note(format string, args ...any) {
	w.mu.Lock()
	w.warn = append(w.warn, fmt.Sprintf("worker %d: ", w.spec.Index)+fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

func (w *worker) run(ctx context.Context, src int, out chan<- sourcePoint) {
	defer func() { out <- sourcePoint{src: src, done: true} }()
	spec, _ := json.Marshal(w.spec)
	cmd := exec.CommandContext(ctx, w.exe, "worker")
	cmd.Stdin = strings.NewReader(string(spec) + "\n")
	var stderr tail
	cmd.Stderr = &stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		w.note("%v", err)
		return
	}
	if err := cmd.Start(); err != nil {
		w.note("starting %s worker: %v", w.exe, err)
		return
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	finished := false
	for sc.Scan() {
		var l workerLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			w.note("bad line from the worker: %v", err)
			continue
		}
		switch {
		case l.Point != nil:
			out <- sourcePoint{src: src, p: *l.Point}
		case l.Error != "":
			w.note("%s", l.Error)
		case l.Done != nil:
			finished = true
			w.mu.Lock()
			w.res = *l.Done
			w.mu.Unlock()
			if l.Done.Capped > 0 {
				w.note("%d arrivals were not started: the worker's cap of %d players was reached", l.Done.Capped, w.spec.Cap)
			}
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil && ctx.Err() == nil {
		w.note("exited: %v; last output: %s", err, stderr.String())
	} else if !finished && ctx.Err() == nil {
		w.note("ended without finishing; last output: %s", stderr.String())
	}
}

// tail keeps the last 2 KiB written to it.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2048 {
		t.b = t.b[len(t.b)-2048:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// Worker is the `loadtest worker` process: it reads its spec from stdin,
// plays its share of the players and writes its points to stdout, one
// JSON line each, then a done line. ctx ends it early (SIGTERM).
func Worker(ctx context.Context, gm Game, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	var spec workerSpec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		return fmt.Errorf("worker: reading the spec on stdin: %w", err)
	}
	name := spec.Scenario
	if spec.File != "" && !strings.HasPrefix(spec.File, "preset:") {
		name = spec.File
	}
	sc, err := scenario.Load(name, spec.Overrides)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	p, err := newPlan(sc, gm)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	r := &run{cfg: Config{Scenario: sc, Gates: spec.Gates, TokenSecret: spec.Secret, TokenKeyID: spec.KeyID, AllowNonlocal: spec.AllowNonlocal, TLS: spec.TLS,
		PerWorker: spec.Cap, RunID: spec.RunID, Log: log, Game: gm}, p: p, seed: spec.Seed}
	if r.cfg.PerWorker <= 0 {
		r.cfg.PerWorker = DefaultPerWorker
	}
	r.cfg.Clock = clock.Real{}
	dc, err := r.driverConfig(spec.Index, spec.Count, spec.SourceAddr)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	enc := json.NewEncoder(stdout)
	var mu sync.Mutex
	var werr error
	emit := func(pt record.Point) {
		mu.Lock()
		defer mu.Unlock()
		if werr == nil {
			werr = enc.Encode(workerLine{Point: &pt})
		}
	}
	if err := clock.Sleep(ctx, clock.Real{}, time.Until(spec.Start)); err != nil {
		return err
	}
	res := drive(ctx, dc, spec.Start, emit)
	if werr != nil {
		return fmt.Errorf("worker: writing points: %w", werr)
	}
	if err := enc.Encode(workerLine{Done: &res}); err != nil {
		return errors.Join(errors.New("worker: writing the end"), err)
	}
	return nil
}
