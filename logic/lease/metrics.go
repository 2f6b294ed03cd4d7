package lease

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// logic_shard_moves_total reasons.
const (
	reasonAcquired = "acquired" // this process took a free or expired lease
	reasonReleased = "released" // it handed a shard off (rebalance or shutdown)
	reasonLost     = "lost"     // its lease expired or was taken
)

// metrics are the manager's series. The names follow the logic tier's
// (logic_queue_depth, ...): the registry adds no prefix.
type metrics struct {
	moves        *prometheus.CounterVec
	losses       prometheus.Counter
	held         prometheus.Gauge
	withoutOwner prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, m *Manager) *metrics {
	f := promauto.With(reg) // nil: the series exist but are not registered
	out := &metrics{
		moves: f.NewCounterVec(prometheus.CounterOpts{
			Name: "logic_shard_moves_total",
			Help: "Shard leases this process gained or gave up, by reason: acquired (a free or expired lease taken, Acquired hook), " +
				"released (a graceful hand-off on a rebalance or shutdown, Release hook, then the row freed), " +
				"lost (the lease expired or another process took it; Lost hook).",
		}, []string{"reason"}),
		losses: f.NewCounter(prometheus.CounterOpts{
			Name: "logic_shard_lease_losses_total",
			Help: "Times this process lost shard leases it held (its renewal failed past the local deadline, or the row showed another owner or epoch); " +
				"one per occasion however many shards it took, which logic_shard_moves_total{reason=\"lost\"} counts.",
		}),
		held: f.NewGauge(prometheus.GaugeOpts{
			Name: "logic_shards_held",
			Help: "Shards whose lease this process holds and serves.",
		}),
		withoutOwner: f.NewGauge(prometheus.GaugeOpts{
			Name: "logic_shards_without_owner",
			Help: "Shards with no live lease (free or expired) in the last owner map this process read; a moment above 0 is a move, a lasting one an outage (alert LeveeShardWithoutOwner).",
		}),
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "logic_shard_owner_map_age_seconds",
		Help: "Time since this process last read the shard owner map from the database (refreshed every lease renew period).",
	}, func() float64 { return m.MapAge().Seconds() })
	for _, r := range []string{reasonAcquired, reasonReleased, reasonLost} {
		out.moves.WithLabelValues(r) // at zero from the start, so rates exist
	}
	return out
}
