package logic

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leveehq/levee/game"
	"github.com/leveehq/levee/internal/clock"
	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/shardmap"
)

// JobRunner runs a game's job in this process (Config.Jobs): the job's
// declared name, the key the game chose for it, and its request message,
// protobuf-encoded; it returns the job's reply, protobuf-encoded. An error
// fails every request waiting for the job (nothing is applied, the ids
// stay open for a resend): a domain error of internal/apperr keeps its
// code (e.g. apperr.ErrBusy), any other is INTERNAL.
type JobRunner interface {
	Run(ctx context.Context, job, key string, request []byte) (reply []byte, err error)
}

// Config is the logic tier's configuration; cmd/logic binds every field to a
// flag (and a LOGIC_* variable).
type Config struct {
	// Security is how this tier's gRPC is secured, both its server and
	// its calls to the tier below: grpcdial.MTLS with the cluster's
	// certificates, or grpcdial.Insecure (the zero value: plaintext; the
	// binaries require -insecure for it).
	Security grpcdial.Security

	// Game is the game this tier serves (required): its player state, its
	// actions and their handlers, and its jobs. New refuses to start when
	// Game.Validate reports an error.
	Game *game.Game
	// Jobs, when set, runs the game's jobs in this process instead of on
	// the battle tier over gRPC (BattleAddrs may then be empty, and the
	// Battle* settings do not apply): the test kit (package gametest) uses
	// it. nil: the battle tier.
	Jobs JobRunner
	// Clock is the tier's clock: the handlers' Ctx.Now, when outcomes were
	// applied (the idempotency window), the purge, the dequeue guard and
	// the battle instances' cooling. nil: the real clock. (The shards'
	// measured time per request is always wall-clock time.)
	Clock clock.Clock

	// GRPCAddr is where the Logic and health services listen.
	GRPCAddr string
	// OpsAddr serves /metrics, /healthz and /readyz.
	OpsAddr string
	// Store is where the shards' players and outcomes live: StoreBolt
	// (the default; "" is the same), one bbolt file per hosted shard under
	// DataDir, or StorePostgres, rows in the PostgreSQL database at
	// PostgresURL, shared by every logic process of the cluster.
	Store string
	// DataDir holds one bbolt file per hosted shard; created if missing.
	// Required with StoreBolt, not used with StorePostgres.
	DataDir string
	// PostgresURL is the database of StorePostgres: a libpq URL or
	// key=value string. The password may instead come from PGPASSWORD or
	// a .pgpass file, as with psql. The schema is migrated at start-up
	// (package internal/pgschema).
	PostgresURL string
	// PostgresMaxConns caps the pool of connections to PostgresURL.
	PostgresMaxConns int
	// Shards is the total number of shards in the cluster (gate and logic
	// must agree).
	Shards int
	// Instance is which logic process this is, in [0, Instances); it hosts
	// the shards s with shardmap.Instance(s, Instances) == Instance.
	Instance int
	// Instances is how many logic processes share the shards.
	Instances int
	// InstanceFromHostname takes Instance from the trailing "-N" ordinal of
	// the hostname instead ("logic-2" is 2), as a Kubernetes StatefulSet
	// names its pods; Instance must then be left 0. New puts the ordinal
	// into Instance.
	InstanceFromHostname bool
	// Hostname returns the hostname for InstanceFromHostname; nil is
	// os.Hostname (tests inject another).
	Hostname func() (string, error)
	// QueueSize is the capacity of each shard's channel.
	QueueSize int
	// RejectFill: a shard refuses a DEFAULT request at once when its channel
	// holds at least RejectFill × QueueSize requests (the seed's 90 %).
	// CRITICAL requests may use the channel up to 100 %.
	RejectFill float64
	// RejectFillSheddable is the same threshold for SHEDDABLE requests, which
	// are refused first; at most RejectFill.
	RejectFillSheddable float64
	// QueueMaxWait bounds the queue by time as well as by count. At
	// admission a shard refuses a DEFAULT request when the estimated wait
	// (queue depth × the shard's measured time per request) exceeds it, a
	// SHEDDABLE one when it exceeds half of it; CRITICAL requests only by the
	// fill rule, which stays the hard ceiling (part of RejectEarly). At
	// dequeue (CoDel-style guard, part of DropExpired) a DEFAULT or
	// SHEDDABLE request that has already waited more than 2 × QueueMaxWait is
	// answered RESOURCE_EXHAUSTED unexecuted. 0 turns both off.
	QueueMaxWait time.Duration
	// BattleAddrs are the battle instances, called round robin: a list of
	// host:port, or exactly one "dns:///HOST:PORT" whose HOST is looked up
	// every BattleResolveInterval (and sooner after a connection failure),
	// each address it resolves to being one instance (see battleDiscovery).
	BattleAddrs []string
	// BattleResolveInterval is how often a dns:/// BattleAddrs is looked
	// up again.
	BattleResolveInterval time.Duration
	// BattleTimeout caps one battle call (it also ends at the caller's
	// deadline, whichever comes first).
	BattleTimeout time.Duration
	// MaxBatch is the most requests a shard handles in one group commit.
	MaxBatch int
	// BattleRetryBudget is the size of the battle retry throttle's token
	// bucket (gRPC's retryThrottling maxTokens): every failed battle attempt
	// costs one token, every success gives back 0.1, and a failed call is
	// retried only while more than half the tokens are left.
	BattleRetryBudget float64
	// BattleWait is how long a battle call that finds every battle instance
	// at its adaptive concurrency limit may wait for one of their calls to
	// end, instead of being refused at once; at most BattleWaiters wait at a
	// time. Part of BattlePushback (the limits exist only with it). 0: no
	// waiting.
	BattleWait    time.Duration
	BattleWaiters int
	// BattleRTTTolerance adds a delay signal to the adaptive limit per
	// battle instance (part of BattlePushback): when a 100 ms interval's
	// round trip per unit of work (the job's encoded request and reply,
	// in bytes) exceeds this
	// multiple of the best interval of the last minute, the limit shrinks
	// (see aimd). 0: refusals alone set it.
	// The default 1.5 is Netflix concurrency-limits' Gradient2 rttTolerance.
	BattleRTTTolerance float64
	// MaxBattles caps the battle calls in flight in this process; a battle
	// beyond it is refused with RESOURCE_EXHAUSTED. With Protection off
	// there is no cap (the "before" picture).
	MaxBattles int
	// IdempotencyWindow is how long a mutation's first outcome (result or
	// business error) is kept, by request id and, for a battle, by battle
	// id: a resend within it is answered from the outcome, never applied
	// again. A resend issued (LogicRequest.issued_at_ms) longer ago than
	// this whose outcome is gone is answered REQUEST_EXPIRED. Outcomes are
	// kept for the window plus maxIssuedSkew after they were applied, and
	// purged by their shard.
	IdempotencyWindow time.Duration
	// ShutdownGrace bounds how long in-flight requests may finish after
	// shutdown begins (after Drain) before they are cut off.
	ShutdownGrace time.Duration
	// Drain is how long the tier keeps serving after it reports NOT_SERVING.
	Drain time.Duration

	// Shards that move (-store=postgres): the process serves the shards
	// whose lease it holds (package logic/lease).
	//
	// AdvertiseAddr is the host:port at which the gate reaches this
	// process's gRPC, advertised with its leases (the address of a
	// redirect); empty: GRPCAddr's host (the hostname when it names none,
	// or an unspecified address) with the port GRPCAddr listens on.
	AdvertiseAddr string
	// NodeID names this process in the lease table, unique per process
	// start; empty: the hostname and 6 random hex digits.
	NodeID string
	// LeaseTTL is how long a lease lasts without renewal: a dead process's
	// shards are served elsewhere within about LeaseTTL + 2 × LeaseRenew.
	LeaseTTL time.Duration
	// staticPG (tests only): with StorePostgres, host the shards
	// statically (-instance of -instances) with unfenced commits, as two
	// processes that both serve a shard, to test what the outcomes' keys
	// guarantee without the leases.
	staticPG bool
	// LeaseRenew is how often the leases are renewed, the members' table
	// heartbeated, the shards rebalanced and the lease map read; it must
	// be less than half of LeaseTTL. It is also the retry_after of a
	// request refused while its shard moves.
	LeaseRenew time.Duration

	// Protection turns every overload mechanism below on (true) or off at
	// once; a mechanism is active when Protection and its own flag are both
	// true. Off is the "before" picture the load test compares against.
	Protection bool
	// RejectEarly refuses requests at the fill thresholds. Off: a request
	// waits (blocks) for room in the shard's channel, until there is room or
	// its caller's context ends.
	RejectEarly bool
	// DropExpired answers a request whose caller has gone by the time the
	// shard picks it up with a deadline error, unexecuted. Off: it is
	// executed anyway (its reply goes nowhere).
	DropExpired bool
	// BattleRetry retries a battle call that failed with RESOURCE_EXHAUSTED
	// or UNAVAILABLE once, on another battle instance, under the retry
	// throttle. Off: no retries. With one battle address there is no other
	// instance, so there are never retries.
	BattleRetry bool
	// BattlePushback honours a battle instance's refusal: an instance that
	// answers RESOURCE_EXHAUSTED or UNAVAILABLE is left alone ("cooling")
	// until its grpc-retry-pushback-ms has passed (100 ms when it sent none);
	// the picker skips cooling instances, and when every instance is cooling
	// a DEFAULT or SHEDDABLE job is refused locally (RESOURCE_EXHAUSTED,
	// retry after the earliest end of cooling) without any RPC, at admission
	// when it is a new request for an action that runs a job. A CRITICAL call still tries the instance
	// whose cooling ends first. Off: every call goes out round robin.
	BattlePushback bool
}

