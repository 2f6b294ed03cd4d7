// Package cpu measures how busy this process keeps the CPU it may actually
// use: its own CPU time (user + system, read with gopsutil) over wall time,
// divided by the CPUs it is allowed (the container's cgroup CPU limit, else
// GOMAXPROCS; never the host's core count when a limit exists), clamped to
// [0, 1] and smoothed with an exponentially weighted moving average.
//
// One goroutine owns the sampling (Run); any number of readers call
// Utilization, which is a single atomic load.
package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

const (
	// DefaultInterval is the sampling period Run uses when given a
	// non-positive one.
	DefaultInterval = 250 * time.Millisecond

	// DefaultHalfLife is the EWMA half-life: after a step change in load the
	// smoothed value covers half of the step in one second, 80 % of it in
	// about 2.3 s and 94 % in 4 s. go-zero's decay of 0.95 per 250 ms sample
	// is a half-life of about 3.4 s (80 % after about 7.8 s), too slow for a
	// launch-day surge that goes from 2,000 to 80,000 players in ten seconds;
	// much shorter would let one busy GC cycle trip the throttle and the
	// shedder. The half-life is in wall time, so the smoothing does not
	// depend on the sampling interval or on late ticks.
	DefaultHalfLife = time.Second
)

// ErrCPUTime wraps a failure to read the process's CPU time.
var ErrCPUTime = errors.New("cpu: reading process CPU time")

// Options configures a Sampler; the zero value samples this process on the
// wall clock.
type Options struct {
	// Clock is the time source; nil means clock.Real{}.
	Clock clock.Clock
	// CPUTime returns the CPU time (user + system) this process has used so
	// far; nil means read it with gopsutil (/proc/self/stat on Linux).
	CPUTime func() (time.Duration, error)
	// CgroupRoot is where the cgroup files are read from; "" means
	// DefaultCgroupRoot.
	CgroupRoot string
	// HalfLife of the EWMA; 0 means DefaultHalfLife.
	HalfLife time.Duration
	// OnError, if set, is called by Run with each failed sample.
	OnError func(error)
}

// Sampler keeps the smoothed CPU utilisation of this process.
type Sampler struct {
	clk      clock.Clock
	cpuTime  func() (time.Duration, error)
	root     string
	halfLife time.Duration
	onError  func(error)

	mu       sync.Mutex // serialises Sample
	lastWall time.Time
	lastCPU  time.Duration
	smoothed float64

	util    atomic.Uint64 // math.Float64bits of smoothed
	allowed atomic.Uint64 // math.Float64bits of the last AllowedCPUs
}

// NewSampler returns a Sampler whose baseline is the CPU time used so far. It
// fails if the CPU time cannot be read or HalfLife is negative.
func NewSampler(opts Options) (*Sampler, error) {
	if opts.HalfLife < 0 {
		return nil, fmt.Errorf("cpu: HalfLife must be >= 0, got %v", opts.HalfLife)
	}
	s := &Sampler{
		clk:      opts.Clock,
		cpuTime:  opts.CPUTime,
		root:     opts.CgroupRoot,
		halfLife: opts.HalfLife,
		onError:  opts.OnError,
	}
	if s.clk == nil {
		s.clk = clock.Real{}
	}
	if s.root == "" {
		s.root = DefaultCgroupRoot
	}
	if s.halfLife == 0 {
		s.halfLife = DefaultHalfLife
	}
	if s.cpuTime == nil {
		read, err := processCPUTime()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCPUTime, err)
		}
		s.cpuTime = read
	}
	used, err := s.cpuTime()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCPUTime, err)
	}
	s.lastWall, s.lastCPU = s.clk.Now(), used
	s.allowed.Store(math.Float64bits(AllowedCPUs(s.root)))
	return s, nil
}

// Run samples every interval (DefaultInterval if interval <= 0), ticking on
// the Sampler's clock, until ctx is done. Call it from one goroutine.
func (s *Sampler) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := s.clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := s.Sample(s.clk.Now()); err != nil && s.onError != nil {
				s.onError(err)
			}
		}
	}
}

// Sample takes one sample at now: the CPU time used since the previous sample
// over the wall time since then and the allowed CPUs, folded into the EWMA.
// A now that is not after the previous sample is ignored. Run calls it; tests
// call it directly.
func (s *Sampler) Sample(now time.Time) error {
	used, err := s.cpuTime()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCPUTime, err)
	}
	allowed := AllowedCPUs(s.root)
	s.allowed.Store(math.Float64bits(allowed))

	s.mu.Lock()
	defer s.mu.Unlock()
	wall := now.Sub(s.lastWall)
	if wall <= 0 {
		return nil
	}
	delta := used - s.lastCPU
	s.lastWall, s.lastCPU = now, used
	u := 0.0
	if delta > 0 && allowed > 0 {
		u = min(delta.Seconds()/(wall.Seconds()*allowed), 1)
	}
	// Weight of the new value for a gap of wall: 1 - 0.5^(wall/halfLife).
	alpha := 1 - math.Exp2(-wall.Seconds()/s.halfLife.Seconds())
	s.smoothed += alpha * (u - s.smoothed)
	s.util.Store(math.Float64bits(s.smoothed))
	return nil
}

// Utilization returns the smoothed utilisation in [0, 1] of the CPUs this
// process may use; 0 until the first sample after NewSampler.
func (s *Sampler) Utilization() float64 { return math.Float64frombits(s.util.Load()) }

// AllowedCPUs returns the CPUs the last sample measured against.
func (s *Sampler) AllowedCPUs() float64 { return math.Float64frombits(s.allowed.Load()) }
