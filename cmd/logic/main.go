// Command logic runs Levee's logic tier: the sharded, durable owner of player
// state, behind bounded shard queues. `logic healthcheck` probes a running one.
package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"

	"levee/internal/cli"
	"levee/logic"
)

func main() { os.Exit(run(os.Args[1:], os.Getenv, os.Stderr)) }

func run(args []string, getenv func(string) string, stderr io.Writer) int {
	cfg := logic.DefaultConfig()
	return cli.Main(cli.Tier{
		Name:      "logic",
		EnvPrefix: "LOGIC",
		GRPCAddr:  cfg.GRPCAddr,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address (Logic and health services)")
			fs.StringVar(&cfg.OpsAddr, "ops-addr", cfg.OpsAddr, "ops HTTP listen address (/metrics, /healthz, /readyz)")
			fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory of the shards' bbolt files (required; created if missing)")
			fs.IntVar(&cfg.Shards, "shards", cfg.Shards, "total number of shards in the cluster (must match the gate)")
			fs.IntVar(&cfg.Instance, "instance", cfg.Instance, "this process's index in [0, -instances)")
			fs.IntVar(&cfg.Instances, "instances", cfg.Instances, "number of logic processes sharing the shards")
			fs.IntVar(&cfg.QueueSize, "queue-size", cfg.QueueSize, "capacity of each shard's queue")
			fs.Var((*cli.List)(&cfg.BattleAddrs), "battle-addrs", "comma-separated battle addresses, called round robin (required)")
			fs.DurationVar(&cfg.BattleTimeout, "battle-timeout", cfg.BattleTimeout, "cap on one battle call (the caller's deadline may end it sooner)")
			fs.IntVar(&cfg.MaxBatch, "max-batch", cfg.MaxBatch, "most requests one shard commits in one transaction")
			fs.IntVar(&cfg.MaxBattles, "max-battles", cfg.MaxBattles, "cap on battle calls in flight; the rest get RESOURCE_EXHAUSTED")
			fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "time in-flight requests get to finish on shutdown")
			fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "time to keep serving after reporting NOT_SERVING (e.g. 5s in Kubernetes)")
		},
		Validate: func() error { return cfg.Validate() },
		Run: func(ctx context.Context, logger *slog.Logger) error {
			srv, err := logic.New(cfg, logger)
			if err != nil {
				return err
			}
			return srv.Run(ctx)
		},
	}, args, getenv, stderr)
}
