// Command levee-metrics-adapter serves the custom metrics API
// (custom.metrics.k8s.io v1beta2 and v1beta1) for pods from a Prometheus,
// with prometheus-adapter's rule format: a stand-in for prometheus-adapter
// in the control-plane test, so that the shipped rules
// (k8s/overlays/prometheus-adapter/adapter-rules.yaml) are what the HPA is
// fed by. See README.md and package adapter for what of the format it
// implements.
//
// Besides --config, --prometheus-url and --prometheus-timeout it takes
// custom-metrics-apiserver's flags: the generic API server's serving,
// delegated authentication and authorization flags (--secure-port,
// --cert-dir, --tls-cert-file, --authentication-kubeconfig, ...) and
// --lister-kubeconfig for listing pods.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/component-base/logs"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/metrics"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"

	"github.com/leveehq/levee/tools/metrics-adapter/adapter"
)

type command struct {
	basecmd.AdapterBase

	configPath    string
	prometheusURL string
	promTimeout   time.Duration
}

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "levee-metrics-adapter:", err)
		logs.FlushLogs()
		os.Exit(1)
	}
}

func run() error {
	c := &command{}
	c.Name = "levee-metrics-adapter"
	fs := c.Flags()
	fs.StringVar(&c.configPath, "config", "", "prometheus-adapter rules: a ConfigMap manifest with data config.yaml, or a bare config.yaml (required)")
	fs.StringVar(&c.prometheusURL, "prometheus-url", "http://127.0.0.1:9090", "base URL of the Prometheus HTTP API")
	fs.DurationVar(&c.promTimeout, "prometheus-timeout", 5*time.Second, "timeout of one Prometheus query")
	logs.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.configPath == "" {
		return fmt.Errorf("--config is required")
	}
	ms, err := adapter.LoadFile(c.configPath)
	if err != nil {
		return err
	}
	prom, err := adapter.NewPrometheus(c.prometheusURL, &http.Client{Timeout: c.promTimeout})
	if err != nil {
		return err
	}
	dyn, err := c.DynamicClient()
	if err != nil {
		return err
	}
	c.WithCustomMetrics(adapter.NewProvider(ms, prom, adapter.DynamicPodLister{Client: dyn}, time.Now))
	if err := metrics.RegisterMetrics(legacyregistry.Register); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	for _, m := range ms {
		klog.InfoS("serving", "metric", m.Name, "series", m.Series, "prometheus", c.prometheusURL)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.Run(ctx)
}
