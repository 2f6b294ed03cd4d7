package deploycheck_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leveehq/levee/tools/deploycheck"
)

const good = "testdata/good"

// checkTree runs every check on a tree laid out as the repository is.
func checkTree(t *testing.T, root string, withK8s bool) []error {
	t.Helper()
	rf, errs := deploycheck.CheckObservability(root)
	if withK8s {
		errs = append(errs, deploycheck.CheckK8s(context.Background(), kubectl(t), root, rf)...)
	}
	return errs
}

func TestGoodTreePasses(t *testing.T) {
	kubectl(t)
	report(t, checkTree(t, good, true))
}

// copyTree copies testdata/good into a temporary directory.
func copyTree(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(good, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(good, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// edit replaces old, which must occur exactly once, with new in root/file,
// so that a mutation that no longer applies fails the test instead of
// testing nothing.
func edit(t *testing.T, root, file, old, new string) {
	t.Helper()
	p := filepath.Join(root, file)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), old); n != 1 {
		t.Fatalf("%s: %q occurs %d times, want 1", file, old, n)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	gateYAML   = "k8s/base/gate.yaml"
	logicYAML  = "k8s/base/logic.yaml"
	battleYAML = "k8s/base/battle.yaml"
	hpaYAML    = "k8s/base/hpa.yaml"
	rulesYAML  = deploycheck.RulesFile
	promRule   = "k8s/base/monitoring/prometheusrule.yaml"
	adapter    = "k8s/overlays/prometheus-adapter/adapter-rules.yaml"
	scaledObj  = "k8s/overlays/keda/scaledobject.yaml"
	tlsCerts   = "k8s/overlays/tls/certs.yaml"
	pgLogic    = "k8s/overlays/postgres/logic.yaml"
	pgKust     = "k8s/overlays/postgres/kustomization.yaml"
	dash       = deploycheck.DashboardFile
)

// TestChecksFail breaks the good tree one way at a time and expects the
// error naming what broke.
func TestChecksFail(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		old, new string
		want     []string // every one appears in a single error
	}{
		// strict decoding
		{"misspelt field", gateYAML, "terminationGracePeriodSeconds: 40", "terminationGracePeriodSecond: 40",
			[]string{"kustomization k8s/base", "Deployment levee/gate", `unknown field "spec.template.spec.terminationGracePeriodSecond"`}},
		{"unknown kind", gateYAML, "kind: PodDisruptionBudget", "kind: PodDisruptionBudgett",
			[]string{"PodDisruptionBudgett levee/gate", "no kind"}},
		// selectors
		{"service selector matches no pod", gateYAML, "name: gate-admin\n  labels:\n    app.kubernetes.io/name: gate\nspec:\n  selector:\n    app.kubernetes.io/name: gate\n",
			"name: gate-admin\n  labels:\n    app.kubernetes.io/name: gate\nspec:\n  selector:\n    app.kubernetes.io/name: gat\n",
			[]string{"Service levee/gate-admin (kustomization k8s/base)", "matches no pod template"}},
		{"workload selector misses its template", battleYAML, "matchLabels:\n      app.kubernetes.io/name: battle\n  template",
			"matchLabels:\n      app.kubernetes.io/name: battl\n  template",
			[]string{"Deployment levee/battle", "does not match its pod template"}},
		{"network policy peer matches no pod", "k8s/base/networkpolicy.yaml", "app.kubernetes.io/name: gate\n      ports:", "app.kubernetes.io/name: gat\n      ports:",
			[]string{"NetworkPolicy levee/logic-from-gate", "ingress[0] peer 0 podSelector", "matches no pod template"}},
		// ports
		{"service targetPort names no port", logicYAML, "targetPort: grpc", "targetPort: grcp",
			[]string{"Service levee/logic", "targetPort grcp is not a port of StatefulSet levee/logic"}},
		{"probe port missing", gateYAML, "port: 8081", "port: 8083",
			[]string{`Deployment levee/gate (kustomization k8s/base) container "gate"`, "readinessProbe grpc port 8083"}},
		{"probe named port missing", gateYAML, "port: ops\n", "port: opz\n",
			[]string{`container "gate"`, "livenessProbe httpGet port opz"}},
		{"healthcheck exec port missing", logicYAML, "127.0.0.1:9001", "127.0.0.1:9002",
			[]string{"StatefulSet levee/logic", "exec healthcheck -addr port 9002"}},
		{"podmonitor port missing", "k8s/base/monitoring/podmonitor.yaml", "- port: ops", "- port: metrics",
			[]string{"PodMonitor levee/battle", "port metrics is not a port"}},
		// references and secrets
		{"secret in the manifests", "k8s/base/namespace.yaml", "name: levee\n", "name: levee\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: levee-secrets\nstringData:\n  token-secret: hunter2\n",
			[]string{"Secret levee/levee-secrets", "carries data"}},
		{"secretKeyRef to an unknown secret", gateYAML, "name: levee-secrets\n                  key: admin-token", "name: levee-secret\n                  key: admin-token",
			[]string{"Deployment levee/gate", `Secret "levee-secret" is neither rendered nor an operator Secret`}},
		{"secretKeyRef to an unknown key", gateYAML, "key: admin-token", "key: admin-tokn",
			[]string{"Deployment levee/gate", `key "admin-tokn" is not one of operator Secret levee-secrets's keys`}},
		{"statefulset service not headless", logicYAML, "  clusterIP: None\n", "",
			[]string{"StatefulSet levee/logic", "is not headless"}},
		// resources and security
		{"GOMEMLIMIT above the limit", gateYAML, "value: 900MiB", "value: 1GiB",
			[]string{`container "gate"`, "GOMEMLIMIT 1GiB (1073741824 bytes) is not below the memory limit 1Gi"}},
		{"no cpu limit", battleYAML, `limits: {cpu: "1", memory: 256Mi}`, "limits: {memory: 256Mi}",
			[]string{`Deployment levee/battle (kustomization k8s/base) container "battle"`, "no cpu limit"}},
		{"writable root filesystem", logicYAML, "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false",
			[]string{"StatefulSet levee/logic", "readOnlyRootFilesystem is not true"}},
		{"unconfined seccomp", battleYAML, "type: RuntimeDefault", "type: Unconfined",
			[]string{"Deployment levee/battle", "seccompProfile is not RuntimeDefault"}},
		{"capabilities kept", logicYAML, `drop: ["ALL"]`, `drop: ["NET_RAW"]`,
			[]string{"StatefulSet levee/logic", "capabilities do not drop ALL"}},
		// gate
		{"grace period too short", gateYAML, "terminationGracePeriodSeconds: 40", "terminationGracePeriodSeconds: 20",
			[]string{"Deployment levee/gate", "terminationGracePeriodSeconds 20s is shorter than preStop 10s + -drain 5s + -shutdown-grace 10s = 25s"}},
		{"ops port on the load balancer", gateYAML, "    - {name: ws, port: 80, targetPort: ws}\n", "    - {name: ws, port: 80, targetPort: ws}\n    - {name: admin, port: 8082, targetPort: 8082}\n",
			[]string{"Service levee/gate", `LoadBalancer Service port 8082 reaches Deployment levee/gate (kustomization k8s/base)'s private port "ops"`}},
		// certificates (tls.go)
		{"tier mounts another role's Secret", battleYAML, "secretName: levee-battle-tls", "secretName: levee-logic-tls",
			[]string{"Deployment levee/battle (kustomization k8s/base)", "does not mount Secret levee-battle-tls"}},
		{"cluster key outside the Secret", logicYAML, "LEVEE_CLUSTER_KEY, value: /certs/cluster/tls.key", "LEVEE_CLUSTER_KEY, value: /certs/tls.key",
			[]string{`StatefulSet levee/logic (kustomization k8s/base) container "logic"`, "LEVEE_CLUSTER_KEY=/certs/tls.key is not a key of the mounted Secret levee-logic-tls"}},
		{"gate without its edge key", gateYAML, "            - {name: GATE_TLS_KEY, value: /certs/edge/tls.key}\n", "",
			[]string{`Deployment levee/gate (kustomization k8s/base) container "gate"`, "no GATE_TLS_KEY"}},
		{"certificate of the wrong role", tlsCerts, `uris: ["spiffe://levee/battle"]`, `uris: ["spiffe://levee/logic"]`,
			[]string{"Certificate levee/battle", "URIs [spiffe://levee/logic], want [spiffe://levee/battle]"}},
		{"certificate without client auth", tlsCerts, "dnsNames: [\"gate.levee.svc\"]\n  usages: [digital signature, server auth, client auth]", "dnsNames: [\"gate.levee.svc\"]\n  usages: [digital signature, server auth]",
			[]string{"Certificate levee/gate", `lack "client auth"`}},
		{"certificate from no issuer", tlsCerts, "issuerRef: {kind: Issuer, name: selfsigned}", "issuerRef: {kind: Issuer, name: selfsignd}",
			[]string{"Certificate levee/ca (kustomization k8s/overlays/tls)", `issuerRef Issuer "selfsignd" is not a rendered Issuer`}},
		{"certificate field misspelt", tlsCerts, "isCA: true", "isCa: true",
			[]string{"kustomization k8s/overlays/tls", "Certificate levee/ca", `unknown field "spec.isCa"`}},
		{"CA issuer on a leaf", tlsCerts, "  isCA: true\n", "",
			[]string{"Issuer levee/ca", "Certificate ca is not isCA"}},
		{"mounted Secret no Certificate writes", tlsCerts, "secretName: levee-edge-tls", "secretName: levee-edge",
			[]string{"Deployment levee/gate (kustomization k8s/overlays/tls)", "mounts Secret levee-edge-tls, which no rendered Certificate in namespace \"levee\" writes"}},
		{"certificate outside the pods' namespace", tlsCerts, "metadata: {name: gate, namespace: levee}", "metadata: {name: gate}",
			[]string{"Deployment levee/gate (kustomization k8s/overlays/tls)", "mounts Secret levee-gate-tls, which no rendered Certificate in namespace \"levee\" writes"}},
		// logic's store (logicstore.go)
		{"shards differ", logicYAML, `"-shards", "8"`, `"-shards", "16"`,
			[]string{`Deployment levee/gate (kustomization k8s/base) container "gate": -shards 8, but StatefulSet levee/logic`, "-shards 16"}},
		{"postgres: shards differ", pgKust, `"-shards", "256"`, `"-shards", "8"`,
			[]string{`Deployment levee/gate (kustomization k8s/overlays/postgres) container "gate": -shards 8`, "Deployment levee/logic", "-shards 256"}},
		{"postgres: password in the manifest", pgLogic, "name: PGPASSWORD\n              valueFrom: {secretKeyRef: {name: levee-postgres, key: password}}", "name: PGPASSWORD\n              value: hunter2",
			[]string{"Deployment levee/logic (kustomization k8s/overlays/postgres)", "PGPASSWORD is not from a secretKeyRef"}},
		{"postgres: secret key misspelt", pgLogic, "key: url", "key: uri",
			[]string{"Deployment levee/logic", `key "uri" is not one of operator Secret levee-postgres's keys`}},
		{"postgres: advertised address undefined", pgLogic, "- name: POD_IP\n", "- name: MY_IP\n",
			[]string{"Deployment levee/logic", `uses $(POD_IP), which is not an env variable`}},
		{"postgres: advertised address on the ops port", pgLogic, `"$(POD_IP):9000"`, `"$(POD_IP):9001"`,
			[]string{"Deployment levee/logic", "is not on the container's grpc port"}},
		{"postgres: a bbolt flag", pgLogic, `args: ["-battle-addrs"`, `args: ["-data-dir", "/data", "-battle-addrs"`,
			[]string{"Deployment levee/logic", "-data-dir is a flag of the bbolt store"}},
		{"postgres: a StatefulSet", pgLogic, "kind: Deployment\nmetadata:\n  name: logic\n", "kind: StatefulSet\nmetadata:\n  name: logic-pg\n",
			[]string{"StatefulSet levee/logic-pg (kustomization k8s/overlays/postgres)", "run it as a Deployment"}},
		{"postgres: headless entry", pgLogic, "  selector: {app.kubernetes.io/name: logic, app.kubernetes.io/part-of: levee}\n  ports:", "  clusterIP: None\n  selector: {app.kubernetes.io/name: logic, app.kubernetes.io/part-of: levee}\n  ports:",
			[]string{`-logic-addrs logic-entry.levee.svc.cluster.local:9000`, "is headless"}},
		{"postgres: gate enters no Service", pgKust, "logic-entry.levee.svc.cluster.local:9000", "logic.levee.svc.cluster.local:9000",
			[]string{`container "gate": -logic-addrs logic.levee.svc.cluster.local:9000`, "no rendered Service levee/logic"}},
		// metrics chain
		{"HPA metric no adapter rule makes", hpaYAML, "name: battle_pressure\n", "name: battle_pressur\n",
			[]string{"HorizontalPodAutoscaler levee/battle (kustomization k8s/overlays/prometheus-adapter)", `Pods metric "battle_pressur" is produced by no prometheus-adapter rule`}},
		{"adapter series not recorded", adapter, "'instance:battle_latency_seconds:p99_1m{", "'instance:battle_latency_seconds:p99_5m{",
			[]string{"ConfigMap monitoring/levee-adapter-rules", "rules[0]", `series "instance:battle_latency_seconds:p99_5m" is not a recording rule`}},
		{"adapter name pattern matches nothing", adapter, `matches: "^instance:(battle_pressure):ratio_1m$"`, `matches: "^instance:(battle_pressure):ratio_5m$"`,
			[]string{"rules[1]", "does not match series"}},
		{"adapter rule maps no pods", adapter, "template: <<.Resource>>", "overrides: {namespace: {resource: namespace}}",
			[]string{"HorizontalPodAutoscaler levee/battle", `Pods metric "battle_pressure"`, "map no label to pods"}},
		{"adapter config misspelt", adapter, "seriesQuery: '{__name__", "seriesQuerry: '{__name__",
			[]string{"ConfigMap monitoring/levee-adapter-rules", "key config.yaml", `unknown field "seriesQuerry"`}},
		{"KEDA bounds differ", scaledObj, "minReplicaCount: 5", "minReplicaCount: 3",
			[]string{"ScaledObject levee/battle (kustomization k8s/overlays/keda)", "minReplicaCount 3, the HPA's minReplicas is 5"}},
		{"KEDA threshold differs", scaledObj, `threshold: "0.1"`, `threshold: "0.2"`,
			[]string{"ScaledObject levee/battle", "threshold 0.2, the HPA's battle_pressure target is 0.1"}},
		{"KEDA queries no recording rule", scaledObj, "max(job:battle_pressure:ratio_1m{", "max(battle_pressure_ratio{",
			[]string{"ScaledObject levee/battle", "reads no recording rule"}},
		{"KEDA average value", scaledObj, "name: battle-pressure\n      metricType: Value", "name: battle-pressure\n      metricType: AverageValue",
			[]string{"ScaledObject levee/battle", `triggers[1] (battle-pressure): metricType "AverageValue", want Value`}},
		{"KEDA field misspelt", scaledObj, "maxReplicaCount: 30", "maxReplicas: 30",
			[]string{"ScaledObject levee/battle", `unknown field "spec.maxReplicas"`}},
		{"KEDA beside the HPA", "k8s/overlays/keda/kustomization.yaml", "      $patch: delete\n", "",
			[]string{"HorizontalPodAutoscaler levee/battle (kustomization k8s/overlays/keda)", "is rendered beside a ScaledObject"}},
		// PromQL
		{"bad alert expr", rulesYAML, "expr: job:battle_latency_seconds:p99_1m > 0.5", "expr: job:battle_latency_seconds:p99_1m > > 0.5",
			[]string{rulesYAML, `group "levee-alerts" rule 0 (alert LeveeBattleP99High): expr`}},
		{"bad recording expr in the PrometheusRule", promRule, "expr: sum by (pod) (gate_active_connections) > 200000", "expr: sum by (pod) (gate_active_connections > 200000",
			[]string{"PrometheusRule levee/levee", "alert LeveeGateConnectionsHigh", "expr"}},
		{"bad adapter metricsQuery", adapter, "(<<.Series>>{<<.LabelMatchers>>})'\n      - seriesQuery", "(<<.Series>>{<<.LabelMatchers>>}'\n      - seriesQuery",
			[]string{"ConfigMap monitoring/levee-adapter-rules", "rules[0]", "metricsQuery"}},
		{"bad KEDA query", scaledObj, `max(job:battle_pressure:ratio_1m{job="battle"})`, `max(job:battle_pressure:ratio_1m{job="battle"}`,
			[]string{"ScaledObject levee/battle", "triggers[1] (battle-pressure): query"}},
		{"PrometheusRule differs from the rules file", promRule, "for: 2m", "for: 3m",
			[]string{"PrometheusRule levee/levee", `group "levee-alerts" differs from ` + rulesYAML}},
		// dashboard
		{"broken dashboard query", dash, `max by (pod) (logic_queue_depth)`, `max by (pod) (logic_queue_depth`,
			[]string{dash, `panel 5 "Logic queue depth": target 0 expr`}},
		{"dashboard misspelt field", dash, `"schemaVersion"`, `"schemaVersoin"`,
			[]string{dash, "unexpected field 'schemaVersoin'"}},
		{"key panel threshold missing", dash, `"value": 200000`, `"value": 150000`,
			[]string{dash, "gate connections: no threshold step at 200000"}},
		{"panel without targets", dash, `"targets": [
            {
              "refId": "A",
              "datasource": {
                "type": "prometheus",
                "uid": "${datasource}"
              },
              "expr": "max by (pod) (logic_queue_depth)",
              "legendFormat": "{{pod}}"
            }
          ]`, `"targets": []`,
			[]string{`panel 5 "Logic queue depth": no targets`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			withK8s := strings.HasPrefix(tc.file, "k8s/") || tc.file == rulesYAML
			if withK8s {
				kubectl(t)
			}
			root := copyTree(t)
			edit(t, root, tc.file, tc.old, tc.new)
			if strings.HasPrefix(tc.file, "k8s/base/") && !slices.ContainsFunc(tc.want, func(w string) bool { return strings.Contains(w, "overlays") }) {
				// The base's own render shows the error: spare the
				// overlays' kubectl runs (the test would otherwise
				// render about a hundred times).
				if err := os.RemoveAll(filepath.Join(root, "k8s", "overlays")); err != nil {
					t.Fatal(err)
				}
			}
			errs := checkTree(t, root, withK8s)
			for _, err := range errs {
				if containsAll(err.Error(), tc.want) {
					return
				}
			}
			t.Errorf("no error contains all of %q; got %d errors:", tc.want, len(errs))
			for _, err := range errs {
				t.Log(err)
			}
		})
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
