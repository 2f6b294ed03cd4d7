package logic

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/pgschema"
	"github.com/leveehq/levee/logic/lease"
)

// Dynamic hosting (-store=postgres). The shards a process serves are the
// ones whose lease it holds; its lease manager (package logic/lease)
// decides, and tells the server through three hooks, all called from the
// manager's goroutine:
//
//   - acquired(shard, epoch): a new shard on the store fenced by epoch,
//     with a goroutine of its own (owned by the server: shardWG), and
//     put in s.shards, where requests find it.
//   - release(shard): a hand-off (rebalance, shutdown). The shard leaves
//     s.shards and admits nothing more, finishes what it accepted (its
//     last commit included), fails its job flights with UNAVAILABLE and a
//     retry_after, and stops; release returns then, and the manager frees
//     the lease row.
//   - lost(shard): the lease expired or was taken. The shard leaves
//     s.shards and stops at once, answering what is left in its queue
//     UNAVAILABLE unexecuted; a commit of it still running fails by the
//     fence.
//
// A commit the fence refuses (ErrFenced) drops its shard as lost, and
// every reply of the batch that depended on it is UNAVAILABLE: nothing of
// it was applied.
//
// A request for a shard the process does not serve (or whose lease is no
// longer surely its own, leases.Holds) is not executed: it is answered
// with the owner's address when the cached lease map names another
// process (apperr.NotOwner, which the gate follows), else UNAVAILABLE
// with a retry_after of about one renewal period (apperr.NoOwner).

// leaseView is what the server asks of its lease manager per request.
type leaseView interface {
	// Owner is the shard's owner's address from the cached lease map;
	// ok false: no live owner known.
	Owner(shard int) (addr string, ok bool)
	// Holds says whether this process holds shard's lease, at which
	// epoch, with its local deadline not passed.
	Holds(shard int) (epoch int64, ok bool)
}

// errNotHosted is an admission refused because the shard is no longer
// served here (released or lost); the request was not executed, and the
// caller is told where to go instead (Server.gone).
var errNotHosted = errors.New("logic: shard not hosted here")

// leasePoolConns is the size of the lease manager's pool: one statement
// at a time, and one spare for a slow one.
const leasePoolConns = 2

// startLeases sets up dynamic hosting (-store=postgres, after the schema
// is migrated and the gRPC listener is open): the node id, the advertised
// address, the lease manager on a pool of its own with the server's hooks.
// Run runs it. started says when /readyz may say ready: after the manager's
// first pass (its first read of the lease map).
func (s *Server) startLeases() (started func() bool, err error) {
	cfg := s.cfg
	if s.nodeID, err = cfg.resolveNodeID(cfg.Hostname); err != nil {
		return nil, err
	}
	if s.cfg.AdvertiseAddr, err = cfg.resolveAdvertise(s.grpcLis.Addr(), cfg.Hostname); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgSetupTimeout)
	defer cancel()
	if s.leasePool, err = pgschema.Connect(ctx, cfg.PostgresURL, leasePoolConns); err != nil {
		return nil, fmt.Errorf("%w: the lease manager's pool: %w", ErrStore, err)
	}
	mgr, err := lease.New(lease.Config{
		Pool:   s.leasePool,
		Node:   s.nodeID,
		Addr:   s.cfg.AdvertiseAddr,
		Shards: cfg.Shards,
		TTL:    cfg.LeaseTTL,
		Renew:  cfg.LeaseRenew,
		Log:    s.log,
		Reg:    s.reg,
		Hooks:  lease.Hooks{Acquired: s.acquired, Release: s.release, Lost: s.lost},
	})
	if err != nil {
		return nil, fmt.Errorf("logic: %w", err)
	}
	s.mgr, s.leases, s.runLeases = mgr, mgr, mgr.Run
	s.log.Info("logic serves the shards it holds the lease of", "node", s.nodeID, "advertise", s.cfg.AdvertiseAddr,
		"shards", cfg.Shards, "lease_ttl", cfg.LeaseTTL, "lease_renew", cfg.LeaseRenew)
	return func() bool { return mgr.Snapshot() != nil }, nil
}

// shardOpenTimeout bounds opening a leased shard's store (one read), from
// the Acquired hook.
func shardOpenTimeout(cfg Config) time.Duration { return max(cfg.LeaseRenew, time.Second) }

// dynamic says whether the shards move by leases (-store=postgres).
func (s *Server) dynamic() bool { return s.leases != nil }

