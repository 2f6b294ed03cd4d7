# shellcheck shell=bash
# The autoscaling loop of make k8s-test (issue 12, phase 2), sourced by
# scripts/k8s-test.sh and using its start, wait_until, free_port, k, kc,
# log, fail and $work. With --autoscale:
#
#   aggregation_certs   a front-proxy CA of its own and the aggregator's
#                       client certificate (CN front-proxy-client); sets
#                       AGGREGATION_FLAGS for kube-apiserver.
#   autoscale_setup     after the CRDs: real battle processes (AUTOSCALE_BATTLES,
#                       2), logic and gate on loopback; Debian's Prometheus
#                       scraping the battles as the battle pods say (below)
#                       with deploy/prometheus/rules/levee.rules.yml;
#                       levee-metrics-adapter serving custom.metrics.k8s.io
#                       from k8s/overlays/prometheus-adapter/adapter-rules.yaml,
#                       registered as APIServices v1beta2 and v1beta1.
#   autoscale_loop      the test overlay tools/k8s/overlays/autoscale
#                       (prometheus-adapter with a short scale-down), then
#                       load until the HPA scales battle above minReplicas,
#                       then none until it is back at minReplicas: the
#                       timeline and its verdicts are k8scheck autoscale's.
#
# Pods and processes. Prometheus scrapes with a file_sd list that the
# component "podsd" (k8scheck podsd) rewrites every second from the battle pods: each pod
# (kwok's, no process behind it) is given one of the real battle processes,
# round-robin in the order the pods appear, kept while the pod exists, and
# its target carries the pod's namespace, name and IP as __meta_kubernetes_*
# labels, relabelled to namespace, pod, instance (podIP:9101) and job=battle
# as the PodMonitor (k8s/base/podmonitors.yaml) would. Pods given the same
# process report the same values: the HPA sees AUTOSCALE_BATTLES distinct
# values repeated; its average is theirs. Enough for what the loop proves
# (real latency and shedding, through the shipped rules and adapter rules,
# move the real HPA), not a per-pod load balance.
#
# Routing. EndpointSlices refuse loopback addresses, and everything here
# listens on 127.0.0.1 only; so the adapter's Service is of type
# ExternalName (externalName: localhost) and kube-apiserver keeps the
# default --enable-aggregator-routing=false: k8s.io/apiserver's
# proxy.ResolveCluster resolves an ExternalName Service to
# https://EXTERNALNAME:PORT, PORT being the APIService's spec.service.port
# (here the adapter's port), with no endpoints looked up.

AUTOSCALE_BATTLES=${AUTOSCALE_BATTLES:-2}
AUTOSCALE_UP_DEADLINE=${AUTOSCALE_UP_DEADLINE:-180}     # s of load for the HPA to scale up
AUTOSCALE_DOWN_DEADLINE=${AUTOSCALE_DOWN_DEADLINE:-300} # s without load to be back at min
AUTOSCALE_MAX_RATE=${AUTOSCALE_MAX_RATE:-3000}          # the load's cap, requests/s
AGGREGATION_FLAGS=()

