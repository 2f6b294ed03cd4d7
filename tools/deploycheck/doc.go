// Package deploycheck validates Levee's deployment files offline: the
// kustomize tree under k8s/, the Prometheus rules under deploy/prometheus/
// and the Grafana dashboard under deploy/grafana/dashboards/. Nothing here
// talks to a cluster; the live checks of make k8s-test are beside it, in
// the same module: package live (their rules, on typed objects) and
// cmd/k8scheck (which lists the objects with client-go).
//
// What it checks, each in a file of its own:
//
//   - render.go: `kubectl kustomize DIR` renders k8s/base and every
//     k8s/overlays/* (with a timeout).
//   - decode.go: every rendered document decodes strictly into its Go type
//     (k8s.io/api, the prometheus-operator's PodMonitor and PrometheusRule,
//     cert-manager's Certificate and Issuer from its own Go module, and
//     keda.go's mirror of KEDA's ScaledObject), so a misspelt or unknown
//     field, or an unknown kind, is an error.
//   - selectors.go: Service, PDB, NetworkPolicy and PodMonitor selectors
//     match the pod template of a workload; a workload's selector matches
//     its own template; HPA and ScaledObject targets exist.
//   - ports.go: Service targetPorts, probe and preStop ports, PodMonitor
//     and NetworkPolicy ports exist on the containers they point at.
//   - refs.go: secretKeyRef/configMapKeyRef name rendered objects or the
//     operator-created Secret (levee-secrets); no Secret in the manifests
//     carries data; a StatefulSet's serviceName is a headless Service.
//   - tls.go: every tier mounts its role's certificate Secret and gets the
//     flags' files from it; where Certificates are rendered (k8s/overlays/
//     tls) each mounted Secret is one Certificate's, with the role's URI
//     SAN and usages, issued by a rendered Issuer whose CA chain ends in a
//     self-signed one.
//   - pods.go: requests and limits, GOMEMLIMIT below the memory limit, the
//     restrictive securityContext.
//   - gate.go: the gate's termination grace period covers its preStop
//     pause, -drain and -shutdown-grace; its admin/ops and health ports are
//     never on a LoadBalancer Service.
//   - logicstore.go: logic and the gate set the same -shards; with logic
//     on PostgreSQL (k8s/overlays/postgres), logic is a Deployment without
//     volumes or bbolt flags, its database URL and password come from a
//     Secret, it advertises $(POD_IP) on its grpc port, and the gate's
//     -logic-addrs are ClusterIP Services selecting logic's pods.
//   - metrics.go (with adapter.go): the HPA's Pods metrics are produced by
//     the prometheus-adapter rules, whose series are recording rules; the
//     KEDA ScaledObject queries recording rules and keeps the HPA's bounds.
//   - promql.go, rules.go: every PromQL expression (rules, PrometheusRule,
//     adapter metricsQuery, KEDA queries, dashboard targets) parses with the
//     Prometheus parser; the PrometheusRule carries the rules file's groups.
//   - dashboard.go: the dashboard JSON decodes strictly with the
//     grafana-foundation-sdk, every panel has a datasource and targets, and
//     the seed's three key panels carry their thresholds.
//
// deploycheck_test.go runs every check on the repository's own files (found
// from the package directory), and the other tests show each check failing
// on fixtures under testdata/. This directory is a module of its own (so the
// Kubernetes types and the Prometheus parser are not built into the tiers);
// run the tests with `make deploy-check` (part of `make test`), or
//
//	cd tools/deploycheck && go test ./...
//
// Without kubectl on PATH the render-based tests skip, unless
// LEVEE_REQUIRE_KUBECTL is set, when they fail; make deploy-check sets it.
package deploycheck
