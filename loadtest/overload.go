package loadtest

import (
	"fmt"
	"strings"
	"time"
)

// OverloadConfig is the overload scenario's knobs (the flags of
// cmd/loadtest with -scenario overload). The run has three phases over one
// set of connections:
//
//  1. capacity: a closed loop with CapacityConcurrency requests outstanding
//     for CapacityTime (a refused request's worker first waits the
//     retry_after it was given); C0 is served replies per second;
//     then, from that C0, a stepped open-loop search (CapacityStepTime a
//     step, at most CapacitySearchTime in all), up from C0 when C0 holds
//     and down when it does not: C is the served rate of the best step
//     that held (see capacitySearch);
//  2. baseline: an open loop at BaselineFactor × C for PhaseTime;
//  3. overload: an open loop at OverloadFactor × C for OverloadTime.
//
// Every request is a start_battle of Units × Ticks (DEFAULT criticality) or,
// for CriticalFraction of them, the purchase of one Item (CRITICAL).
type OverloadConfig struct {
	Conns               int
	Units, Ticks        uint32
	CriticalFraction    float64
	Item                string
	CapacityConcurrency int
	CapacityTime        time.Duration // the closed loop
	CapacityStepTime    time.Duration // one step of the open-loop search
	CapacitySearchTime  time.Duration // the search's steps in all; 0: no search, C = C0
	CapacityP99SLO      time.Duration // a step holds when p99 of served ≤ this ...
	CapacityMinServed   float64       // ... and served/offered ≥ this
	BaselineFactor      float64
	PhaseTime           time.Duration // the baseline phase
	OverloadFactor      float64
	OverloadTime        time.Duration
	// ReplyGrace is how long past the request's own timeout (the budget the
	// server is told) a reply is still waited for before the request counts
	// as lost: a server that answers "deadline exceeded" at the deadline is
	// not losing requests.
	ReplyGrace time.Duration
	// LateAfter is how far past its due time a request may be dispatched
	// before it counts as a late dispatch.
	LateAfter time.Duration
	// MaxRate bounds any phase's request rate (and so the closed loop's
	// request count: MaxRate × CapacityTime); a higher computed rate is cut
	// to it and the report says so.
	MaxRate float64
	// MaxOutstanding bounds requests in flight (goroutines, memory); 0
	// derives it from the rate: rate × (request timeout + grace) × 1.1 + 64.
	MaxOutstanding int

	MetricsTargets []MetricsTarget
	MetricsEvery   time.Duration

	// RunFile, when set, also gets the run's common record (-run-file):
	// every request, per second, with the phases and the gate, logic and
	// battle tiers' RSS and CPU from MetricsTargets; the caller Ends it.
	RunFile *RunFile

	// Pass criteria.
	MinGoodputRatio float64 // overload goodput ≥ this × C
	MaxP99Ratio     float64 // overload p99 of served ≤ this × baseline p99
	MaxRSSBytes     float64 // 0: not checked; else every sampled cluster process's max RSS ≤ this
}

// DefaultOverload is 200 connections, C measured with 64 outstanding for
// 10 s, then 10 s at 0.8 × C and 20 s at 10 × C: about a minute.
//
// 64 outstanding: on the 2-core development machine the local cluster
// served 1,880/s with 16, 3,850/s with 64 and 4,530/s with 256 (p99 28, 35
// and 119 ms); 16 is far below the knee and understates C.
func DefaultOverload() OverloadConfig {
	return OverloadConfig{
		Conns:               200,
		Units:               8,
		Ticks:               200,
		CriticalFraction:    0.1,
		Item:                "potion",
		CapacityConcurrency: 64,
		CapacityTime:        10 * time.Second,
		CapacityStepTime:    3 * time.Second,
		CapacitySearchTime:  30 * time.Second,
		CapacityP99SLO:      250 * time.Millisecond,
		CapacityMinServed:   0.95,
		BaselineFactor:      0.8,
		PhaseTime:           10 * time.Second,
		OverloadFactor:      10,
		OverloadTime:        20 * time.Second,
		ReplyGrace:          time.Second,
		LateAfter:           10 * time.Millisecond,
		MaxRate:             20_000,
		MetricsEvery:        time.Second,
		MinGoodputRatio:     0.9,
		MaxP99Ratio:         3,
	}
}

// MaxOverloadConns bounds -conns.
const MaxOverloadConns = 10_000

