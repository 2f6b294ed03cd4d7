package logic

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/leveehq/levee/internal/clock"
)

// dnsScheme is the prefix of a -battle-addrs entry that is looked up in
// DNS and followed (gRPC's spelling of a DNS target without an authority).
const dnsScheme = "dns:///"

// minResolveInterval bounds -battle-resolve-interval from below, and
// minResolveGap is the shortest time between two lookups, however many
// failures ask for an early one.
const (
	minResolveInterval = time.Second
	minResolveGap      = time.Second
)

// lookupTimeout bounds one DNS lookup.
const lookupTimeout = 5 * time.Second

// battleDNSTarget says whether addrs is one "dns:///HOST:PORT" entry and
// returns its HOST:PORT; an entry of that scheme in any other shape is an
// error naming -battle-addrs. A plain list is (_, false, nil).
func battleDNSTarget(addrs []string) (string, bool, error) {
	dns := 0
	for _, a := range addrs {
		if strings.HasPrefix(strings.TrimSpace(a), "dns:") {
			dns++
		}
	}
	if dns == 0 {
		return "", false, nil
	}
	if len(addrs) != 1 {
		return "", false, fmt.Errorf("-battle-addrs: a dns:/// entry must be the only one, got %q", strings.Join(addrs, ","))
	}
	a := strings.TrimSpace(addrs[0])
	hostport, ok := strings.CutPrefix(a, dnsScheme)
	if !ok {
		return "", false, fmt.Errorf("-battle-addrs: %q: want dns:///HOST:PORT (no DNS server authority)", a)
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", false, fmt.Errorf("-battle-addrs: %q: want dns:///HOST:PORT: %v", a, err)
	}
	if host == "" {
		return "", false, fmt.Errorf("-battle-addrs: %q: empty host", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", false, fmt.Errorf("-battle-addrs: %q: port must be a number in 1..65535", a)
	}
	return hostport, true, nil
}

// hostResolver is the part of *net.Resolver discovery uses; tests inject
// a fake.
type hostResolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

var _ hostResolver = (*net.Resolver)(nil)

// battleDiscovery follows the battle instances behind one DNS name (for
// a headless Kubernetes Service, one A/AAAA record per ready pod): every
// interval, and sooner (at most once per minResolveGap) after a call or a
// connection failed as unreachable, it looks host up, and each address is
// one instance on port. New addresses get an instance (connection,
// limiter, logic_battle_limit series) that takes calls at once; an address
// gone from the answer leaves the set at once and its connection closes
// when its calls in flight have ended. A failed lookup or an empty answer
// keeps the last known set (DNS trouble, or a moment with no ready pod,
// should not take every instance away): it is logged and counted in
// logic_battle_resolve_total.
type battleDiscovery struct {
	host, port string
	resolver   hostResolver
	interval   time.Duration
	clk        clock.Clock // the interval's and the gap's time
	log        *slog.Logger
}

// discover makes the client follow d: one lookup now (whose failure only
// leaves the set empty: calls fail UNAVAILABLE and ask for another), then
// the re-resolution goroutine, which close stops. Call it once, after the
// client's fields are set and before any call. Retries (if the client has
// a throttle) go to another instance whenever the set has one.
func (c *battleClient) discover(d battleDiscovery) {
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.disc, c.stop, c.kickCh = &d, cancel, make(chan struct{}, 1)
	c.resolve(ctx)
	c.wg.Go(func() { c.resolveLoop(ctx) })
}

// kick asks for an early lookup; it never blocks, and does nothing with a
// fixed list.
func (c *battleClient) kick() {
	select {
	case c.kickCh <- struct{}{}:
	default:
	}
}

// resolveLoop looks the name up every interval, or at the latest
// minResolveGap after the last lookup once kicked, until ctx ends.
func (c *battleClient) resolveLoop(ctx context.Context) {
	d := c.disc
	t := d.clk.NewTimer(d.interval)
	defer t.Stop()
	last := d.clk.Now() // discover looked up just now
	next := last.Add(d.interval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kickCh:
			if soon := last.Add(minResolveGap); soon.Before(next) {
				next = soon
				resetTimer(t, next.Sub(d.clk.Now()))
			}
			continue
		case <-t.C():
		}
		c.resolve(ctx)
		last = d.clk.Now()
		next = last.Add(d.interval)
		resetTimer(t, d.interval)
	}
}