// leaseRetry is the retry_after of a request refused while its shard moves:
// about the time the lease map takes to learn the new owner.
func (s *Server) leaseRetry() time.Duration { return max(s.cfg.LeaseRenew, minRetryAfter) }

// hostedShard is the shard that serves id here, or nil: with dynamic
// hosting, only while this process surely holds its lease at the epoch
// the shard was started with.
func (s *Server) hostedShard(id int) *shard {
	sh := s.shards[id].Load()
	if s.leases == nil {
		return sh
	}
	epoch, holds := s.leases.Holds(id)
	if sh == nil && holds && epoch != 0 && s.unserved[id].Load() == epoch {
		// Held at this epoch but not served: its store failed to open,
		// or the fence refused a commit and yet the lease is still ours
		// at it (the renewal came late, not another owner). Serve it
		// (again), from the database's state.
		s.unserved[id].Store(0)
		s.acquired(id, epoch)
		sh = s.shards[id].Load()
	}
	if sh == nil || !holds || epoch != sh.epoch || sh.closed.Load() {
		return nil
	}
	return sh
}

// gone is the answer to a request for shard that this process does not
// serve (any more), not executed: with static hosting, only after the
// server began to stop; with dynamic hosting, the owner's address when
// another process is known to hold it, else UNAVAILABLE with retry_after.
// outcome is its logic_requests_total outcome label.
func (s *Server) gone(ctx context.Context, shard int) (outcome string, err error) {
	if s.leases == nil {
		return errOutcome(apperr.ErrShuttingDown), apperr.ToStatus(ctx, apperr.ErrShuttingDown, 0)
	}
	if addr, ok := s.leases.Owner(shard); ok && addr != s.cfg.AdvertiseAddr {
		s.m.notOwner.WithLabelValues(notOwnerRedirect).Inc()
		return "not_owner", apperr.NotOwner(shard, addr)
	}
	s.m.notOwner.WithLabelValues(notOwnerNone).Inc()
	return "no_owner", apperr.NoOwner(ctx, shard, s.leaseRetry())
}

// movedResult answers what a released or lost shard no longer serves.
func (s *Server) movedResult(shard int) result {
	return result{
		err:      fmt.Errorf("%w: shard %d is moving to another logic process; not executed, try again", apperr.ErrUnavailable, shard),
		pushback: s.leaseRetry(),
	}
}

// acquired is the manager's Acquired hook: serve shard, fenced by epoch.
func (s *Server) acquired(id int, epoch int64) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	s.mu.RLock()
	stopping := s.stopping
	s.mu.RUnlock()
	if stopping {
		return
	}
	if old := s.shards[id].Load(); old != nil {
		if old.epoch == epoch && !old.closed.Load() {
			return // already served at this epoch
		}
		s.shards[id].Store(nil)
		old.halt(true)
	}
	st, err := s.openShard(id, epoch)
	if err != nil {
		// Not served yet: the next request for it tries again
		// (hostedShard) and is answered NoOwner meanwhile.
		s.unserved[id].Store(epoch)
		s.log.Error("shard acquired but its store could not be opened; not serving it yet", "shard", id, "epoch", epoch, "err", err)
		return
	}
	sh := newShard(id, st, s)
	own := make(chan struct{})
	sh.stop, sh.ownStop, sh.epoch = own, own, epoch
	sh.stopErr = s.movedResult(id)
	s.shardWG.Go(func() {
		sh.run()
		if err := st.close(); err != nil {
			s.log.Warn("closing a shard's store", "shard", id, "epoch", epoch, "err", err)
		}
	})
	s.shards[id].Store(sh)
	s.log.Info("shard acquired", "shard", id, "epoch", epoch)
}

// release is the manager's Release hook: hand shard off gracefully, and
// return once it has finished what it accepted.
func (s *Server) release(id int) {
	s.hostMu.Lock()
	sh := s.shards[id].Swap(nil)
	s.hostMu.Unlock()
	if sh == nil {
		return
	}
	began := time.Now()
	sh.halt(false)
	<-sh.done
	s.log.Info("shard released", "shard", id, "epoch", sh.epoch, "took", time.Since(began).Round(time.Millisecond))
}

// lost is the manager's Lost hook: stop serving shard at once.
func (s *Server) lost(id int) {
	s.hostMu.Lock()
	sh := s.shards[id].Swap(nil)
	s.hostMu.Unlock()
	if sh == nil {
		return
	}
	sh.halt(true)
	s.log.Info("shard lost", "shard", id, "epoch", sh.epoch)
}