// The stores of Config.Store.
const (
	StoreBolt     = "bolt"
	StorePostgres = "postgres"
)

// DefaultConfig is the configuration used when nothing is set. DataDir (or,
// with StorePostgres, PostgresURL) and BattleAddrs have no default and must
// be set.
func DefaultConfig() Config {
	return Config{
		GRPCAddr:              ":9000",
		OpsAddr:               ":9001",
		Store:                 StoreBolt,
		PostgresMaxConns:      8,
		Shards:                8,
		Instance:              0,
		Instances:             1,
		QueueSize:             1024,
		RejectFill:            0.9,
		RejectFillSheddable:   0.5,
		QueueMaxWait:          50 * time.Millisecond,
		BattleTimeout:         5 * time.Second,
		BattleResolveInterval: 10 * time.Second,
		BattleRetryBudget:     10,
		MaxBatch:              256,
		MaxBattles:            256,
		BattleWait:            20 * time.Millisecond,
		BattleWaiters:         8,
		BattleRTTTolerance:    1.5,
		IdempotencyWindow:     24 * time.Hour,
		ShutdownGrace:         10 * time.Second,
		Drain:                 0,
		LeaseTTL:              5 * time.Second,
		LeaseRenew:            time.Second,
		Protection:            true,
		RejectEarly:           true,
		DropExpired:           true,
		BattleRetry:           true,
		BattlePushback:        true,
	}
}

