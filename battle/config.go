package battle

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/cpu"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/shed"
)

// Config is the battle tier's configuration; battlecmd binds every field but
// Game to a flag (and a BATTLE_* variable).
type Config struct {
	// Security is how this tier's gRPC is secured, both its server and
	// its calls to the tier below: grpcdial.MTLS with the cluster's
	// certificates, or grpcdial.Insecure (the zero value: plaintext; the
	// binaries require -insecure for it).
	Security grpcdial.Security

	// Game is the declaration whose jobs the tier runs; New refuses a nil
	// one and one that does not Validate.
	Game *game.Game

	// GRPCAddr is where the Jobs and health services listen.
	GRPCAddr string
	// OpsAddr serves /metrics, /healthz and /readyz.
	OpsAddr string
	// ShutdownGrace bounds how long in-flight jobs may finish after
	// shutdown begins (after Drain) before they are cut off.
	ShutdownGrace time.Duration
	// Drain is how long the tier keeps serving after it reports NOT_SERVING,
	// so load balancers stop sending to it first. 0 in tests; about 5s in
	// Kubernetes.
	Drain time.Duration

	// Protection turns all of the tier's overload mechanisms on or off at
	// once: a mechanism is active when Protection and its own switch are
	// both true. With Protection off the tier runs every valid request
	// it gets, to the end, even one whose caller has gone (the "before"
	// picture of the load test).
	Protection bool
	// Throttle switches the jittered CPU throttle (seed 004).
	Throttle bool
	// AdaptiveShed switches adaptive shedding (seed 001). Off, the shedder
	// still measures the limit (battle_adaptive_limit) but sheds nothing.
	AdaptiveShed bool
	// InFlightCap switches the hard cap on jobs in flight.
	InFlightCap bool

	// MaxInFlight is the hard cap on jobs running at once, whatever
	// their criticality; requests beyond it are refused at once with
	// RESOURCE_EXHAUSTED.
	MaxInFlight int
	// CPUInterval is how often the CPU utilisation is sampled.
	CPUInterval time.Duration
	// ThrottleCPU is the CPU utilisation (0..1) above which each battle is
	// delayed by a random 0..ThrottleMaxDelay before it runs.
	ThrottleCPU float64
	// ThrottleMaxDelay bounds the throttle's random delay; 0 disables it.
	ThrottleMaxDelay time.Duration
	// ShedWindow is the sliding window over which the shedder tracks the
	// best pass rate and the smallest latency.
	ShedWindow time.Duration
	// ShedBuckets is how many buckets ShedWindow is cut into.
	ShedBuckets int
	// ShedCPU is the CPU utilisation (0..1) above which requests beyond the
	// adaptive limit are shed.
	ShedCPU float64
	// ShedCoolOff is how long shedding stays possible after the CPU falls
	// back under ShedCPU, once something was shed (so it does not flap).
	ShedCoolOff time.Duration
}

// defaultMaxInFlight is one job per CPU the process may use,
// rounded up (a limit of 1.5 CPUs allows 2), at least 1.
func defaultMaxInFlight(cpus float64) int {
	return max(int(math.Ceil(cpus)), 1)
}

// DefaultConfig is the configuration used when nothing is set: every
// protection on, with the seeds' numbers.
func DefaultConfig() Config {
	sc, tc := shed.DefaultConfig(), shed.DefaultThrottleConfig()
	return Config{
		GRPCAddr:      ":9100",
		OpsAddr:       ":9101",
		ShutdownGrace: 10 * time.Second,
		Drain:         0,
		Protection:    true,
		Throttle:      true,
		AdaptiveShed:  true,
		InFlightCap:   true,
		// Jobs are CPU-bound: more at once than the CPUs the process
		// may use only makes each slower and starves the gRPC server's
		// own goroutines, so refusals come back late. One per CPU is
		// enough to keep them busy because logic keeps a short line of
		// calls ready for the moment a slot frees (its -battle-wait).
		MaxInFlight:      defaultMaxInFlight(cpu.AllowedCPUs(cpu.DefaultCgroupRoot)),
		CPUInterval:      cpu.DefaultInterval,
		ThrottleCPU:      tc.CPUThreshold,
		ThrottleMaxDelay: tc.MaxDelay,
		ShedWindow:       sc.Window,
		ShedBuckets:      sc.Buckets,
		ShedCPU:          sc.CPUThreshold,
		ShedCoolOff:      sc.CoolOff,
	}
}

