package gate

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/leveehq/levee/internal/grpcdial"
	"github.com/leveehq/levee/internal/shardmap"
	"github.com/leveehq/levee/internal/tlsconf"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// maxOwnerConns bounds the connections the pool dials to owners it learnt
// of (the -logic-addrs' own do not count): past it the least recently used
// one is closed, preferably one that no shard points to any more.
const maxOwnerConns = 64

// logicPool holds the gate's gRPC connections to the logic tier and knows
// where a player's shard is served.
//
// The -logic-addrs are its entry points, one connection each, dialed at
// start: a shard's entry point is shardmap.Instance(shard, len(addrs)). With
// logic on bbolt that is the shard's owner, and nothing else ever happens
// (the cache below stays empty). Logic on PostgreSQL answers a request for
// a shard it does not hold with the owner's address (apperr.NotOwner); the
// gate remembers it (owners: at most one entry per shard) and routes the
// shard's requests to it over a connection dialed on first use (dialed:
// at most maxOwnerConns), until that connection fails or the owner answers
// UNAVAILABLE (forget), when the shard goes back to its entry point.
// Once logic has redirected at all (redirecting), the entry points are
// interchangeable: any logic process answers with the owner, so a shard
// whose own entry point is failing enters by the next one that is not (a
// logic process gone for good must not strand the shards it was the entry
// of). With bbolt no redirect ever comes and a shard's entry point is its
// only host.
type logicPool struct {
	sec       grpcdial.Security
	shards    int
	entries   []*logicConn          // the -logic-addrs, in instance order
	entryAt   map[string]*logicConn // the entries by address
	cacheSize prometheus.Gauge      // gate_logic_owner_cache_size; nil: none
	tick      atomic.Uint64         // the LRU clock of dialed connections
	nCached   atomic.Int64          // shards with a cached owner (under mu for writes)
	// redirecting: logic has answered with an owner at least once.
	redirecting atomic.Bool

	mu     sync.RWMutex
	owners []*logicConn          // shard -> its cached owner; nil: its entry point
	dialed map[string]*logicConn // owner connections by address (not entry points)
	closed bool
}

// logicConn is one connection to a logic process.
type logicConn struct {
	addr   string
	cc     *grpc.ClientConn
	client leveev2.LogicClient
	used   atomic.Uint64 // the pool's tick when a request last went to it (dialed ones)
	refs   int           // shards whose cached owner it is (under the pool's mu)
}

// failing reports whether c is in TRANSIENT_FAILURE: its last connection
// attempt failed (the process is down, or cut off: the keepalive of
// internal/grpcdial gives up a silent one). gRPC would fail a call at once
// then, without sending it.
func (c *logicConn) failing() bool { return c.cc.GetState() == connectivity.TransientFailure }

// errPoolClosed: the gate has stopped and closed its logic connections.
var errPoolClosed = errors.New("the logic connections are closed")

// newLogicPool dials the entry points; cacheSize (may be nil) follows the
// number of cached owners.
func newLogicPool(sec grpcdial.Security, addrs []string, shards int, cacheSize prometheus.Gauge) (*logicPool, error) {
	p := &logicPool{sec: sec, shards: shards, entryAt: make(map[string]*logicConn, len(addrs)),
		cacheSize: cacheSize, owners: make([]*logicConn, shards), dialed: make(map[string]*logicConn)}
	for _, a := range addrs {
		c, err := p.dial(a)
		if err != nil {
			_ = p.close()
			return nil, err
		}
		p.entries = append(p.entries, c)
		if p.entryAt[a] == nil {
			p.entryAt[a] = c
		}
	}
	return p, nil
}

func (p *logicPool) dial(addr string) (*logicConn, error) {
	cc, err := p.sec.Dial(addr, tlsconf.RoleLogic)
	if err != nil {
		return nil, fmt.Errorf("logic %s: %w", addr, err)
	}
	return &logicConn{addr: addr, cc: cc, client: leveev2.NewLogicClient(cc)}, nil
}

// shardOf is the shard that owns playerID.
func (p *logicPool) shardOf(playerID string) int { return shardmap.Shard(playerID, p.shards) }