// dropFenced drops sh, whose commit the fence refused: another process
// holds (or may hold) its lease. Called from sh's own goroutine.
func (s *Server) dropFenced(sh *shard, err error) {
	s.unserved[sh.id].Store(sh.epoch)
	s.shards[sh.id].CompareAndSwap(sh, nil)
	sh.halt(true)
	s.log.Info("shard lost: the lease fence refused its commit", "shard", sh.id, "epoch", sh.epoch, "err", err)
}

// dynamicShards are the shards served now by lease.
func (s *Server) dynamicShards() []*shard {
	var out []*shard
	for i := range s.shards {
		if sh := s.shards[i].Load(); sh != nil && sh.ownStop != nil {
			out = append(out, sh)
		}
	}
	return out
}

// leaseErrors are the problems with c's dynamic hosting settings
// (-store=postgres), each naming its flag.
func (c Config) leaseErrors() []error {
	var errs []error
	const why = "not used with -store postgres, where the leases decide which shards a process serves; leave it unset"
	if c.Instance != 0 {
		errs = append(errs, fmt.Errorf("-instance: %s", why))
	}
	if c.Instances != 1 {
		errs = append(errs, fmt.Errorf("-instances: %s", why))
	}
	if c.InstanceFromHostname {
		errs = append(errs, fmt.Errorf("-instance-from-hostname: %s", why))
	}
	switch {
	case c.LeaseRenew <= 0:
		errs = append(errs, fmt.Errorf("-lease-renew: must be > 0, got %v", c.LeaseRenew))
	case c.LeaseTTL <= 2*c.LeaseRenew:
		errs = append(errs, fmt.Errorf("-lease-ttl: must be more than twice -lease-renew (%v), got %v", c.LeaseRenew, c.LeaseTTL))
	}
	if c.AdvertiseAddr != "" {
		host, port, err := net.SplitHostPort(c.AdvertiseAddr)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("-advertise-addr: want host:port, got %q: %w", c.AdvertiseAddr, err))
		case host == "" || unspecified(host):
			errs = append(errs, fmt.Errorf("-advertise-addr: %q names no host the gate could reach (e.g. $(POD_IP):9000)", c.AdvertiseAddr))
		case port == "" || port == "0":
			errs = append(errs, fmt.Errorf("-advertise-addr: %q names no port", c.AdvertiseAddr))
		}
	}
	if len(c.NodeID) > maxNodeID || strings.ContainsFunc(c.NodeID, unicode.IsSpace) {
		errs = append(errs, fmt.Errorf("-node-id: must be at most %d characters without spaces, got %q", maxNodeID, clip(c.NodeID)))
	}
	return errs
}

// maxNodeID bounds -node-id.
const maxNodeID = 128

// unspecified says whether host is an address that names no host (0.0.0.0,
// ::).
func unspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// resolveAdvertise is the address this process advertises with its leases:
// c.AdvertiseAddr, else GRPCAddr's host (the hostname when it names none)
// with the port the gRPC listener got.
func (c Config) resolveAdvertise(lis net.Addr, hostname func() (string, error)) (string, error) {
	if c.AdvertiseAddr != "" {
		return c.AdvertiseAddr, nil
	}
	_, port, err := net.SplitHostPort(lis.String())
	if err != nil {
		return "", fmt.Errorf("-advertise-addr: the gRPC listener's address %q: %w", lis, err)
	}
	host, _, err := net.SplitHostPort(c.GRPCAddr)
	if err != nil || host == "" || unspecified(host) {
		if hostname == nil {
			hostname = os.Hostname
		}
		if host, err = hostname(); err != nil || host == "" {
			return "", fmt.Errorf("-advertise-addr: not set, -grpc-addr %q names no host and the hostname is unknown (%v); set -advertise-addr", c.GRPCAddr, err)
		}
	}
	return net.JoinHostPort(host, port), nil
}

// resolveNodeID is c.NodeID, else the hostname and 6 random hex digits:
// unique per process start, so that a restarted process never mistakes
// its predecessor's leases for its own.
func (c Config) resolveNodeID(hostname func() (string, error)) (string, error) {
	if c.NodeID != "" {
		return c.NodeID, nil
	}
	if hostname == nil {
		hostname = os.Hostname
	}
	h, err := hostname()
	if err != nil || h == "" {
		h = "logic"
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("-node-id: %w", err)
	}
	return fmt.Sprintf("%s-%x", h, b), nil
}
