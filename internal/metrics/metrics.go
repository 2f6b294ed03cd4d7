// Package metrics builds each binary's own Prometheus registry (no global
// registry) and the small ops HTTP mux that serves it.
package metrics

import (
	"net/http"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Version is set at build time with -ldflags "-X levee/internal/metrics.Version=...".
var Version = "dev"

// NewRegistry returns a registry with the Go and process collectors and a
// <component>_build_info gauge.
func NewRegistry(component string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: component + "_build_info",
		Help: "Build information about the " + component + " binary; always 1.",
	}, []string{"version", "revision", "goversion"})
	info.WithLabelValues(Version, revision, runtime.Version()).Set(1)
	reg.MustRegister(info)
	return reg
}

// LatencyBuckets are the seed's buckets: 0.01 s × 2^0..9.
var LatencyBuckets = prometheus.ExponentialBuckets(0.01, 2, 10)

// Handler serves reg in the Prometheus exposition format (for /metrics).
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// OpsMux serves /metrics from reg, /healthz (alive) and /readyz (ready()).
// The tiers do not use it: their lifecycle (internal/serve) answers /healthz
// and /readyz itself.
func OpsMux(reg *prometheus.Registry, ready func() bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(reg))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready != nil && !ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}
