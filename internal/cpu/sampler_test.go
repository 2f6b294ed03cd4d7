package cpu

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/testwait"
)

// fakeCPU is a scripted CPU-time reader.
type fakeCPU struct {
	mu   sync.Mutex
	used time.Duration
	err  error
}

func (f *fakeCPU) read() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.used, f.err
}

func (f *fakeCPU) add(d time.Duration) {
	f.mu.Lock()
	f.used += d
	f.mu.Unlock()
}

func (f *fakeCPU) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// oneCPURoot returns a cgroup root that limits the process to one CPU.
func oneCPURoot(t *testing.T) string {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "cpu.max"), "100000 100000\n")
	return root
}

func newTestSampler(t *testing.T, halfLife time.Duration) (*Sampler, *clock.Fake, *fakeCPU) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1000, 0))
	cpu := &fakeCPU{used: 7 * time.Second} // baseline: time used before NewSampler
	s, err := NewSampler(Options{Clock: clk, CPUTime: cpu.read, CgroupRoot: oneCPURoot(t), HalfLife: halfLife})
	if err != nil {
		t.Fatal(err)
	}
	return s, clk, cpu
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestSampleEWMA(t *testing.T) {
	// With the sampling gap equal to the half-life each new value has
	// weight 1/2.
	s, clk, cpu := newTestSampler(t, time.Second)
	if got := s.Utilization(); got != 0 {
		t.Fatalf("before any sample: %v, want 0", got)
	}
	if got := s.AllowedCPUs(); got != 1 {
		t.Fatalf("AllowedCPUs = %v, want 1", got)
	}
	steps := []struct {
		busy time.Duration // CPU time used during the second
		want float64
	}{
		{time.Second, 0.5},                 // 100 %: 0 + (1-0)/2
		{time.Second, 0.75},                // 100 %
		{500 * time.Millisecond, 0.625},    // 50 %
		{3 * time.Second, 0.8125},          // more than allowed: clamped to 1
		{0, 0.40625},                       // idle
		{250 * time.Millisecond, 0.328125}, // 25 %
	}
	for i, st := range steps {
		cpu.add(st.busy)
		clk.Advance(time.Second)
		if err := s.Sample(clk.Now()); err != nil {
			t.Fatal(err)
		}
		if got := s.Utilization(); !near(got, st.want) {
			t.Fatalf("step %d: Utilization = %v, want %v", i, got, st.want)
		}
	}
}

func TestSampleAgainstAllowedCPUs(t *testing.T) {
	// Half a CPU allowed: 250 ms of CPU in one second is 50 %.
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "cpu.max"), "50000 100000")
	clk := clock.NewFake(time.Unix(0, 0))
	cpu := &fakeCPU{}
	s, err := NewSampler(Options{Clock: clk, CPUTime: cpu.read, CgroupRoot: root, HalfLife: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	cpu.add(250 * time.Millisecond)
	clk.Advance(time.Second)
	if err := s.Sample(clk.Now()); err != nil {
		t.Fatal(err)
	}
	// A 1 ns half-life makes the EWMA follow the raw value.
	if got := s.Utilization(); !near(got, 0.5) {
		t.Fatalf("Utilization = %v, want 0.5", got)
	}
	if got := s.AllowedCPUs(); got != 0.5 {
		t.Fatalf("AllowedCPUs = %v, want 0.5", got)
	}
}

func TestSampleHalfLifeIsInWallTime(t *testing.T) {
	// Four samples 250 ms apart weigh the same as one sample 1 s apart.
	a, clkA, cpuA := newTestSampler(t, time.Second)
	for range 4 {
		cpuA.add(250 * time.Millisecond)
		clkA.Advance(250 * time.Millisecond)
		if err := a.Sample(clkA.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.Utilization(); !near(got, 0.5) {
		t.Fatalf("Utilization = %v, want 0.5", got)
	}
}

func TestSampleIgnoresNonAdvancingTimeAndErrors(t *testing.T) {
	s, clk, cpu := newTestSampler(t, time.Second)
	cpu.add(time.Second)
	if err := s.Sample(clk.Now()); err != nil { // no wall time has passed
		t.Fatal(err)
	}
	if got := s.Utilization(); got != 0 {
		t.Fatalf("Utilization = %v, want 0", got)
	}
	boom := errors.New("boom")
	cpu.fail(boom)
	clk.Advance(time.Second)
	if err := s.Sample(clk.Now()); !errors.Is(err, ErrCPUTime) || !errors.Is(err, boom) {
		t.Fatalf("Sample error = %v, want ErrCPUTime wrapping boom", err)
	}
	cpu.fail(nil)
	// The failed sample did not move the baseline: the second of CPU is
	// spread over the two seconds since it.
	clk.Advance(time.Second)
	if err := s.Sample(clk.Now()); err != nil {
		t.Fatal(err)
	}
	// raw 0.5 over a 2 s gap: alpha = 1 - 0.5^2 = 0.75.
	if got := s.Utilization(); !near(got, 0.375) {
		t.Fatalf("Utilization = %v, want 0.375", got)
	}
}

func TestNewSamplerErrors(t *testing.T) {
	boom := errors.New("boom")
	_, err := NewSampler(Options{CPUTime: func() (time.Duration, error) { return 0, boom }})
	if !errors.Is(err, ErrCPUTime) || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want ErrCPUTime wrapping boom", err)
	}
	if _, err := NewSampler(Options{CPUTime: (&fakeCPU{}).read, HalfLife: -time.Second}); err == nil {
		t.Fatal("negative HalfLife accepted")
	}
}

func TestRunSamplesOnTicksAndStopsOnCancel(t *testing.T) {
	s, clk, cpu := newTestSampler(t, time.Nanosecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx, 100*time.Millisecond)
	}()
	testwait.Until(t, "the ticker", func() bool { return clk.Waiters() == 1 })

	// One tick with 60 ms of CPU in 100 ms on one CPU.
	cpu.add(60 * time.Millisecond)
	clk.Advance(100 * time.Millisecond)
	testwait.Until(t, "utilisation 0.6", func() bool { return near(s.Utilization(), 0.6) })

	cancel()
	testwait.Until(t, "Run to return", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if n := clk.Waiters(); n != 0 {
		t.Fatalf("ticker not stopped: %d waiters", n)
	}
}

func TestRunReportsErrors(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	cpu := &fakeCPU{}
	errs := make(chan error, 10)
	s, err := NewSampler(Options{Clock: clk, CPUTime: cpu.read, CgroupRoot: t.TempDir(),
		OnError: func(err error) { errs <- err }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx, 0) }()
	testwait.Until(t, "the ticker", func() bool { return clk.Waiters() == 1 })
	cpu.fail(errors.New("gone"))
	clk.Advance(DefaultInterval)
	var got error
	testwait.Until(t, "OnError", func() bool {
		select {
		case got = <-errs:
			return true
		default:
			return false
		}
	})
	if !errors.Is(got, ErrCPUTime) {
		t.Fatalf("OnError got %v", got)
	}
	cancel()
	<-done
}

func TestProcessCPUTimeGrows(t *testing.T) {
	read, err := processCPUTime()
	if err != nil {
		t.Fatal(err)
	}
	start, err := read()
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the reader sees it (its resolution is a clock tick).
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for {
		for i := range 1_000_000 {
			x += i
		}
		now, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if now > start {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stuck at %v", start)
		}
	}
	_ = x
}

func TestNewSamplerRealReader(t *testing.T) {
	s, err := NewSampler(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a := s.AllowedCPUs(); a <= 0 {
		t.Fatalf("AllowedCPUs = %v", a)
	}
}