aggregation_certs() {
	local o=(-days 2 -sha256)
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/front-proxy-ca.key" -out "$pki/front-proxy-ca.crt" "${o[@]}" \
		-subj /CN=levee-k8s-test-front-proxy-ca
	openssl req -newkey rsa:2048 -nodes -keyout "$pki/front-proxy-client.key" -out "$pki/front-proxy-client.csr" \
		-subj /CN=front-proxy-client
	openssl x509 -req -in "$pki/front-proxy-client.csr" -CA "$pki/front-proxy-ca.crt" -CAkey "$pki/front-proxy-ca.key" \
		-CAcreateserial -out "$pki/front-proxy-client.crt" "${o[@]}" \
		-extfile <(printf 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n')
	# The adapter's own identity, given what prometheus-adapter's chart
	# gives it (adapter_rbac), not the test's system:masters.
	openssl req -newkey rsa:2048 -nodes -keyout "$pki/metrics-adapter.key" -out "$pki/metrics-adapter.csr" \
		-subj /CN=levee-metrics-adapter
	openssl x509 -req -in "$pki/metrics-adapter.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
		-CAcreateserial -out "$pki/metrics-adapter.crt" "${o[@]}" \
		-extfile <(printf 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n')
	AGGREGATION_FLAGS=(
		--requestheader-client-ca-file "$pki/front-proxy-ca.crt"
		--requestheader-allowed-names front-proxy-client
		--requestheader-extra-headers-prefix X-Remote-Extra-
		--requestheader-group-headers X-Remote-Group
		--requestheader-username-headers X-Remote-User
		--proxy-client-cert-file "$pki/front-proxy-client.crt"
		--proxy-client-key-file "$pki/front-proxy-client.key"
		--enable-aggregator-routing=false
	)
}

# levee_bins: gate, logic, battle and loadtest, built into $work/bin.
levee_bins() {
	mkdir -p "$work/bin"
	(cd "$ROOT" && CGO_ENABLED=0 $GO build -trimpath -o "$work/bin/" ./cmd/gate ./cmd/logic ./cmd/battle ./cmd/loadtest) ||
		fail "building gate, logic, battle and loadtest"
}

# mtls ROLE: the tier flags for mutual TLS as ROLE, with the certificates
# of levee_certs (scripts/k8s-test.sh); ops is the healthchecks' identity.
mtls() {
	local d=$work/levee-certs
	echo -cluster-ca "$d/ca.crt" -cluster-cert "$d/$1.crt" -cluster-key "$d/$1.key"
}

levee_processes() {
	local i logic_port logic_ops battle_addrs=""
	# shellcheck disable=SC2207 # the paths have no blanks ($work is mktemp's)
	local ops=($(mtls ops))
	battle_ops=()
	for ((i = 0; i < AUTOSCALE_BATTLES; i++)); do
		local bp bo
		free_port bp; free_port bo
		# shellcheck disable=SC2046
		start "battle-$i" "$work/bin/battle" -grpc-addr "127.0.0.1:$bp" -ops-addr "127.0.0.1:$bo" $(mtls battle)
		battle_ops+=("$bo")
		battle_addrs+="${battle_addrs:+,}127.0.0.1:$bp"
		wait_until 30 "battle-$i healthy" "$work/bin/battle" healthcheck -addr "127.0.0.1:$bp" "${ops[@]}"
	done
	free_port logic_port; free_port logic_ops
	# shellcheck disable=SC2046
	start logic "$work/bin/logic" -grpc-addr "127.0.0.1:$logic_port" -ops-addr "127.0.0.1:$logic_ops" \
		-data-dir "$work/logic-data" -shards 8 -battle-addrs "$battle_addrs" $(mtls logic)
	wait_until 30 "logic healthy" "$work/bin/logic" healthcheck -addr "127.0.0.1:$logic_port" "${ops[@]}"
	free_port gate_port; free_port gate_grpc; free_port gate_ops
	token_secret=k8s-test-$RANDOM-$RANDOM-$RANDOM
	# The gate's players' port stays plain ws here (the load below is
	# loopback); gate -> logic -> battle is mutual TLS, as in the pods.
	# shellcheck disable=SC2046
	start gate "$work/bin/gate" -addr "127.0.0.1:$gate_port" -grpc-addr "127.0.0.1:$gate_grpc" \
		-ops-addr "127.0.0.1:$gate_ops" -logic-addrs "127.0.0.1:$logic_port" -shards 8 -token-secret "$token_secret" $(mtls gate)
	wait_until 30 "gate healthy" "$work/bin/gate" healthcheck -addr "127.0.0.1:$gate_grpc" "${ops[@]}"
	# A few seconds of casual players, so that every battle process has
	# served requests and exports battle_requests_total (a labelled
	# counter, absent until then), which the pressure rule divides by: an
	# idle pod then counts as pressure 0, not as a pod without the metric.
	# The control plane starts on the same cores, so a battle may be
	# refused BUSY (typed backpressure, answered) even after the SDK's
	# retries: the warm-up lets a few through (smoke's thresholds[5] is
	# refused == 0); every request must still get exactly one reply.
	timeout 60 "$work/bin/loadtest" run smoke --set 'thresholds[5]=refused < 10' \
		--set 'arrivals.phases[0].players=20' --set 'arrivals.phases[0].duration=1s' \
		--set 'arrivals.phases[1].players=20' --set 'arrivals.phases[1].duration=4s' --set run.duration=5s -progress off \
		-gate-urls "ws://127.0.0.1:$gate_port/ws" -token-secret "$token_secret" >"$work/logs/loadtest-warmup.log" 2>&1 ||
		{ tail -n 20 "$work/logs/loadtest-warmup.log" >&2; fail "the warm-up load (smoke) failed"; }
	for i in "${battle_ops[@]}"; do
		curl -fsS "http://127.0.0.1:$i/metrics" >"$work/battle-metrics.txt" &&
			grep -q '^battle_requests_total' "$work/battle-metrics.txt" ||
			fail "battle on ops port $i served nothing in the warm-up"
	done
}

prometheus_config() {
	cat <<-EOF
		global: {scrape_interval: 2s, scrape_timeout: 2s, evaluation_interval: 2s}
		rule_files: ["$ROOT/deploy/prometheus/rules/levee.rules.yml"]
		scrape_configs:
		  - job_name: battle
		    file_sd_configs: [{files: ["$work/prom/battle-pods.json"], refresh_interval: 2s}]
		    relabel_configs:
		      - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
		      - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
		      - {source_labels: [__meta_kubernetes_pod_ip], target_label: instance, replacement: "\${1}:9101"}
		      - {target_label: job, replacement: battle}
	EOF
}

# adapter_rbac: what prometheus-adapter's Helm chart grants its service
# account: system:auth-delegator (TokenReviews, SubjectAccessReviews), the
# extension-apiserver-authentication-reader Role in kube-system (the
# aggregator's request-header CA), and reading pods and namespaces.
adapter_rbac() {
	cat <<-EOF
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRoleBinding
		metadata: {name: "levee-metrics-adapter:system:auth-delegator"}
		roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
		subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: levee-metrics-adapter}]
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: RoleBinding
		metadata: {name: levee-metrics-adapter-auth-reader, namespace: kube-system}
		roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
		subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: levee-metrics-adapter}]
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRole
		metadata: {name: levee-metrics-adapter-resource-reader}
		rules: [{apiGroups: [""], resources: [namespaces, pods], verbs: [get, list, watch]}]
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRoleBinding
		metadata: {name: levee-metrics-adapter-resource-reader}
		roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: levee-metrics-adapter-resource-reader}
		subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: levee-metrics-adapter}]
	EOF
}

