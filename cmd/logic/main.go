// Command logic runs Levee's logic tier: the sharded, durable owner of player
// state, behind bounded shard queues. `logic healthcheck` probes a running one.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"levee/internal/cli"
	"levee/logic"
)

const envPrefix = "LOGIC"

func main() { os.Exit(run(os.Args[1:], os.Getenv, os.Stderr)) }

func run(args []string, getenv func(string) string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "healthcheck" {
		return healthcheck(args[1:], getenv, stderr)
	}
	cfg := logic.DefaultConfig()
	fs := flag.NewFlagSet("logic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address (Logic and health services)")
	fs.StringVar(&cfg.OpsAddr, "ops-addr", cfg.OpsAddr, "ops HTTP listen address (/metrics, /healthz, /readyz)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory of the shards' bbolt files (required; created if missing)")
	fs.IntVar(&cfg.Shards, "shards", cfg.Shards, "total number of shards in the cluster (must match the gate)")
	fs.IntVar(&cfg.Instance, "instance", cfg.Instance, "this process's index in [0, -instances)")
	fs.IntVar(&cfg.Instances, "instances", cfg.Instances, "number of logic processes sharing the shards")
	fs.IntVar(&cfg.QueueSize, "queue-size", cfg.QueueSize, "capacity of each shard's queue")
	fs.Var(listFlag{&cfg.BattleAddrs}, "battle-addrs", "comma-separated battle addresses, called round robin (required)")
	fs.DurationVar(&cfg.BattleTimeout, "battle-timeout", cfg.BattleTimeout, "cap on one battle call (the caller's deadline may end it sooner)")
	fs.IntVar(&cfg.MaxBatch, "max-batch", cfg.MaxBatch, "most requests one shard commits in one transaction")
	fs.IntVar(&cfg.MaxBattles, "max-battles", cfg.MaxBattles, "cap on battle calls in flight; the rest get RESOURCE_EXHAUSTED")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "time in-flight requests get to finish on shutdown")
	fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "time to keep serving after reporting NOT_SERVING (e.g. 5s in Kubernetes)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	cli.UsageWithEnv(fs, envPrefix)
	if err := cli.Parse(fs, envPrefix, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "logic: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "logic: unexpected arguments: %v\n", fs.Args())
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "logic: %v\n", err)
		return 2
	}
	logger, err := cli.NewLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "logic: %v\n", err)
		return 2
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	srv, err := logic.New(cfg, logger)
	if err != nil {
		logger.Error("logic: start", "err", err)
		return 1
	}
	if err := srv.Run(ctx); err != nil {
		logger.Error("logic: run", "err", err)
		return 1
	}
	return 0
}

// listFlag is a comma-separated list flag.
type listFlag struct{ dst *[]string }

func (l listFlag) String() string {
	if l.dst == nil {
		return ""
	}
	return strings.Join(*l.dst, ",")
}

func (l listFlag) Set(v string) error {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return errors.New("empty list")
	}
	*l.dst = out
	return nil
}

func healthcheck(args []string, getenv func(string) string, stderr io.Writer) int {
	def := getenv(cli.EnvName(envPrefix, "grpc-addr"))
	if def == "" {
		def = logic.DefaultConfig().GRPCAddr
	}
	fs := flag.NewFlagSet("logic healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", cli.ProbeAddr(def), "gRPC address to probe")
	timeout := fs.Duration("timeout", 3*time.Second, "probe timeout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 1
	}
	return cli.Healthcheck(*addr, *timeout, stderr)
}
