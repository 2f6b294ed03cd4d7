// Command battle runs Levee's battle tier: deterministic, CPU-heavy battle
// simulations over gRPC. `battle healthcheck` probes a running one.
package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"

	"github.com/leveehq/levee/battle"
	"github.com/leveehq/levee/internal/cli"
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
			fs.BoolVar(&cfg.Protection, "protection", cfg.Protection, "all overload protection; off: no throttle, no shedding, no in-flight cap, and every valid request is simulated to the end even if its caller has gone")
			fs.BoolVar(&cfg.Throttle, "throttle", cfg.Throttle, "jittered CPU throttle (needs -protection); off: no battle is delayed, however high the CPU")
			fs.BoolVar(&cfg.AdaptiveShed, "adaptive-shed", cfg.AdaptiveShed, "adaptive shedding (needs -protection); off: nothing is shed by it (battle_adaptive_limit is still measured)")
			fs.BoolVar(&cfg.InFlightCap, "in-flight-cap", cfg.InFlightCap, "hard cap of -max-in-flight (needs -protection); off: any number of simulations may run at once")
			fs.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "hard cap on simulations running at once, for every criticality; the rest get RESOURCE_EXHAUSTED with a retry delay of about one simulation "+
				"(default: the CPUs this process may use, cgroup limit or GOMAXPROCS, rounded up)")
			fs.DurationVar(&cfg.CPUInterval, "cpu-interval", cfg.CPUInterval, "how often the CPU utilisation (of the CPUs this process may use) is sampled")
			fs.Float64Var(&cfg.ThrottleCPU, "throttle-cpu", cfg.ThrottleCPU, "CPU utilisation (0..1) above which each battle is delayed by a random 0..-throttle-max-delay")
			fs.DurationVar(&cfg.ThrottleMaxDelay, "throttle-max-delay", cfg.ThrottleMaxDelay, "largest throttle delay; 0 disables the throttle")
			fs.DurationVar(&cfg.ShedWindow, "shed-window", cfg.ShedWindow, "sliding window of the adaptive shedder's pass rate and latency")
			fs.IntVar(&cfg.ShedBuckets, "shed-buckets", cfg.ShedBuckets, "buckets in -shed-window")
			fs.Float64Var(&cfg.ShedCPU, "shed-cpu", cfg.ShedCPU, "CPU utilisation (0..1) above which requests past the adaptive limit (maxPass x minRTT) are shed; critical ones never are")
			fs.DurationVar(&cfg.ShedCoolOff, "shed-cooloff", cfg.ShedCoolOff, "how long shedding stays possible after the CPU falls back under -shed-cpu, once something was shed")
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