// resetTimer re-arms t for d (0 when negative), dropping a fire not taken.
func resetTimer(t clock.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C():
		default:
		}
	}
	t.Reset(max(d, 0))
}

// Results of logic_battle_resolve_total.
const (
	resolveOK    = "ok"    // addresses found (the set follows them)
	resolveEmpty = "empty" // no address: the last set is kept
	resolveError = "error" // the lookup failed: the last set is kept
)

// resolve looks the name up once and applies the answer.
func (c *battleClient) resolve(ctx context.Context) {
	d := c.disc
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	ips, err := d.resolver.LookupHost(lctx, d.host)
	cancel()
	if ctx.Err() != nil {
		return // stopping
	}
	n := len(c.set.Load().insts)
	switch {
	case err != nil:
		c.resolves.WithLabelValues(resolveError).Inc()
		d.log.Warn("battle lookup failed; keeping the last known instances", "host", d.host, "err", err, "instances", n)
		return
	case len(ips) == 0:
		c.resolves.WithLabelValues(resolveEmpty).Inc()
		d.log.Warn("battle lookup found no address; keeping the last known instances", "host", d.host, "instances", n)
		return
	}
	c.resolves.WithLabelValues(resolveOK).Inc()
	addrs := make([]string, 0, len(ips))
	for _, ip := range ips {
		addrs = append(addrs, net.JoinHostPort(ip, d.port))
	}
	slices.Sort(addrs)
	c.apply(ctx, slices.Compact(addrs))
}

// apply makes the set the instances at addrs (sorted, distinct): kept
// ones keep their connection and limiter, new ones are dialled, and the
// ones left out are retired once the new set is in place.
func (c *battleClient) apply(ctx context.Context, addrs []string) {
	old := c.set.Load()
	gone := make(map[string]*battleInstance, len(old.insts))
	for _, in := range old.insts {
		gone[in.addr] = in
	}
	insts := make([]*battleInstance, 0, len(addrs))
	var added []string
	for _, a := range addrs {
		if in, ok := gone[a]; ok {
			insts = append(insts, in)
			delete(gone, a)
			continue
		}
		in, err := c.newInstance(a)
		if err != nil { // passthrough dials lazily: only a malformed address
			c.disc.log.Error("battle instance not added", "addr", a, "err", err)
			continue
		}
		insts = append(insts, in)
		added = append(added, a)
		c.wg.Go(func() { c.watch(ctx, in) })
	}
	if len(added) == 0 && len(gone) == 0 {
		return
	}
	if len(insts) == 0 {
		return // nothing could be dialled: keep what there is
	}
	c.set.Store(c.newSet(insts, old))
	c.instances.Set(float64(len(insts)))
	removed := make([]string, 0, len(gone))
	for a, in := range gone {
		c.limits.DeleteLabelValues(a)
		in.retire() // closes when its calls in flight end
		removed = append(removed, a)
	}
	slices.Sort(removed)
	c.disc.log.Info("battle instances changed", "host", c.disc.host, "added", added, "removed", removed, "instances", len(insts))
}

// watch asks for an early lookup whenever in's connection goes to
// TRANSIENT_FAILURE (a battle pod that went away may have a successor at
// another address), until the connection is closed or ctx ends.
func (c *battleClient) watch(ctx context.Context, in *battleInstance) {
	s := in.conn.GetState()
	for s != connectivity.Shutdown {
		if s == connectivity.TransientFailure {
			c.kick()
		}
		if !in.conn.WaitForStateChange(ctx, s) {
			return
		}
		s = in.conn.GetState()
	}
}