adapter_kubeconfig() {
	cat <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: levee-k8s-test
		  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$pki/ca.crt"}
		users:
		- name: levee-metrics-adapter
		  user: {client-certificate: "$pki/metrics-adapter.crt", client-key: "$pki/metrics-adapter.key"}
		contexts:
		- name: levee-k8s-test
		  context: {cluster: levee-k8s-test, user: levee-metrics-adapter}
		current-context: levee-k8s-test
	EOF
}

adapter_registration() {
	cat <<-EOF
		apiVersion: v1
		kind: Service
		metadata: {name: levee-metrics-adapter, namespace: monitoring}
		spec: {type: ExternalName, externalName: localhost}
	EOF
	local v prio
	for v in v1beta2 v1beta1; do
		prio=200; [[ $v == v1beta1 ]] && prio=100
		cat <<-EOF
			---
			apiVersion: apiregistration.k8s.io/v1
			kind: APIService
			metadata: {name: $v.custom.metrics.k8s.io}
			spec:
			  group: custom.metrics.k8s.io
			  version: $v
			  service: {name: levee-metrics-adapter, namespace: monitoring, port: $adapter_port}
			  insecureSkipTLSVerify: true
			  groupPriorityMinimum: 100
			  versionPriority: $prio
		EOF
	done
}

autoscale_setup() {
	local t0=$SECONDS
	command -v prometheus >/dev/null || "$ROOT/scripts/ensure-promtool.sh" >/dev/null
	[[ -x $TOOLS/levee-metrics-adapter ]] || fail "$TOOLS/levee-metrics-adapter missing: run make k8s-tools"
	levee_bins
	levee_processes

	mkdir -p "$work/prom/data"
	echo '[]' >"$work/prom/battle-pods.json"
	local targets=() o
	for o in "${battle_ops[@]}"; do targets+=("127.0.0.1:$o"); done
	start podsd "$work/bin/k8scheck" podsd -kubeconfig "$work/kubeconfig" -out "$work/prom/battle-pods.json" \
		-targets "$(IFS=,; echo "${targets[*]}")"
	free_port prom_port
	prometheus_config >"$work/prom/prometheus.yml"
	start prometheus prometheus --config.file "$work/prom/prometheus.yml" --storage.tsdb.path "$work/prom/data" \
		--web.listen-address "127.0.0.1:$prom_port" --storage.tsdb.retention.time 2h
	wait_until 60 "Prometheus ready" healthy "http://127.0.0.1:$prom_port/-/ready"

	adapter_rbac | k apply --server-side --validate=strict -f - >/dev/null || fail "the metrics adapter's RBAC"
	adapter_kubeconfig >"$work/adapter.kubeconfig"
	free_port adapter_port
	start metrics-adapter "$TOOLS/levee-metrics-adapter" \
		--config "$ROOT/k8s/overlays/prometheus-adapter/adapter-rules.yaml" \
		--prometheus-url "http://127.0.0.1:$prom_port" \
		--bind-address 127.0.0.1 --secure-port "$adapter_port" --cert-dir "$work/adapter" \
		--lister-kubeconfig "$work/adapter.kubeconfig" --authentication-kubeconfig "$work/adapter.kubeconfig" \
		--authorization-kubeconfig "$work/adapter.kubeconfig"
	wait_until 60 "metrics adapter /readyz" healthy -k "https://127.0.0.1:$adapter_port/readyz"
	# The Service lives in namespace monitoring, as the adapter would.
	k create namespace monitoring --dry-run=client -o yaml | k apply --server-side -f - >/dev/null
	adapter_registration | k apply --server-side --validate=strict -f - >/dev/null ||
		fail "registering the adapter (Service levee-metrics-adapter, APIServices custom.metrics.k8s.io)"
	wait_until 60 "APIServices custom.metrics.k8s.io Available" kc apiservices
	loopback_only
	log "metrics path up in $((SECONDS - t0))s: $AUTOSCALE_BATTLES battle processes, logic, gate; $(prometheus --version 2>&1 | head -n 1 | cut -d' ' -f1-3) on :$prom_port; levee-metrics-adapter on :$adapter_port (APIService -> ExternalName localhost); serves $(kc served-metrics)"
}

