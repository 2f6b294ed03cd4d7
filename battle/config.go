package battle

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Config is the battle tier's configuration; cmd/battle binds every field to
// a flag (and a BATTLE_* variable).
type Config struct {
	// GRPCAddr is where the Battle and health services listen.
	GRPCAddr string
	// OpsAddr serves /metrics, /healthz and /readyz.
	OpsAddr string
	// ShutdownGrace bounds how long in-flight simulations may finish after
	// shutdown begins (after Drain) before they are cut off.
	ShutdownGrace time.Duration
	// Drain is how long the tier keeps serving after it reports NOT_SERVING,
	// so load balancers stop sending to it first. 0 in tests; about 5s in
	// Kubernetes.
	Drain time.Duration
	// MaxInFlight is the hard cap on simulations running at once; requests
	// beyond it are refused at once with RESOURCE_EXHAUSTED.
	MaxInFlight int
}

// DefaultConfig is the configuration used when nothing is set.
func DefaultConfig() Config {
	return Config{
		GRPCAddr:      ":9100",
		OpsAddr:       ":9101",
		ShutdownGrace: 10 * time.Second,
		Drain:         0,
		MaxInFlight:   4 * runtime.GOMAXPROCS(0),
	}
}

// Validate returns every problem with c; each names its flag.
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
	return errors.Join(errs...)
}
