// Command battle runs Levee's battle tier: deterministic, CPU-heavy battle
// simulations over gRPC. `battle healthcheck` probes a running one.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"levee/battle"
	"levee/internal/cli"
)

const envPrefix = "BATTLE"

func main() { os.Exit(run(os.Args[1:], os.Getenv, os.Stderr)) }

func run(args []string, getenv func(string) string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "healthcheck" {
		return healthcheck(args[1:], getenv, stderr)
	}
	cfg := battle.DefaultConfig()
	fs := flag.NewFlagSet("battle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address (Battle and health services)")
	fs.StringVar(&cfg.OpsAddr, "ops-addr", cfg.OpsAddr, "ops HTTP listen address (/metrics, /healthz, /readyz)")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "time in-flight simulations get to finish on shutdown")
	fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "time to keep serving after reporting NOT_SERVING (e.g. 5s in Kubernetes)")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "hard cap on simulations running at once; the rest get RESOURCE_EXHAUSTED")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	cli.UsageWithEnv(fs, envPrefix)
	if err := cli.Parse(fs, envPrefix, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "battle: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "battle: unexpected arguments: %v\n", fs.Args())
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "battle: %v\n", err)
		return 2
	}
	logger, err := cli.NewLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "battle: %v\n", err)
		return 2
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	srv, err := battle.New(cfg, logger)
	if err != nil {
		logger.Error("battle: start", "err", err)
		return 1
	}
	if err := srv.Run(ctx); err != nil {
		logger.Error("battle: run", "err", err)
		return 1
	}
	return 0
}

func healthcheck(args []string, getenv func(string) string, stderr io.Writer) int {
	def := getenv(cli.EnvName(envPrefix, "grpc-addr"))
	if def == "" {
		def = battle.DefaultConfig().GRPCAddr
	}
	fs := flag.NewFlagSet("battle healthcheck", flag.ContinueOnError)
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
