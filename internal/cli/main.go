package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// Tier is what Main needs to know about one of Levee's server binaries.
type Tier struct {
	Name      string // "gate"; also the prefix of error messages
	EnvPrefix string // "GATE"
	// GRPCAddr is the default address `healthcheck` probes when the
	// <PREFIX>_GRPC_ADDR variable is not set.
	GRPCAddr string
	// Flags binds the tier's Config fields to fs.
	Flags func(fs *flag.FlagSet)
	// Validate checks the Config once the flags are parsed.
	Validate func() error
	// Run builds the server and runs it until ctx ends.
	Run func(ctx context.Context, logger *slog.Logger) error
	// Commands are extra subcommands (besides healthcheck), by name.
	Commands map[string]func(args []string) int
}

// Main runs a tier binary and returns its exit code: 0 after a clean stop,
// 1 when the server failed, 2 for bad flags or configuration.
//
//	<name> [flags]              run the server until SIGINT or SIGTERM
//	<name> healthcheck [-addr]  probe a running one's gRPC health service
func Main(t Tier, args []string, getenv func(string) string, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "healthcheck" {
			return healthcheckCommand(t, args[1:], getenv, stderr)
		}
		if cmd, ok := t.Commands[args[0]]; ok {
			return cmd(args[1:])
		}
	}
	fs := flag.NewFlagSet(t.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	t.Flags(fs)
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	UsageWithEnv(fs, t.EnvPrefix)
	if err := Parse(fs, t.EnvPrefix, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "%s: %v\n", t.Name, err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments: %v\n", t.Name, fs.Args())
		return 2
	}
	if err := t.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", t.Name, err)
		return 2
	}
	logger, err := NewLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", t.Name, err)
		return 2
	}
	ctx, stop := SignalContext()
	defer stop()
	if err := t.Run(ctx, logger); err != nil {
		logger.Error(t.Name+" stopped with an error", "err", err)
		return 1
	}
	return 0
}

func healthcheckCommand(t Tier, args []string, getenv func(string) string, stderr io.Writer) int {
	def := getenv(EnvName(t.EnvPrefix, "grpc-addr"))
	if def == "" {
		def = t.GRPCAddr
	}
	fs := flag.NewFlagSet(t.Name+" healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", ProbeAddr(def), "gRPC health address to probe")
	timeout := fs.Duration("timeout", 3*time.Second, "probe timeout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	return Healthcheck(*addr, *timeout, stderr)
}

// List is a comma-separated list flag; blanks are dropped.
type List []string

var _ flag.Value = (*List)(nil)

func (l *List) String() string { return strings.Join(*l, ",") }

func (l *List) Set(v string) error {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return errors.New("empty list")
	}
	*l = out
	return nil
}
