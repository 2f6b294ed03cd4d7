// Package cli is the shared shape of Levee's thin mains: flags with
// environment fallbacks, JSON logs, signal handling and the healthcheck
// subcommand that images without a shell use.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/tlsconf"
)

// EnvName is the environment variable that backs flag name: PREFIX_NAME with
// dashes turned into underscores, e.g. GATE_MAX_CONNS for -max-conns. The
// cluster flags every tier shares (-cluster-ca, -cluster-cert,
// -cluster-key, -insecure) are LEVEE_<NAME> in every binary instead.
func EnvName(prefix, name string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse parses args into fs, then fills every flag not given on the command
// line from its environment variable. A bad value, from either place, is an
// error that names the flag (and the variable).
func Parse(fs *flag.FlagSet, prefix string, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		env := envOf(prefix, f.Name)
		if v := getenv(env); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("invalid value %q for flag -%s (from %s): %v", v, f.Name, env, e)
			}
		}
	})
	return err
}

// UsageWithEnv makes fs's usage message name each flag's variable.
func UsageWithEnv(fs *flag.FlagSet, prefix string) {
	fs.VisitAll(func(f *flag.Flag) {
		f.Usage = fmt.Sprintf("%s (env %s)", f.Usage, envOf(prefix, f.Name))
	})
}

// NewLogger returns a JSON logger at level (debug, info, warn, error).
func NewLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("invalid value %q for flag -log-level: %v", level, err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// SignalContext is cancelled on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Healthcheck probes the gRPC health service at addr, a server of role
// (checked with MTLS), and returns the process exit code: 0 when it
// reports SERVING, 1 otherwise.
func Healthcheck(addr string, sec grpcdial.Security, role tlsconf.Role, timeout time.Duration, out io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(sec.DialCredentials(role)))
	if err != nil {
		fmt.Fprintf(out, "healthcheck %s: %v\n", addr, err)
		return 1
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		fmt.Fprintf(out, "healthcheck %s: %v\n", addr, err)
		return 1
	}
	fmt.Fprintf(out, "healthcheck %s: %s\n", addr, resp.GetStatus())
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return 1
	}
	return 0
}

// ProbeAddr turns a listen address (":9000", "0.0.0.0:9000") into one a
// local probe can dial.
func ProbeAddr(listen string) string {
	if strings.HasPrefix(listen, ":") {
		return "127.0.0.1" + listen
	}
	if strings.HasPrefix(listen, "0.0.0.0:") {
		return "127.0.0.1" + strings.TrimPrefix(listen, "0.0.0.0")
	}
	return listen
}