# watch_list: NAME=PID of every component that must stay up (for k8scheck).
watch_list() {
	local i out=""
	for i in "${!pids[@]}"; do
		[[ $oneshot == *" ${names[i]} "* ]] || out+="${out:+,}${names[i]}=${pids[i]}"
	done
	echo "$out"
}

autoscale_loop() {
	local file=$work/autoscale.yaml load_pid
	k kustomize "$ROOT/tools/k8s/overlays/autoscale" >"$file"
	test_overlay autoscale "$file"
	# Through the aggregator, both metrics for every pod of namespace levee
	# (no selector: the other pods have no series and are left out) are
	# exactly the battle pods.
	wait_until 30 "the custom metrics API serving every battle pod" kc custom-metrics
	log "autoscale: $(cat "$work/wait.out")"
	log "autoscale: load (loadtest overload, 10 x C, at most $AUTOSCALE_MAX_RATE/s, at most ${AUTOSCALE_UP_DEADLINE}s) until HPA battle scales above its minReplicas"
	# The overload preset, short in its first phases: C from a 5 s closed
	# loop (no search), 5 s at 0.8 x C, then 10 x C for as long as the
	# scale-up may take, at most AUTOSCALE_MAX_RATE requests/s. Battles of
	# 32 units a team and 2,000 ticks (the preset's are 8 and 200): with the
	# preset's cheap battles gate's and logic's protection refuse the excess
	# before battle sees it (measured: battle pressure 0.01 at 10 x C); with
	# these battle is the bottleneck, its in-flight cap sheds (pressure
	# about 0.4) and its p99 passes 0.5 s. Its thresholds are not judged:
	# k8scheck stops it.
	local heavy=(--set 'players.actions[1].request.units=32' --set 'players.actions[1].request.ticks=2000')
	"$work/bin/loadtest" capacity overload -gate-urls "ws://127.0.0.1:$gate_port/ws" -token-secret "$token_secret" \
		-closed-time 5s -search-time 0 -max-rate "$AUTOSCALE_MAX_RATE" -value-out "$work/capacity" "${heavy[@]}" \
		>"$work/logs/loadtest-capacity.log" 2>&1 ||
		{ tail -n 20 "$work/logs/loadtest-capacity.log" >&2; fail "autoscale: loadtest capacity failed"; }
	oneshot+=" loadtest "
	start loadtest "$work/bin/loadtest" run overload -gate-urls "ws://127.0.0.1:$gate_port/ws" \
		-token-secret "$token_secret" -progress off --set "capacity=$(cat "$work/capacity")" \
		--set 'pool.phases[0].duration=5s' --set "pool.phases[1].duration=${AUTOSCALE_UP_DEADLINE}s" \
		--set "pool.max_rate=$AUTOSCALE_MAX_RATE" "${heavy[@]}"
	load_pid=${pids[-1]}
	# The timeline every 5 s while the load scales battle up, 15 s more of
	# load, then (k8scheck stops the load) none until battle is back at
	# minReplicas; it fails naming the HPA when either does not come.
	kc autoscale -prometheus "http://127.0.0.1:$prom_port" -load-pid "$load_pid" -watch "$(watch_list)" \
		-up-deadline "${AUTOSCALE_UP_DEADLINE}s" -down-deadline "${AUTOSCALE_DOWN_DEADLINE}s" ||
		fail "the autoscaling loop (above)"
	kill -TERM -- "-$load_pid" 2>/dev/null || true
	wait "$load_pid" 2>/dev/null || true
	wait_until 60 "overlay autoscale ready after the scale-down" check_ready
	overlay_teardown "$file"
}