// rejectEarly, dropExpired, battleRetry and battlePushback say whether each
// mechanism is active: its own switch and the master switch are both on.
func (c Config) rejectEarly() bool    { return c.Protection && c.RejectEarly }
func (c Config) dropExpired() bool    { return c.Protection && c.DropExpired }
func (c Config) battleRetry() bool    { return c.Protection && c.BattleRetry }
func (c Config) battlePushback() bool { return c.Protection && c.BattlePushback }

// admitMaxWait is the estimated wait above which admission refuses a
// DEFAULT request (0: no time rule); it is part of rejectEarly.
func (c Config) admitMaxWait() time.Duration {
	if !c.rejectEarly() {
		return 0
	}
	return c.QueueMaxWait
}

// staleAfter is how long a DEFAULT or SHEDDABLE request may have waited when
// its shard picks it up before it is answered busy unexecuted (0: never); it
// is part of dropExpired.
func (c Config) staleAfter() time.Duration {
	if !c.dropExpired() {
		return 0
	}
	return 2 * c.QueueMaxWait
}

// unprotectedBattles stands for "no cap": an empty-struct channel of that
// size costs no memory.
const unprotectedBattles = 1 << 24

func (c Config) maxBattles() int {
	if !c.Protection {
		return unprotectedBattles
	}
	return c.MaxBattles
}

// maxRetryTokens bounds -battle-retry-budget, as gRPC bounds maxTokens.
const maxRetryTokens = 1000

// maxIdempotencyWindow bounds -idempotency-window (a year).
const maxIdempotencyWindow = 366 * 24 * time.Hour

// maxIssuedSkew is how far in the future (by the shard's clock) a request's
// issued_at_ms may lie, for clocks that disagree; beyond it the request is
// BAD_REQUEST. It is also the margin by which outcomes outlive the window,
// so that a resend inside the window always finds its outcome.
const maxIssuedSkew = 5 * time.Minute

