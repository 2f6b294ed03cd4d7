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

	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/tlsconf"
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
	// Security, when set, receives the tier's transport security from the
	// cluster flags (ClusterFlags) before Run: mutual TLS with a
	// certificate of the role Name, or -insecure. Neither is exit 2.
	Security *grpcdial.Security
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
	var cluster ClusterFlags
	if t.Security != nil {
		cluster.Register(fs)
	}
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
	if t.Security != nil {
		sec, err := cluster.Security(tlsconf.Role(t.Name), false, logger)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", t.Name, err)
			return 2
		}
		if sec.IsInsecure() {
			logger.Warn("-insecure: the tiers talk plaintext gRPC without certificates; anyone who reaches the gRPC port can call this " + t.Name + ". For development only")
		} else {
			logger.Info("mutual TLS between the tiers", "role", t.Name, "cluster_ca", cluster.CA, "cluster_cert", cluster.Cert)
		}
		*t.Security = sec
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
	var cluster ClusterFlags
	cluster.Register(fs)
	if err := parseShared(fs, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "%s healthcheck: %v\n", t.Name, err)
		return 2
	}
	// Without the cluster flags the probe is plaintext, as a tier started
	// with -insecure serves. The certificate given should be an ops one:
	// the tiers accept ops (and their callers) only.
	sec, err := cluster.Security("", true, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(stderr, "%s healthcheck: %v\n", t.Name, err)
		return 2
	}
	return Healthcheck(*addr, sec, tlsconf.Role(t.Name), *timeout, stderr)
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

// parseShared parses args into fs and fills only the shared flags
// (LEVEE_CLUSTER_CA, …) from the environment: the healthcheck's -addr is
// not the tier's <PREFIX>_ADDR.
func parseShared(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name := range sharedFlags {
		if set[name] || fs.Lookup(name) == nil {
			continue
		}
		env := envOf("", name)
		if v := getenv(env); v != "" {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("invalid value %q for flag -%s (from %s): %v", v, name, env, err)
			}
		}
	}
	return nil
}