// Validate checks the knobs; errors name the flag.
func (c OverloadConfig) Validate() error {
	switch {
	case c.Conns < 1 || c.Conns > MaxOverloadConns:
		return fmt.Errorf("-conns: must be in 1..%d, got %d", MaxOverloadConns, c.Conns)
	case c.Units < 1 || c.Units > 64:
		return fmt.Errorf("-units: must be in 1..64, got %d", c.Units)
	case c.Ticks < 1 || c.Ticks > 10_000:
		return fmt.Errorf("-ticks: must be in 1..10000, got %d", c.Ticks)
	case c.CriticalFraction < 0 || c.CriticalFraction > 1:
		return fmt.Errorf("-critical-fraction: must be in [0, 1], got %v", c.CriticalFraction)
	case c.CriticalFraction > 0 && (c.Item == "" || strings.TrimSpace(c.Item) != c.Item):
		return fmt.Errorf("-item: bad item id %q", c.Item)
	case c.CapacityConcurrency < 1 || c.CapacityConcurrency > 10_000:
		return fmt.Errorf("-capacity-concurrency: must be in 1..10000, got %d", c.CapacityConcurrency)
	case c.CapacityTime <= 0 || c.CapacityTime > 10*time.Minute:
		return fmt.Errorf("-capacity-time: must be in (0, 10m], got %v", c.CapacityTime)
	case c.CapacityStepTime <= 0 || c.CapacityStepTime > time.Minute:
		return fmt.Errorf("-capacity-step-time: must be in (0, 1m], got %v", c.CapacityStepTime)
	case c.CapacitySearchTime < 0 || c.CapacitySearchTime > 10*time.Minute:
		return fmt.Errorf("-capacity-search-time: must be in [0, 10m], got %v", c.CapacitySearchTime)
	case c.CapacityP99SLO <= 0:
		return fmt.Errorf("-capacity-p99-slo: must be > 0, got %v", c.CapacityP99SLO)
	case c.CapacityMinServed <= 0 || c.CapacityMinServed > 1:
		return fmt.Errorf("-capacity-min-served: must be in (0, 1], got %v", c.CapacityMinServed)
	case c.BaselineFactor <= 0 || c.BaselineFactor > 1:
		return fmt.Errorf("-baseline-factor: must be in (0, 1], got %v", c.BaselineFactor)
	case c.PhaseTime <= 0 || c.PhaseTime > 10*time.Minute:
		return fmt.Errorf("-phase-time: must be in (0, 10m], got %v", c.PhaseTime)
	case c.OverloadFactor < 1 || c.OverloadFactor > 1000:
		return fmt.Errorf("-overload-factor: must be in [1, 1000], got %v", c.OverloadFactor)
	case c.OverloadTime <= 0 || c.OverloadTime > 10*time.Minute:
		return fmt.Errorf("-overload-time: must be in (0, 10m], got %v", c.OverloadTime)
	case c.ReplyGrace < 0 || c.ReplyGrace > time.Minute:
		return fmt.Errorf("-reply-grace: must be in [0, 1m], got %v", c.ReplyGrace)
	case c.LateAfter <= 0:
		return fmt.Errorf("-late-after: must be > 0, got %v", c.LateAfter)
	case c.MaxRate <= 0 || c.MaxRate > 1_000_000:
		return fmt.Errorf("-max-rate: must be in (0, 1000000], got %v", c.MaxRate)
	case c.MaxRate*c.OverloadTime.Seconds() > MaxRequests || c.MaxRate*c.CapacityTime.Seconds() > MaxRequests:
		return fmt.Errorf("-max-rate: %v/s over a phase is more than %d requests", c.MaxRate, MaxRequests)
	case c.MaxOutstanding < 0 || c.MaxOutstanding > 1_000_000:
		return fmt.Errorf("-max-outstanding: must be in 0..1000000, got %d", c.MaxOutstanding)
	case c.MetricsEvery <= 0:
		return fmt.Errorf("-metrics-every: must be > 0, got %v", c.MetricsEvery)
	case c.MinGoodputRatio < 0 || c.MinGoodputRatio > 1:
		return fmt.Errorf("-min-goodput-ratio: must be in [0, 1], got %v", c.MinGoodputRatio)
	case c.MaxP99Ratio <= 0:
		return fmt.Errorf("-max-p99-ratio: must be > 0, got %v", c.MaxP99Ratio)
	case c.MaxRSSBytes < 0:
		return fmt.Errorf("-max-rss-mb: must be >= 0, got %v", c.MaxRSSBytes)
	}
	return nil
}

// critical reports whether request i is a (CRITICAL) purchase: exactly
// round(fraction × n) of any n consecutive requests from 0, spread evenly.
func critical(i int, fraction float64) bool {
	return int(float64(i+1)*fraction) > int(float64(i)*fraction)
}

// outstandingCap is the most requests a phase at rate keeps in flight: all
// that can be waiting (rate × the longest a request waits) with 10 % and 64
// to spare, unless max (when > 0) is lower.
func outstandingCap(rate float64, wait time.Duration, maxOut int) int {
	n := int(rate*wait.Seconds()*1.1) + 64
	if maxOut > 0 {
		n = min(n, maxOut)
	}
	return n
}