// keepOutcomes is how long after it was applied an outcome is kept.
func (c Config) keepOutcomes() time.Duration { return c.IdempotencyWindow + maxIssuedSkew }

// maxPostgresConns bounds -postgres-max-conns (PostgreSQL's own default
// max_connections is 100).
const maxPostgresConns = 1000

// postgres says whether the shards live in PostgreSQL.
func (c Config) postgres() bool { return c.Store == StorePostgres }

// maxShards bounds -shards so that a typo cannot open a million files.
const maxShards = 4096

// Validate returns every problem with c; each names its flag.
func (c Config) Validate() error {
	var errs []error
	if c.GRPCAddr == "" {
		errs = append(errs, errors.New("-grpc-addr: must not be empty"))
	}
	if c.OpsAddr == "" {
		errs = append(errs, errors.New("-ops-addr: must not be empty"))
	}
	switch c.Store {
	case "", StoreBolt:
		if c.DataDir == "" {
			errs = append(errs, errors.New("-data-dir: must not be empty with -store bolt"))
		}
	case StorePostgres:
		if c.PostgresURL == "" {
			errs = append(errs, errors.New("-postgres-url: must be set with -store postgres (or LOGIC_POSTGRES_URL; the password may come from PGPASSWORD)"))
		}
		if c.PostgresMaxConns < 1 || c.PostgresMaxConns > maxPostgresConns {
			errs = append(errs, fmt.Errorf("-postgres-max-conns: must be in 1..%d, got %d", maxPostgresConns, c.PostgresMaxConns))
		}
	default:
		errs = append(errs, fmt.Errorf("-store: must be %q or %q, got %q", StoreBolt, StorePostgres, c.Store))
	}
	if c.Shards <= 0 || c.Shards > maxShards {
		errs = append(errs, fmt.Errorf("-shards: must be in 1..%d, got %d", maxShards, c.Shards))
	}
	if c.postgres() {
		errs = append(errs, c.leaseErrors()...)
	} else {
		instFlag, inst, known := "-instance", c.Instance, true
		if c.InstanceFromHostname {
			instFlag = "-instance-from-hostname"
			if c.Instance != 0 {
				errs = append(errs, fmt.Errorf("-instance-from-hostname: cannot be combined with -instance %d", c.Instance))
			}
			var err error
			if inst, err = c.hostnameOrdinal(); err != nil {
				errs = append(errs, err)
				known = false
			}
		}
		switch {
		case c.Instances <= 0:
			errs = append(errs, fmt.Errorf("-instances: must be > 0, got %d", c.Instances))
		case !known:
		case c.InstanceFromHostname && inst >= c.Instances:
			errs = append(errs, fmt.Errorf("-instance-from-hostname: ordinal %d must be < -instances (%d)", inst, c.Instances))
		case inst < 0 || inst >= c.Instances:
			errs = append(errs, fmt.Errorf("-instance: must be in [0, %d), got %d", c.Instances, inst))
		case c.Shards > 0 && inst >= c.Shards:
			errs = append(errs, fmt.Errorf("%s: %d hosts no shard of %d (-shards must be >= -instances)", instFlag, inst, c.Shards))
		}
	}
	if c.QueueSize <= 0 {
		errs = append(errs, fmt.Errorf("-queue-size: must be > 0, got %d", c.QueueSize))
	}
	if !(c.RejectFill > 0 && c.RejectFill <= 1) {
		errs = append(errs, fmt.Errorf("-reject-fill: must be in (0, 1], got %v", c.RejectFill))
	}
	if !(c.RejectFillSheddable > 0 && c.RejectFillSheddable <= 1) {
		errs = append(errs, fmt.Errorf("-reject-fill-sheddable: must be in (0, 1], got %v", c.RejectFillSheddable))
	} else if c.RejectFillSheddable > c.RejectFill && c.RejectFill > 0 && c.RejectFill <= 1 {
		errs = append(errs, fmt.Errorf("-reject-fill-sheddable: must be <= -reject-fill (%v), got %v", c.RejectFill, c.RejectFillSheddable))
	}
	if c.QueueMaxWait < 0 {
		errs = append(errs, fmt.Errorf("-queue-max-wait: must be >= 0 (0: off), got %v", c.QueueMaxWait))
	}
	if !(c.BattleRetryBudget > 0 && c.BattleRetryBudget <= maxRetryTokens) {
		errs = append(errs, fmt.Errorf("-battle-retry-budget: must be in (0, %d], got %v", maxRetryTokens, c.BattleRetryBudget))
	}
	if len(c.BattleAddrs) == 0 && c.Jobs == nil {
		errs = append(errs, errors.New("-battle-addrs: must list at least one address"))
	}
	for _, a := range c.BattleAddrs {
		if strings.TrimSpace(a) == "" {
			errs = append(errs, fmt.Errorf("-battle-addrs: empty address in %q", strings.Join(c.BattleAddrs, ",")))
			break
		}
	}
	if _, _, err := battleDNSTarget(c.BattleAddrs); err != nil {
		errs = append(errs, err)
	}
	if c.BattleResolveInterval < minResolveInterval {
		errs = append(errs, fmt.Errorf("-battle-resolve-interval: must be >= %v, got %v", minResolveInterval, c.BattleResolveInterval))
	}
	if c.BattleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("-battle-timeout: must be > 0, got %v", c.BattleTimeout))
	}
	if c.MaxBatch <= 0 {
		errs = append(errs, fmt.Errorf("-max-batch: must be > 0, got %d", c.MaxBatch))
	}
	if c.BattleWait < 0 || c.BattleWait > time.Second {
		errs = append(errs, fmt.Errorf("-battle-wait: must be in [0, 1s], got %v", c.BattleWait))
	}
	if c.BattleRTTTolerance != 0 && !(c.BattleRTTTolerance >= 1 && c.BattleRTTTolerance <= 100) {
		errs = append(errs, fmt.Errorf("-battle-rtt-tolerance: must be 0 (off) or in [1, 100], got %v", c.BattleRTTTolerance))
	}
	if c.BattleWaiters < 1 || c.BattleWaiters > 10_000 {
		errs = append(errs, fmt.Errorf("-battle-waiters: must be in 1..10000, got %d", c.BattleWaiters))
	}
	if c.MaxBattles <= 0 {
		errs = append(errs, fmt.Errorf("-max-battles: must be > 0, got %d", c.MaxBattles))
	}
	if c.IdempotencyWindow < time.Second || c.IdempotencyWindow > maxIdempotencyWindow {
		errs = append(errs, fmt.Errorf("-idempotency-window: must be in [1s, %v], got %v", maxIdempotencyWindow, c.IdempotencyWindow))
	}
	if c.ShutdownGrace <= 0 {
		errs = append(errs, fmt.Errorf("-shutdown-grace: must be > 0, got %v", c.ShutdownGrace))
	}
	if c.Drain < 0 {
		errs = append(errs, fmt.Errorf("-drain: must be >= 0, got %v", c.Drain))
	}
	return errors.Join(errs...)
}

