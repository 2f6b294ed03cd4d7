// Package probe reads the servers' own figures from their /metrics pages
// while a load test runs: the gates' connections and waiting players, the
// logic shards' queue depth, battle's p99 latency and every tier's CPU and
// resident memory. It reads the pages with internal/promtext (expfmt,
// histograms included), as the gate's auto-pacer does.
//
// A Probe is used by one goroutine: call Sample once a second or so; rates
// (CPU) and the battle p99 come from the difference between samples.
package probe

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/leveehq/levee/internal/promtext"
)

// Tiers a target may belong to.
const (
	Gate   = "gate"
	Logic  = "logic"
	Battle = "battle"
)

// Level names a Sample returns (the keys of record.Point.Levels).
const (
	GateConnections = "gate_connections" // sum of gate_active_connections
	GateWaiting     = "gate_waiting"     // sum of gate_line_waiting
	// GateConnectionsPeak is the sum of gate_connections_peak (each gate's
	// most connections held at once since it started; a restarted gate
	// starts again from 0) and GateConnectionCap the sum of
	// gate_connection_cap (0 for a gate without the cap), so that
	// max(gate_connections_peak) <= max(gate_connection_cap) holds when no
	// gate ever went past its cap.
	GateConnectionsPeak = "gate_connections_peak"
	GateConnectionCap   = "gate_connection_cap"
	LogicQueueDepth     = "logic_queue_depth" // sum over shards and logic processes
	BattleP99           = "battle_p99"        // seconds, over the last Window, all battle processes
	LogicCommitP99      = "logic_commit_p99"  // seconds, over the last Window: a commit's write and fsync
	// LogicStoreErrors is the sum of logic_store_errors_total (commits and
	// purges that failed; a full disk among them) since logic started.
	LogicStoreErrors = "logic_store_errors"
	// Logic on PostgreSQL (logic/lease): LogicShardsHeld is the sum of
	// logic_shards_held (the shards the probed processes serve: the shard
	// count when every shard has a live owner that answers, less while a
	// dead or frozen process's shards wait for their leases to run out);
	// LogicShardsWithoutOwner the most logic_shards_without_owner any
	// process reports (shards with no live lease in its owner map: a
	// moment above 0 is a move); LogicLeaseLosses the sum of
	// logic_shard_lease_losses_total (a process found its leases gone:
	// paused past them, or cut from the database); LogicShardMoves the sum
	// of logic_shard_moves_total (leases acquired, released and lost);
	// LogicFencedCommits the sum of
	// logic_store_errors_total{op="commit",reason="fenced"} (commits the
	// database refused because the shard's lease was no longer the
	// committer's: a late commit of a process that lost it; the purges
	// fenced so are LogicFencedPurges: a late purge of expired outcomes,
	// which a shard's timer runs at once when a frozen process thaws).
	LogicShardsHeld         = "logic_shards_held"
	LogicShardsWithoutOwner = "logic_shards_without_owner"
	LogicLeaseLosses        = "logic_lease_losses"
	LogicShardMoves         = "logic_shard_moves"
	LogicFencedCommits      = "logic_fenced_commits"
	LogicFencedPurges       = "logic_fenced_purges"
	// "cpu_<tier>" (cores: CPU seconds per second, summed over the tier's
	// processes), "rss_<tier>_mb" (MiB, summed) and "goroutines_<tier>"
	// (go_goroutines, summed) for every tier probed.
)

// Window is how far back the battle p99 looks: the latency histogram's
// increase over about this long, as rate(...[5s]) would.
const Window = 5 * time.Second

// Target is one process's /metrics page.
type Target struct {
	Tier string // gate, logic or battle
	URL  string // http://127.0.0.1:8082/metrics
}

// ParseTargets reads "tier=URL" entries (a bare URL is refused: the tier
// decides what is read).
func ParseTargets(list []string) ([]Target, error) {
	var out []Target
	for _, e := range list {
		tier, u, ok := strings.Cut(e, "=")
		if !ok || (tier != Gate && tier != Logic && tier != Battle) {
			return nil, fmt.Errorf("metrics target %q: want gate=URL, logic=URL or battle=URL", e)
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("metrics target %q: the URL must be http or https", e)
		}
		out = append(out, Target{Tier: tier, URL: u})
	}
	return out, nil
}

// Probe samples a set of targets.
type Probe struct {
	targets []Target
	client  *http.Client
	prev    []*reading // last good reading per target
	windows map[string]*window
	errs    []string
	// counters are the last readings of the gates' rate counters
	// (rates.go), by target and counter.
	counters map[[2]int]counterReading
}

type reading struct {
	at    time.Time
	cpu   float64 // process_cpu_seconds_total
	hasCP bool
}

// New returns a probe of targets; client nil means one with a 900 ms
// timeout.
func New(targets []Target, client *http.Client) *Probe {
	if client == nil {
		client = &http.Client{Timeout: 900 * time.Millisecond}
	}
	return &Probe{targets: targets, client: client, prev: make([]*reading, len(targets)), windows: map[string]*window{}}
}

// Errors returns the scrape errors seen so far (at most one per target and
// kind of error), for the report's warnings.
func (p *Probe) Errors() []string { return p.errs }

