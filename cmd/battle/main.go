// Command battle runs Levee's battle tier: deterministic, CPU-heavy battle
// simulations over gRPC. `battle healthcheck` probes a running one.
package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"

	"levee/battle"
	"levee/internal/cli"
)

func main() { os.Exit(run(os.Args[1:], os.Getenv, os.Stderr)) }

func run(args []string, getenv func(string) string, stderr io.Writer) int {
	cfg := battle.DefaultConfig()
	return cli.Main(cli.Tier{
		Name:      "battle",
		EnvPrefix: "BATTLE",
		GRPCAddr:  cfg.GRPCAddr,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address (Battle and health services)")
			fs.StringVar(&cfg.OpsAddr, "ops-addr", cfg.OpsAddr, "ops HTTP listen address (/metrics, /healthz, /readyz)")
			fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "time in-flight simulations get to finish on shutdown")
			fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "time to keep serving after reporting NOT_SERVING (e.g. 5s in Kubernetes)")
			fs.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "hard cap on simulations running at once; the rest get RESOURCE_EXHAUSTED")
		},
		Validate: func() error { return cfg.Validate() },
		Run: func(ctx context.Context, logger *slog.Logger) error {
			srv, err := battle.New(cfg, logger)
			if err != nil {
				return err
			}
			return srv.Run(ctx)
		},
	}, args, getenv, stderr)
}