// route is the connection a request for shard goes to: its cached owner
// unless that connection is failing (the entry is dropped then), else its
// entry point.
func (p *logicPool) route(shard int) *logicConn {
	if p.nCached.Load() > 0 { // never with bbolt: no lock on that path
		p.mu.RLock()
		o := p.owners[shard]
		p.mu.RUnlock()
		if o != nil {
			if !o.failing() {
				o.used.Store(p.tick.Add(1))
				return o
			}
			p.forget(shard, o)
		}
	}
	i := shardmap.Instance(shard, len(p.entries))
	e := p.entries[i]
	if !e.failing() || !p.redirecting.Load() {
		return e
	}
	for k := 1; k < len(p.entries); k++ {
		if alt := p.entries[(i+k)%len(p.entries)]; !alt.failing() {
			return alt
		}
	}
	return e
}

// unreachable reports whether the connection a request for shard would go
// to (route) is failing; the gate refuses such a request itself, knowing it
// was not executed.
func (p *logicPool) unreachable(shard int) bool { return p.route(shard).failing() }

// follow is the connection to a shard's owner at addr, as a logic process
// answered for a request of shard: dialed on first use, and cached as
// shard's owner when the answer was about shard (ownerShard == shard; a
// different one is a -shards mismatch between the tiers, followed for
// this request only).
func (p *logicPool) follow(shard, ownerShard int, addr string) (*logicConn, error) {
	p.redirecting.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPoolClosed
	}
	c := p.entryAt[addr]
	if c == nil {
		c = p.dialed[addr]
	}
	if c == nil {
		p.evictLocked()
		var err error
		if c, err = p.dial(addr); err != nil {
			return nil, err
		}
		p.dialed[addr] = c
	}
	c.used.Store(p.tick.Add(1))
	if ownerShard == shard {
		p.setLocked(shard, c)
	}
	return c, nil
}

// forget drops shard's cached owner if it is c (nil: whichever it is), so
// the shard's next request goes to its entry point.
func (p *logicPool) forget(shard int, c *logicConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o := p.owners[shard]; o != nil && (c == nil || o == c) {
		p.setLocked(shard, nil)
	}
}

// setLocked makes c (nil: none) shard's cached owner.
func (p *logicPool) setLocked(shard int, c *logicConn) {
	old := p.owners[shard]
	if old == c {
		return
	}
	if old != nil {
		old.refs--
		p.nCached.Add(-1)
	}
	if c != nil {
		c.refs++
		p.nCached.Add(1)
	}
	p.owners[shard] = c
	if p.cacheSize != nil {
		p.cacheSize.Set(float64(p.nCached.Load()))
	}
}

// evictLocked makes room for one more dialed connection: at the bound it
// closes the least recently used one that no shard points to, or, if every
// one is some shard's owner, the least recently used one, dropping the
// shards that point to it (their requests in flight on it fail; the
// shards' next ones go to their entry points).
func (p *logicPool) evictLocked() {
	if len(p.dialed) < maxOwnerConns {
		return
	}
	// before: c goes before v (unreferenced first, then least recent).
	before := func(c, v *logicConn) bool {
		if (c.refs == 0) != (v.refs == 0) {
			return c.refs == 0
		}
		return c.used.Load() < v.used.Load()
	}
	var victim *logicConn
	for _, c := range p.dialed {
		if victim == nil || before(c, victim) {
			victim = c
		}
	}
	if victim.refs > 0 {
		for s, o := range p.owners {
			if o == victim {
				p.setLocked(s, nil)
			}
		}
	}
	delete(p.dialed, victim.addr)
	_ = victim.cc.Close()
}

// close closes every connection, the entry points and the dialed ones;
// follow fails afterwards.
func (p *logicPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for _, c := range p.entries {
		errs = append(errs, c.cc.Close())
	}
	for s := range p.owners {
		p.setLocked(s, nil)
	}
	for a, c := range p.dialed {
		errs = append(errs, c.cc.Close())
		delete(p.dialed, a)
	}
	return errors.Join(errs...)
}