// Sample scrapes every target at once and returns the levels, at now. A
// target that fails leaves its figures out.
func (p *Probe) Sample(ctx context.Context, now time.Time) map[string]float64 {
	pages := make([]promtext.Families, len(p.targets))
	errs := make([]error, len(p.targets))
	var wg sync.WaitGroup
	for i, t := range p.targets {
		wg.Go(func() { pages[i], errs[i] = promtext.Fetch(ctx, p.client, t.URL) })
	}
	wg.Wait()
	out := map[string]float64{}
	sums := map[string]*promtext.Hist{} // level -> histogram summed over the tier
	sumHist := func(level string, h promtext.Hist, ok bool) {
		if !ok {
			return
		}
		if cur := sums[level]; cur == nil {
			sums[level] = &h
		} else {
			cur.AddBuckets(h.Bounds, h.Counts, h.Count)
		}
	}
	for i, t := range p.targets {
		if errs[i] != nil {
			p.noteErr(errs[i].Error())
			continue
		}
		pg := pages[i]
		switch t.Tier {
		case Gate:
			add(out, GateConnections, pg, "gate_active_connections")
			add(out, GateWaiting, pg, "gate_line_waiting")
			add(out, GateConnectionsPeak, pg, "gate_connections_peak")
			add(out, GateConnectionCap, pg, "gate_connection_cap")
			p.addGateRates(out, i, pg, now)
		case Logic:
			add(out, LogicQueueDepth, pg, "logic_queue_depth")
			add(out, LogicStoreErrors, pg, "logic_store_errors_total")
			add(out, LogicShardsHeld, pg, "logic_shards_held")
			if v, ok := pg.Sum("logic_shards_without_owner"); ok {
				out[LogicShardsWithoutOwner] = max(out[LogicShardsWithoutOwner], v)
			}
			add(out, LogicLeaseLosses, pg, "logic_shard_lease_losses_total")
			add(out, LogicShardMoves, pg, "logic_shard_moves_total")
			if _, ok := pg["logic_shards_held"]; ok { // logic on PostgreSQL: 0 fenced is a figure too
				out[LogicFencedCommits] += sumWhere(pg, "logic_store_errors_total", map[string]string{"op": "commit", "reason": "fenced"})
				out[LogicFencedPurges] += sumWhere(pg, "logic_store_errors_total", map[string]string{"op": "purge", "reason": "fenced"})
			}
			h, ok := pg.Hist("logic_commit_duration_seconds")
			sumHist(LogicCommitP99, h, ok)
		case Battle:
			h, ok := pg.Hist("battle_latency_seconds")
			sumHist(BattleP99, h, ok)
		}
		if v, ok := pg.Sum("process_resident_memory_bytes"); ok {
			out["rss_"+t.Tier+"_mb"] += v / (1 << 20)
		}
		add(out, "goroutines_"+t.Tier, pg, "go_goroutines")
		if v, ok := pg.Sum("process_cpu_seconds_total"); ok {
			if prev := p.prev[i]; prev != nil && prev.hasCP && now.After(prev.at) && v >= prev.cpu {
				out["cpu_"+t.Tier] += (v - prev.cpu) / now.Sub(prev.at).Seconds()
			}
			p.prev[i] = &reading{at: now, cpu: v, hasCP: true}
		}
	}
	for level, h := range sums {
		w := p.windows[level]
		if w == nil {
			w = &window{}
			p.windows[level] = w
		}
		if q, ok := w.p99(now, *h); ok {
			out[level] = q
		}
	}
	return out
}

// window is a histogram's recent readings, for its quantile over Window.
type window struct{ pts []histReading }

type histReading struct {
	at time.Time
	h  promtext.Hist
}

// p99 keeps h in the window and returns the 0.99 quantile of the increase
// since the oldest reading in it (histogram_quantile's linear
// interpolation within a bucket); false when nothing was observed, or
// when the buckets changed or went down (a restart: it starts again).
func (w *window) p99(now time.Time, h promtext.Hist) (float64, bool) {
	w.pts = append(w.pts, histReading{now, h})
	cut := 0
	for cut < len(w.pts)-1 && now.Sub(w.pts[cut+1].at) >= Window {
		cut++
	}
	w.pts = w.pts[cut:]
	if len(w.pts) < 2 {
		return 0, false
	}
	d, ok := h.Sub(w.pts[0].h)
	if !ok {
		w.pts = w.pts[len(w.pts)-1:]
		return 0, false
	}
	return d.Quantile(0.99)
}

func (p *Probe) noteErr(msg string) {
	for _, e := range p.errs {
		if e == msg {
			return
		}
	}
	if len(p.errs) < 20 {
		p.errs = append(p.errs, msg)
	}
}

// sumWhere is the family's counter and gauge series that have every label
// of labels, summed.
func sumWhere(pg promtext.Families, name string, labels map[string]string) float64 {
	mf := pg[name]
	if mf == nil {
		return 0
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		n := 0
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
				n++
			}
		}
		if n == len(labels) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

func add(out map[string]float64, key string, pg promtext.Families, name string) {
	if v, ok := pg.Sum(name); ok {
		out[key] += v
	}
}