// Validate returns every problem with c's flags; each names its flag. The
// game is checked by New (and by battlecmd before it), with ValidateGame.
func (c Config) Validate() error {
	var errs []error
	if c.GRPCAddr == "" {
		errs = append(errs, errors.New("-grpc-addr: must not be empty"))
	}
	if c.OpsAddr == "" {
		errs = append(errs, errors.New("-ops-addr: must not be empty"))
	}
	if c.ShutdownGrace <= 0 {
		errs = append(errs, fmt.Errorf("-shutdown-grace: must be > 0, got %v", c.ShutdownGrace))
	}
	if c.Drain < 0 {
		errs = append(errs, fmt.Errorf("-drain: must be >= 0, got %v", c.Drain))
	}
	if c.MaxInFlight <= 0 {
		errs = append(errs, fmt.Errorf("-max-in-flight: must be > 0, got %d", c.MaxInFlight))
	}
	if c.CPUInterval <= 0 {
		errs = append(errs, fmt.Errorf("-cpu-interval: must be > 0, got %v", c.CPUInterval))
	}
	if !(c.ThrottleCPU >= 0 && c.ThrottleCPU <= 1) {
		errs = append(errs, fmt.Errorf("-throttle-cpu: must be in [0, 1], got %v", c.ThrottleCPU))
	}
	if c.ThrottleMaxDelay < 0 {
		errs = append(errs, fmt.Errorf("-throttle-max-delay: must be >= 0, got %v", c.ThrottleMaxDelay))
	}
	if c.ShedWindow <= 0 {
		errs = append(errs, fmt.Errorf("-shed-window: must be > 0, got %v", c.ShedWindow))
	}
	if c.ShedBuckets <= 0 {
		errs = append(errs, fmt.Errorf("-shed-buckets: must be > 0, got %d", c.ShedBuckets))
	} else if c.ShedWindow > 0 && c.ShedWindow/time.Duration(c.ShedBuckets) <= 0 {
		errs = append(errs, fmt.Errorf("-shed-buckets: %d buckets do not fit in -shed-window %v", c.ShedBuckets, c.ShedWindow))
	}
	if !(c.ShedCPU >= 0 && c.ShedCPU <= 1) {
		errs = append(errs, fmt.Errorf("-shed-cpu: must be in [0, 1], got %v", c.ShedCPU))
	}
	if c.ShedCoolOff < 0 {
		errs = append(errs, fmt.Errorf("-shed-cooloff: must be >= 0, got %v", c.ShedCoolOff))
	}
	return errors.Join(errs...)
}

// ValidateGame reports why c's game cannot run: none was given, or its
// declaration does not Validate (the error names the action or job).
func (c Config) ValidateGame() error {
	if c.Game == nil {
		return errors.New("battle: no game: Config.Game is nil")
	}
	if err := c.Game.Validate(); err != nil {
		return fmt.Errorf("battle: %w", err)
	}
	return nil
}

// throttleOn, adaptiveShedOn and inFlightCapOn say whether each mechanism is
// active: its own switch and Protection are both on.
func (c Config) throttleOn() bool     { return c.Protection && c.Throttle && c.ThrottleMaxDelay > 0 }
func (c Config) adaptiveShedOn() bool { return c.Protection && c.AdaptiveShed }
func (c Config) inFlightCapOn() bool  { return c.Protection && c.InFlightCap }

// shedConfig is the shedder's configuration.
func (c Config) shedConfig() shed.Config {
	sc := shed.DefaultConfig()
	sc.Window, sc.Buckets, sc.CPUThreshold, sc.CoolOff = c.ShedWindow, c.ShedBuckets, c.ShedCPU, c.ShedCoolOff
	return sc
}
