// Package logiccmd is the logic tier's command, for a game's own binary:
//
//	func main() { os.Exit(logiccmd.Main(mygame.Game(), os.Args[1:])) }
//
// runs Levee's logic tier serving that game, with every flag (and LOGIC_*
// variable), the signals and the logging of Levee's own cmd/logic;
// `logic healthcheck` probes a running one.
package logiccmd

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"

	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/cli"
	"github.com/leveehq/levee/logic"
)

// Main runs the logic tier for g with the command-line arguments args
// (without the program name), the environment and stderr, until SIGINT or
// SIGTERM; it returns the exit code: 0 after a clean stop, 2 for bad flags
// or a declaration g.Validate refuses, 1 when the tier fails.
func Main(g *game.Game, args []string) int { return Run(g, args, os.Getenv, os.Stderr) }

// Run is Main with the environment and stderr given.
func Run(g *game.Game, args []string, getenv func(string) string, stderr io.Writer) int {
	cfg := logic.DefaultConfig()
	cfg.Game = g
	return cli.Main(cli.Tier{
		Name:      "logic",
		Security:  &cfg.Security,
		EnvPrefix: "LOGIC",
		GRPCAddr:  cfg.GRPCAddr,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address (Logic and health services)")
			fs.StringVar(&cfg.OpsAddr, "ops-addr", cfg.OpsAddr, "ops HTTP listen address (/metrics, /healthz, /readyz)")
			fs.StringVar(&cfg.Store, "store", cfg.Store,
				"where the shards' players and outcomes live: bolt (one bbolt file per shard under -data-dir) or postgres "+
					"(rows in the PostgreSQL database at -postgres-url, shared by every logic process; the schema is migrated at start-up)")
			fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory of the shards' bbolt files (required with -store bolt; created if missing)")
			fs.StringVar(&cfg.PostgresURL, "postgres-url", cfg.PostgresURL,
				"the database of -store postgres (required with it): a libpq URL or key=value string, e.g. postgres://levee@db:5432/levee; "+
					"better given as LOGIC_POSTGRES_URL, with the password in PGPASSWORD (read by the driver) rather than in the URL")
			fs.IntVar(&cfg.PostgresMaxConns, "postgres-max-conns", cfg.PostgresMaxConns, "most connections to -postgres-url at once (-store postgres)")
			fs.IntVar(&cfg.Shards, "shards", cfg.Shards, "total number of shards in the cluster (must match the gate)")
			fs.IntVar(&cfg.Instance, "instance", cfg.Instance, "this process's index in [0, -instances)")
			fs.IntVar(&cfg.Instances, "instances", cfg.Instances, "number of logic processes sharing the shards")
			fs.BoolVar(&cfg.InstanceFromHostname, "instance-from-hostname", cfg.InstanceFromHostname,
				"take this process's index from the trailing -N ordinal of the hostname (logic-2 -> 2), as a Kubernetes StatefulSet names its pods; "+
					"an error when the hostname has none or it is >= -instances, or with -instance set too")
			fs.StringVar(&cfg.AdvertiseAddr, "advertise-addr", cfg.AdvertiseAddr,
				"with -store postgres: host:port at which the gate reaches this process's gRPC, published with its shard leases and sent in redirects "+
					"(in Kubernetes: $(POD_IP):9000); default: -grpc-addr's host, or the hostname when it names none, with -grpc-addr's port")
			fs.StringVar(&cfg.NodeID, "node-id", cfg.NodeID,
				"with -store postgres: this process's name in the lease table, unique per process start; default: the hostname, a dash and 6 random hex digits")
			fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL,
				"with -store postgres: how long a shard lease lasts unrenewed; a dead process's shards are served by the others within about -lease-ttl + 2 x -lease-renew "+
					"(must be more than twice -lease-renew)")
			fs.DurationVar(&cfg.LeaseRenew, "lease-renew", cfg.LeaseRenew,
				"with -store postgres: how often the leases are renewed, the membership heartbeated, the shards rebalanced and the lease map read; "+
					"also the retry_after of a request refused while its shard moves")
			fs.IntVar(&cfg.QueueSize, "queue-size", cfg.QueueSize, "capacity of each shard's queue")
			fs.Float64Var(&cfg.RejectFill, "reject-fill", cfg.RejectFill,
				"a shard refuses a default-criticality request at once (RESOURCE_EXHAUSTED, retry delay = queue depth x measured time per request, in [50ms, 5s]) "+
					"when its queue is at least this fraction of -queue-size full; critical requests may fill it to 100%")
			fs.Float64Var(&cfg.RejectFillSheddable, "reject-fill-sheddable", cfg.RejectFillSheddable,
				"the same threshold for sheddable requests, which are refused first (at most -reject-fill)")
			fs.DurationVar(&cfg.QueueMaxWait, "queue-max-wait", cfg.QueueMaxWait,
				"bound on queueing time: a shard refuses a default request at admission when queue depth x its measured time per request exceeds this "+
					"(sheddable: half of it; critical: only the fill rule), part of -reject-early; and answers busy, unexecuted, a non-critical request "+
					"that has waited more than twice this when it is picked up, part of -drop-expired; 0 turns both off")
			fs.Var((*cli.List)(&cfg.BattleAddrs), "battle-addrs",
				"battle instances, which run the game's jobs, called round robin (required): comma-separated host:port, or one dns:///HOST:PORT whose HOST is looked up "+
					"every -battle-resolve-interval (and, at most once a second, sooner when a call or connection fails as unreachable), each address "+
					"being one instance: new ones take calls at once, gone ones take no new call and close once their calls in flight end; "+
					"a failed lookup or an empty answer keeps the last known instances")
			fs.DurationVar(&cfg.BattleResolveInterval, "battle-resolve-interval", cfg.BattleResolveInterval,
				"how often a dns:/// -battle-addrs is looked up again (at least 1s)")
			fs.DurationVar(&cfg.BattleTimeout, "battle-timeout", cfg.BattleTimeout, "cap on one battle call (the caller's deadline may end it sooner)")
			fs.Float64Var(&cfg.BattleRetryBudget, "battle-retry-budget", cfg.BattleRetryBudget,
				"tokens of the battle retry throttle: a failed attempt costs 1, a success gives back 0.1, retries only while more than half are left")
			fs.IntVar(&cfg.MaxBatch, "max-batch", cfg.MaxBatch, "most requests one shard commits in one transaction")
			fs.DurationVar(&cfg.BattleWait, "battle-wait", cfg.BattleWait,
				"how long a battle call that finds every battle instance at its adaptive concurrency limit waits for a slot before it is refused "+
					"(part of -battle-pushback); 0: refused at once")
			fs.IntVar(&cfg.BattleWaiters, "battle-waiters", cfg.BattleWaiters, "most battle calls waiting for a slot at once (-battle-wait); more are refused at once")
			fs.Float64Var(&cfg.BattleRTTTolerance, "battle-rtt-tolerance", cfg.BattleRTTTolerance,
				"shrink a battle instance's adaptive concurrency limit while its calls' round trip per unit of work (a job's encoded request and reply) over 100 ms "+
					"exceeds this multiple of the best 100 ms of the last minute (part of -battle-pushback); 0: only refusals shrink it")
			fs.IntVar(&cfg.MaxBattles, "max-battles", cfg.MaxBattles, "cap on battle calls in flight; the rest get RESOURCE_EXHAUSTED (no cap with -protection=false)")
			fs.DurationVar(&cfg.IdempotencyWindow, "idempotency-window", cfg.IdempotencyWindow,
				"how long a mutation's first outcome (the game's errors included) is kept by request id and, for an action that runs a job, by its job key, and replayed on a resend; "+
					"a resend whose issued_at_ms is older than this and whose outcome is gone gets REQUEST_EXPIRED, never a second application")
			fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "time in-flight requests get to finish on shutdown")
			fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "time to keep serving after reporting NOT_SERVING (e.g. 5s in Kubernetes)")
			fs.BoolVar(&cfg.Protection, "protection", cfg.Protection,
				"overload protection; false turns off -reject-early, -drop-expired (with them both -queue-max-wait rules), -battle-retry, "+
					"-battle-pushback and the -max-battles cap at once (the 'before' picture)")
			fs.BoolVar(&cfg.RejectEarly, "reject-early", cfg.RejectEarly,
				"refuse at the -reject-fill thresholds without blocking; off: a request waits for room in a full queue until its caller's deadline ends")
			fs.BoolVar(&cfg.DropExpired, "drop-expired", cfg.DropExpired,
				"answer a request whose deadline passed while queued with DEADLINE_EXCEEDED, unexecuted (and a non-critical one queued over 2 x -queue-max-wait "+
					"with RESOURCE_EXHAUSTED); off: execute it anyway")
			fs.BoolVar(&cfg.BattleRetry, "battle-retry", cfg.BattleRetry,
				"retry a battle call refused (RESOURCE_EXHAUSTED) or unreachable (UNAVAILABLE) once on another battle instance, under the retry throttle; "+
					"never with a single host:port in -battle-addrs (with dns:///, whenever it resolves to two or more); off: no retries")
			fs.BoolVar(&cfg.BattlePushback, "battle-pushback", cfg.BattlePushback,
				"leave a battle instance that refused (RESOURCE_EXHAUSTED/UNAVAILABLE) alone until its grpc-retry-pushback-ms has passed (100ms if none); "+
					"while every instance is cooling, refuse non-critical jobs locally (RESOURCE_EXHAUSTED, retry after the earliest end) without an RPC, "+
					"new requests for them already at admission; critical calls still try the instance ready first; off: call them round robin regardless")
		},
		Validate: func() error {
			if g == nil {
				return errNoGame
			}
			if err := g.Validate(); err != nil {
				return err
			}
			return cfg.Validate()
		},
		Run: func(ctx context.Context, logger *slog.Logger) error {
			srv, err := logic.New(cfg, logger)
			if err != nil {
				return err
			}
			return srv.Run(ctx)
		},
	}, args, getenv, stderr)
}

var errNoGame = errors.New("logiccmd: no game (Main needs the game's declaration)")
