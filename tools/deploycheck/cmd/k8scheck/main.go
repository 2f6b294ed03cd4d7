// Command k8scheck is the Go half of make k8s-test (scripts/k8s-test.sh,
// which starts and stops the control plane and the processes behind the
// pods): the checks on the live cluster, through client-go, with the rules
// of package levee/tools/deploycheck/live.
//
//	k8scheck CHECK -kubeconfig FILE [flags]
//
// One-shot checks (exit 0 when it holds, 1 printing on stdout one line per
// object that is not as it should be, each naming the object; the script
// polls them until a deadline):
//
//	nodes -want N          N nodes Ready
//	ready -hpa unavailable|active
//	                       workloads Ready, Services with ready endpoints,
//	                       claims Bound, PDBs counting their pods, HPAs
//	                       evaluated (namespace -n, levee)
//	hpa-metrics (-adapter-rules FILE | -discovery)
//	                       every HPA metric is served: by the adapter rules
//	                       of FILE, or as the custom metrics API's
//	                       discovery lists
//	apiservices            the custom.metrics.k8s.io APIServices Available
//	custom-metrics         the custom metrics API serves the HPA's metrics
//	                       for exactly the battle pods
//
// Printing and doing:
//
//	served-metrics         the metric names the custom metrics API lists
//	table -f FILE          the objects of the rendered FILE (and the claims)
//	                       with their status
//	teardown -f FILE       deletes FILE's objects but namespaces, then the
//	                       ReplicaSets, pods, claims, Secrets and slices of
//	                       the namespace and the test's volumes, waiting
//	drain [-allowed N] [-only pdb]
//	                       the drain checks on the gate (see drain.go)
//	podsd -out FILE -targets ADDR,...
//	                       until SIGTERM: the file_sd list of the battle
//	                       pods, each given one of the real battles
//	autoscale -prometheus URL -load-pid PID [-watch NAME=PID,...]
//	                       the replica timeline while the load (started by
//	                       the script, stopped here with SIGTERM to its
//	                       process group) scales battle up, then idle until
//	                       it is back at minReplicas
//
// Failures print "FAIL: ..." on stderr and exit 1; a usage error exits 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// errFailed is a check that did not hold; its reasons are printed.
var errFailed = errors.New("check failed")

// errUsage is a bad command line.
var errUsage = errors.New("usage")

type command struct {
	name string
	run  func(ctx context.Context, c *cluster, args []string) error
}

var commands = []command{
	{"nodes", cmdNodes},
	{"ready", cmdReady},
	{"hpa-metrics", cmdHPAMetrics},
	{"apiservices", cmdAPIServices},
	{"custom-metrics", cmdCustomMetrics},
	{"served-metrics", cmdServedMetrics},
	{"table", cmdTable},
	{"teardown", cmdTeardown},
	{"drain", cmdDrain},
	{"podsd", cmdPodSD},
	{"autoscale", cmdAutoscale},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: k8scheck %s -kubeconfig FILE [flags]\n", strings.Join(names, "|"))
		return 2
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		cl := &cluster{out: stdout, log: stderr}
		err := c.run(ctx, cl, args[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
			fmt.Fprintf(stderr, "k8scheck %s: %v\n", c.name, err)
			return 2
		case errors.Is(err, errFailed):
			return 1
		}
		cl.logf("FAIL: %v", err)
		return 1
	}
	fmt.Fprintf(stderr, "k8scheck: unknown check %q (%s)\n", args[0], strings.Join(names, ", "))
	return 2
}

// waitFor runs check every half second until it reports nothing, for at
// most limit; on timeout it prints check's last reasons and fails naming
// desc. With K8S_TEST_TRACE=1 it logs the reasons as they change.
func (c *cluster) waitFor(ctx context.Context, limit time.Duration, desc string, check func(context.Context) ([]string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		reasons, err := check(ctx)
		if err == nil && len(reasons) == 0 {
			return nil
		}
		now := strings.Join(reasons, "\n")
		if err != nil {
			now = err.Error()
		}
		if os.Getenv("K8S_TEST_TRACE") == "1" && now != last {
			c.logf("waiting: %s", strings.ReplaceAll(now, "\n", ";"))
		}
		last = now
		select {
		case <-ctx.Done():
			fmt.Fprintln(c.log, last)
			return fmt.Errorf("%s: not within %s", desc, limit)
		case <-tick.C:
		}
	}
}

// report prints reasons, one a line, and fails when there are any.
func (c *cluster) report(reasons []string) error {
	for _, r := range reasons {
		fmt.Fprintln(c.out, r)
	}
	if len(reasons) > 0 {
		return errFailed
	}
	return nil
}

func (c *cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "%s k8s-test: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
