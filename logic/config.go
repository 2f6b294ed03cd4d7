package logic

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"levee/internal/shardmap"
)

// Config is the logic tier's configuration; cmd/logic binds every field to a
// flag (and a LOGIC_* variable).
type Config struct {
	// GRPCAddr is where the Logic and health services listen.
	GRPCAddr string
	// OpsAddr serves /metrics, /healthz and /readyz.
	OpsAddr string
	// DataDir holds one bbolt file per hosted shard; created if missing.
	DataDir string
	// Shards is the total number of shards in the cluster (gate and logic
	// must agree).
	Shards int
	// Instance is which logic process this is, in [0, Instances); it hosts
	// the shards s with shardmap.Instance(s, Instances) == Instance.
	Instance int
	// Instances is how many logic processes share the shards.
	Instances int
	// QueueSize is the capacity of each shard's channel.
	QueueSize int
	// BattleAddrs are the battle instances, called round robin.
	BattleAddrs []string
	// BattleTimeout caps one battle call (it also ends at the caller's
	// deadline, whichever comes first).
	BattleTimeout time.Duration
	// MaxBatch is the most requests a shard handles in one group commit.
	MaxBatch int
	// MaxBattles caps the battle calls in flight in this process; a battle
	// beyond it is refused with RESOURCE_EXHAUSTED.
	MaxBattles int
	// ShutdownGrace bounds how long in-flight requests may finish after
	// shutdown begins (after Drain) before they are cut off.
	ShutdownGrace time.Duration
	// Drain is how long the tier keeps serving after it reports NOT_SERVING.
	Drain time.Duration
}

// DefaultConfig is the configuration used when nothing is set. DataDir and
// BattleAddrs have no default and must be set.
func DefaultConfig() Config {
	return Config{
		GRPCAddr:      ":9000",
		OpsAddr:       ":9001",
		Shards:        8,
		Instance:      0,
		Instances:     1,
		QueueSize:     1024,
		BattleTimeout: 5 * time.Second,
		MaxBatch:      256,
		MaxBattles:    256,
		ShutdownGrace: 10 * time.Second,
		Drain:         0,
	}
}

// maxShards bounds -shards so that a typo cannot open a million files.
const maxShards = 4096

// Validate returns every problem with c; each names its flag.
func (c Config) Validate() error {
	var errs []error
	if c.GRPCAddr == "" {
		errs = append(errs, errors.New("-grpc-addr: must not be empty"))
	}
	if c.OpsAddr == "" {
		errs = append(errs, errors.New("-ops-addr: must not be empty"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("-data-dir: must not be empty"))
	}
	if c.Shards <= 0 || c.Shards > maxShards {
		errs = append(errs, fmt.Errorf("-shards: must be in 1..%d, got %d", maxShards, c.Shards))
	}
	if c.Instances <= 0 {
		errs = append(errs, fmt.Errorf("-instances: must be > 0, got %d", c.Instances))
	} else if c.Instance < 0 || c.Instance >= c.Instances {
		errs = append(errs, fmt.Errorf("-instance: must be in [0, %d), got %d", c.Instances, c.Instance))
	} else if c.Shards > 0 && c.Instance >= c.Shards {
		errs = append(errs, fmt.Errorf("-instance: %d hosts no shard of %d (-shards must be >= -instances)", c.Instance, c.Shards))
	}
	if c.QueueSize <= 0 {
		errs = append(errs, fmt.Errorf("-queue-size: must be > 0, got %d", c.QueueSize))
	}
	if len(c.BattleAddrs) == 0 {
		errs = append(errs, errors.New("-battle-addrs: must list at least one address"))
	}
	for _, a := range c.BattleAddrs {
		if strings.TrimSpace(a) == "" {
			errs = append(errs, fmt.Errorf("-battle-addrs: empty address in %q", strings.Join(c.BattleAddrs, ",")))
			break
		}
	}
	if c.BattleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("-battle-timeout: must be > 0, got %v", c.BattleTimeout))
	}
	if c.MaxBatch <= 0 {
		errs = append(errs, fmt.Errorf("-max-batch: must be > 0, got %d", c.MaxBatch))
	}
	if c.MaxBattles <= 0 {
		errs = append(errs, fmt.Errorf("-max-battles: must be > 0, got %d", c.MaxBattles))
	}
	if c.ShutdownGrace <= 0 {
		errs = append(errs, fmt.Errorf("-shutdown-grace: must be > 0, got %v", c.ShutdownGrace))
	}
	if c.Drain < 0 {
		errs = append(errs, fmt.Errorf("-drain: must be >= 0, got %v", c.Drain))
	}
	return errors.Join(errs...)
}

// hosted lists the shards this instance hosts, in order.
func (c Config) hosted() []int {
	var out []int
	for s := 0; s < c.Shards; s++ {
		if shardmap.Instance(s, c.Instances) == c.Instance {
			out = append(out, s)
		}
	}
	return out
}