// hostnameOrdinal is the trailing "-N" of the hostname's first label
// ("logic-2", "logic-2.logic.levee.svc" are 2), or -1 and an error naming
// -instance-from-hostname.
func (c Config) hostnameOrdinal() (int, error) {
	hostname := c.Hostname
	if hostname == nil {
		hostname = os.Hostname
	}
	h, err := hostname()
	if err != nil {
		return -1, fmt.Errorf("-instance-from-hostname: %w", err)
	}
	label, _, _ := strings.Cut(h, ".")
	i := strings.LastIndexByte(label, '-')
	digits := label[i+1:]
	if i < 0 || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return -1, fmt.Errorf("-instance-from-hostname: hostname %q has no -N ordinal", h)
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return -1, fmt.Errorf("-instance-from-hostname: hostname %q: ordinal %w", h, err)
	}
	return n, nil
}

// resolveInstance returns c with Instance taken from the hostname when
// InstanceFromHostname is set (Validate has checked it), so that the rest
// of the tier reads Instance only.
func (c Config) resolveInstance() (Config, error) {
	if !c.InstanceFromHostname {
		return c, nil
	}
	n, err := c.hostnameOrdinal()
	if err != nil {
		return c, err
	}
	c.Instance, c.InstanceFromHostname = n, false
	return c, nil
}

// hosted lists the shards this instance hosts, in order.
func (c Config) hosted() []int {
	var out []int
	for s := 0; s < c.Shards; s++ {
		if shardmap.Instance(s, c.Instances) == c.Instance {
			out = append(out, s)
		}
	}
	return out
}
