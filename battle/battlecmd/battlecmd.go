// Package battlecmd is the battle tier's command: flags, BATTLE_*
// variables, signals and logging around package battle, for a game's own
// binary. A game's battle binary is one line (Levee's default one,
// cmd/battle, is this with its example game):
//
//	func main() { os.Exit(battlecmd.Main(mygame.Game(), os.Args[1:])) }
package battlecmd

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"

	"github.com/leveehq/levee/battle"
	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/cli"
)

// Main runs the battle tier for g's jobs with the command-line arguments
// args (without the program's name) and returns the exit code: 0 after a
// clean stop (SIGINT or SIGTERM), 1 when the server failed, 2 for bad
// flags, a bad configuration or a declaration that cannot work (the
// message names the action or job). `healthcheck [-addr]` probes a running
// tier instead. Every flag can also be set by its BATTLE_* variable.
func Main(g *game.Game, args []string) int { return run(g, args, os.Getenv, os.Stderr) }

func run(g *game.Game, args []string, getenv func(string) string, stderr io.Writer) int {
	cfg := battle.DefaultConfig()
	cfg.Game = g
	return cli.Main(cli.Tier{
		Name:      "battle",
		Security:  &cfg.Security,
		EnvPrefix: "BATTLE",
		GRPCAddr:  cfg.GRPCAddr,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address (Jobs and health services)")
			fs.StringVar(&cfg.OpsAddr, "ops-addr", cfg.OpsAddr, "ops HTTP listen address (/metrics, /healthz, /readyz)")
			fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "time in-flight jobs get to finish on shutdown")
			fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "time to keep serving after reporting NOT_SERVING (e.g. 5s in Kubernetes)")
			fs.BoolVar(&cfg.Protection, "protection", cfg.Protection, "all overload protection; off: no throttle, no shedding, no in-flight cap, and every valid request is run to the end even if its caller has gone")
			fs.BoolVar(&cfg.Throttle, "throttle", cfg.Throttle, "jittered CPU throttle (needs -protection); off: no job is delayed, however high the CPU")
			fs.BoolVar(&cfg.AdaptiveShed, "adaptive-shed", cfg.AdaptiveShed, "adaptive shedding (needs -protection); off: nothing is shed by it (battle_adaptive_limit is still measured)")
			fs.BoolVar(&cfg.InFlightCap, "in-flight-cap", cfg.InFlightCap, "hard cap of -max-in-flight (needs -protection); off: any number of jobs may run at once")
			fs.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "hard cap on jobs running at once, for every criticality; the rest get RESOURCE_EXHAUSTED with a retry delay of about one job "+
				"(default: the CPUs this process may use, cgroup limit or GOMAXPROCS, rounded up)")
			fs.DurationVar(&cfg.CPUInterval, "cpu-interval", cfg.CPUInterval, "how often the CPU utilisation (of the CPUs this process may use) is sampled")
			fs.Float64Var(&cfg.ThrottleCPU, "throttle-cpu", cfg.ThrottleCPU, "CPU utilisation (0..1) above which each job is delayed by a random 0..-throttle-max-delay")
			fs.DurationVar(&cfg.ThrottleMaxDelay, "throttle-max-delay", cfg.ThrottleMaxDelay, "largest throttle delay; 0 disables the throttle")
			fs.DurationVar(&cfg.ShedWindow, "shed-window", cfg.ShedWindow, "sliding window of the adaptive shedder's pass rate and latency")
			fs.IntVar(&cfg.ShedBuckets, "shed-buckets", cfg.ShedBuckets, "buckets in -shed-window")
			fs.Float64Var(&cfg.ShedCPU, "shed-cpu", cfg.ShedCPU, "CPU utilisation (0..1) above which requests past the adaptive limit (maxPass x minRTT) are shed; critical ones never are")
			fs.DurationVar(&cfg.ShedCoolOff, "shed-cooloff", cfg.ShedCoolOff, "how long shedding stays possible after the CPU falls back under -shed-cpu, once something was shed")
		},
		Validate: func() error { return errors.Join(cfg.Validate(), cfg.ValidateGame()) },
		Run: func(ctx context.Context, logger *slog.Logger) error {
			srv, err := battle.New(cfg, logger)
			if err != nil {
				return err
			}
			return srv.Run(ctx)
		},
	}, args, getenv, stderr)
}
