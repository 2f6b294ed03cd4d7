#!/usr/bin/env bash
# make k8s-test: the manifests in k8s/ on a real control plane, offline.
#
#   scripts/k8s-test.sh [--overlays "base prometheus-adapter keda dev tls postgres"]
#                       [--break misspelt,selector,metric,cert] [--autoscale]
#
# Starts, all on 127.0.0.1 in a temp dir: etcd, kube-apiserver,
# kube-controller-manager (every controller, the HPA's included) and
# kube-scheduler from .tools/ (make k8s-tools, pinned in tools/k8s/go.mod;
# etcd at the version Kubernetes requires), and kwok with K8S_TEST_NODES fake nodes, whose stages
# make scheduled pods Running and Ready without a kubelet. Installs the
# CRDs the manifests use (PodMonitor, PrometheusRule, ScaledObject,
# cert-manager's Certificate and Issuer) from their Go modules, then for
# each overlay: the namespace, the Secret levee-secrets with random values
# (as k8s/README.md has an operator do), the Secret levee-postgres (a
# database URL that points nowhere and a random password: the overlay
# postgres reads them; kwok runs no process, so no database is needed), the
# certificate Secrets
# levee-{gate,logic,battle,edge}-tls from one levee-certs run (the CA and
# the role certificates, as docs/deploying.md has an operator do without
# cert-manager),
# a default StorageClass with hostPath PersistentVolumes for logic's claims,
# and the rendered overlay with `kubectl apply --server-side
# --validate=strict`; then waits until every Deployment and StatefulSet has
# all its replicas Ready (an HPA's target at least at minReplicas), every
# Service's EndpointSlices list one ready endpoint per Ready pod its
# selector matches, every PVC is Bound, every PDB counts the pods it
# covers and every Ready tier pod's certificate Secrets hold a key pair
# that chains to their ca.crt with the tier's role (spiffe://levee/<role>);
# prints a table; deletes the overlay's objects, pods, claims and
# volumes before the next one.
#
# --break MODE,... then applies broken copies of the prometheus-adapter
# overlay, each of which must make the checks fail with a message naming
# the broken object (tests of the test):
#   misspelt  Deployment gate with terminationGracePeriodSecond (no s)
#   selector  Service gate-admin selecting app.kubernetes.io/name=no-such-app
#   metric    HPA battle with a third metric, battle_no_such_metric
#   cert      the manifests as they are, but Secret levee-battle-tls made
#             from logic's certificate (role spiffe://levee/logic)
#
# --autoscale (phase 2 of issue 12, scripts/lib/k8s-autoscale.sh): before
# the overlays, real battle, logic and gate processes, Debian's Prometheus
# scraping the battles as the battle pods (with the shipped recording rules)
# and levee-metrics-adapter registered as custom.metrics.k8s.io through the
# aggregation layer; every HPA must then be ScalingActive (K8S_TEST_HPA=active)
# and the metric break reads the served names from the adapter's discovery;
# after the overlays, the test overlay tools/k8s/overlays/autoscale is
# loaded until the HPA scales battle up, then left idle until it scales back
# down, and the replica timeline printed.
#
# The checks themselves are Go, on client-go: k8scheck (tools/deploycheck/
# cmd/k8scheck, its rules in tools/deploycheck/live, built into the temp
# dir first); this script starts and stops the control plane and the
# processes, applies, and prints.
#
# The overlay postgres (logic as a Deployment on PostgreSQL): kwok runs no
# container, so what it proves is that the API server accepts the
# Deployment, its Secret references and the Service logic-entry, that the
# scheduler places the 3 logic pods with the spread constraints, that they
# (as kwok makes them) count as Ready in the Deployment, the PDB and
# logic-entry's EndpointSlices, and that no claim is left behind: not that
# logic runs on PostgreSQL (make test and the compose test do that).
#
# Everything it started is stopped on exit, failure and ^C included (each
# component runs in a process group of its own), and the temp dir removed.
#
# The overlay tls (cert-manager's Issuers and Certificates): cert-manager
# does not run here, so its objects are only proven accepted by the API
# server with its CRDs' schemas (strict server-side validation); the
# Secrets its Certificates would write are the levee-certs ones above, with
# the same names and keys (tools/deploycheck checks offline that each
# mounted Secret is a Certificate's, with the role's URI SAN).
#
# Environment: K8S_TEST_KEEP=1 keeps the temp dir (logs/ has every
# component's log); K8S_TEST_TRACE=1 logs what is not ready yet as it
# changes, and the teardowns; K8S_TEST_DEADLINE (180 s) and
# K8S_TEST_BREAK_DEADLINE (30 s) bound the waits for an overlay; K8S_TEST_NODES
# (3) fake nodes; K8S_TEST_HPA (unavailable | active, see check_hpa);
# K8S_TEST_KCM_ARGS, extra kube-controller-manager flags. With --autoscale:
# AUTOSCALE_BATTLES (2) battle processes, AUTOSCALE_UP_DEADLINE (180 s of
# load) and AUTOSCALE_DOWN_DEADLINE (300 s idle), AUTOSCALE_MAX_RATE (3000/s).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${TOOLS:-$ROOT/.tools}
GO=${GO:-go}
PROMETHEUS_OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:?set by the Makefile}
KEDA_VERSION=${KEDA_VERSION:?set by the Makefile}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:?set by the Makefile}
NODES=${K8S_TEST_NODES:-3}
DEADLINE=${K8S_TEST_DEADLINE:-180}        # seconds for an overlay to be ready
BREAK_DEADLINE=${K8S_TEST_BREAK_DEADLINE:-30}
# unavailable: phase 1, nothing serves custom metrics; every HPA must be
# evaluated by the controller and report its metrics unavailable.
# active: phase 2, every HPA must reach ScalingActive=True.
HPA_EXPECT=${K8S_TEST_HPA:-unavailable}
SERVICE_CIDR=10.96.0.0/16
POD_CIDR=10.244.0.0/16

overlays="base prometheus-adapter keda dev tls postgres"
breaks=""
autoscale=0
while (($#)); do
	case $1 in
	--overlays) overlays=$2; shift 2 ;;
	--break) breaks=${2//,/ }; shift 2 ;;
	--autoscale) autoscale=1 HPA_EXPECT=active; shift ;;
	*) echo "usage: $0 [--overlays LIST] [--break misspelt,selector,metric,cert] [--autoscale]" >&2; exit 2 ;;
	esac
done

started=$SECONDS
log() { printf '%s k8s-test: %s\n' "$(date +%T)" "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
trace() { [[ ${K8S_TEST_TRACE:-0} != 1 ]] || log "$*"; }

KUBECTL=$TOOLS/kubectl
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
	[[ -x $TOOLS/$b ]] || fail "$TOOLS/$b missing: run make k8s-tools"
done
for b in openssl curl ss; do
	command -v $b >/dev/null || fail "$b missing: run scripts/ensure-k8s-test-deps.sh"
done

# free_port (outside the kernel's ephemeral range) from scripts/lib/cluster.sh.
# shellcheck source=scripts/lib/cluster.sh
CLUSTER_NAME=k8s-test
. "$ROOT/scripts/lib/cluster.sh"
# cluster.sh exports LEVEE_INSECURE=1 for its plaintext loopback clusters;
# the processes here run mutual TLS (k8s-autoscale.sh), which excludes it.
unset LEVEE_INSECURE

work=$(mktemp -d "${TMPDIR:-/tmp}/levee-k8s-test.XXXXXX")
mkdir -p "$work/logs" "$work/pki" "$work/pv" "$work/bin"
names=() pids=()

# Stops every component, newest first: SIGTERM to its process group, then
# SIGKILL to what is left after 10 s.
cleanup() {
	local rc=$? i pid
	trap - EXIT INT TERM
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM -- "-${pids[i]}" 2>/dev/null || true
	done
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		pid=${pids[i]}
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if ((rc != 0)); then
		for n in "${names[@]}"; do
			echo "--- last lines of $n's log ---" >&2
			tail -n 5 "$work/logs/$n.log" >&2 || true
		done
	fi
	if [[ ${K8S_TEST_KEEP:-0} == 1 ]]; then log "kept $work"; else rm -rf "$work"; fi
	log "$( ((rc == 0)) && echo PASS || echo FAIL) in $((SECONDS - started))s"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME CMD...: runs CMD in a session (so a process group) of its own,
# its output in logs/NAME.log. Not in a subshell: pids must stay ours.
start() {
	local name=$1; shift
	setsid "$@" >"$work/logs/$name.log" 2>&1 </dev/null &
	names+=("$name") pids+=($!)
}

# alive: fails naming the first component that has exited (but those
# named in oneshot, which end by themselves).
oneshot=" "
alive() {
	local i
	for i in "${!pids[@]}"; do
		[[ $oneshot == *" ${names[i]} "* ]] && continue
		kill -0 "${pids[i]}" 2>/dev/null || { tail -n 20 "$work/logs/${names[i]}.log" >&2; fail "${names[i]} exited"; }
	done
}

# wait_until SECONDS DESC CMD...: runs CMD until it succeeds, polling, for at
# most SECONDS; on timeout prints CMD's last output (what is not ready yet)
# and fails. Components dying meanwhile fail it at once.
wait_until() {
	local limit=$1 desc=$2 end=$((SECONDS + $1)); shift 2
	while ! "$@" >"$work/wait.out" 2>&1; do
		alive
		if [[ ${K8S_TEST_TRACE:-0} == 1 ]] && ! cmp -s "$work/wait.out" "$work/wait.last"; then
			log "waiting: $(tr '\n' ';' <"$work/wait.out")"
			cp "$work/wait.out" "$work/wait.last"
		fi
		if ((SECONDS >= end)); then
			cat "$work/wait.out" >&2
			fail "$desc: not within ${limit}s"
		fi
		sleep 0.5
	done
}

# --- certificates and kubeconfig -------------------------------------------

pki=$work/pki
certs() {
	local o=(-days 2 -sha256)
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" "${o[@]}" \
		-subj /CN=levee-k8s-test-ca
	# sign NAME SUBJECT EXTENSIONS
	sign() {
		openssl req -newkey rsa:2048 -nodes -keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "$2"
		openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
			-out "$pki/$1.crt" "${o[@]}" -extfile <(printf '%s\n' "$3")
	}
	sign apiserver /CN=kube-apiserver "keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:${SERVICE_CIDR%.0/*}.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	# system:masters: cluster-admin for the test, the controller-manager,
	# the scheduler and kwok (the controllers themselves get service-account
	# credentials: --use-service-account-credentials).
	sign admin "/O=system:masters/CN=levee-k8s-test-admin" "keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
	openssl genrsa -out "$pki/sa.key" 2048
	openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
}

kubeconfig() {
	cat >"$work/kubeconfig" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: levee-k8s-test
		  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$pki/ca.crt"}
		users:
		- name: admin
		  user: {client-certificate: "$pki/admin.crt", client-key: "$pki/admin.key"}
		contexts:
		- name: levee-k8s-test
		  context: {cluster: levee-k8s-test, user: admin}
		current-context: levee-k8s-test
	EOF
}

k() { "$KUBECTL" --kubeconfig "$work/kubeconfig" "$@"; }

# kc CHECK [FLAGS...]: k8scheck's CHECK on the cluster (see its doc).
kc() { "$work/bin/k8scheck" "$1" -kubeconfig "$work/kubeconfig" "${@:2}"; }

k8scheck_bin() {
	(cd "$ROOT/tools/deploycheck" && CGO_ENABLED=0 $GO build -trimpath -o "$work/bin/k8scheck" ./cmd/k8scheck) ||
		fail "building k8scheck (tools/deploycheck/cmd/k8scheck)"
}

# levee_certs: the cluster's CA and certificates (cmd/levee-certs) in
# $work/levee-certs; the edge certificate also names gate-admin, which the
# gate's PodMonitor scrapes it as.
levee_certs() {
	(cd "$ROOT" && CGO_ENABLED=0 $GO build -trimpath -o "$work/bin/" ./cmd/levee-certs) || fail "building levee-certs"
	"$work/bin/levee-certs" -out "$work/levee-certs" -validity 48h \
		-edge-names gate-admin.levee.svc,gate-admin.levee.svc.cluster.local >/dev/null || fail "levee-certs"
}

# tls_secrets: levee-<role>-tls and levee-edge-tls from levee_certs' files,
# with the keys a cert-manager Certificate's Secret has.
tls_secrets() {
	local role from d=$work/levee-certs
	for role in gate logic battle edge; do
		from=$role
		# --break cert: battle's Secret holds logic's pair
		[[ ${break_mode:-} != cert || $role != battle ]] || from=logic
		k -n levee create secret generic "levee-$role-tls" --type kubernetes.io/tls \
			--from-file=tls.crt="$d/$from.crt" --from-file=tls.key="$d/$from.key" --from-file=ca.crt="$d/ca.crt" >/dev/null
	done
}

healthy() { curl -fsS --max-time 2 "$@" >/dev/null 2>&1; }

# --- the control plane -----------------------------------------------------

kwok_stages() {
	local dir
	dir=$(cd "$ROOT/tools/k8s" && $GO list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
	[[ -d $dir ]] || fail "kwok's module is not in the module cache (make k8s-tools)"
	# The stages kwokctl uses by default: nodes Ready with lease heartbeats,
	# pods Running and Ready once scheduled, deleted at once when deleted.
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		echo "---"
		cat "$dir/kustomize/stage/$f"
	done
}

fake_nodes() {
	local i
	for ((i = 0; i < NODES; i++)); do
		cat <<-EOF
			---
			apiVersion: v1
			kind: Node
			metadata:
			  name: kwok-node-$i
			  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
			  labels:
			    kubernetes.io/hostname: kwok-node-$i
			    kubernetes.io/os: linux
			    kubernetes.io/arch: amd64
			    topology.kubernetes.io/zone: zone-$((i % 3))
			    type: kwok
			status:
			  allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
			  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
		EOF
	done
}

control_plane() {
	local etcd_port peer_port kcm_port sched_port
	free_port etcd_port; free_port peer_port; free_port api_port
	free_port kcm_port; free_port sched_port
	certs >"$work/logs/openssl.log" 2>&1 || { cat "$work/logs/openssl.log" >&2; fail "making certificates"; }
	aggregation_certs >>"$work/logs/openssl.log" 2>&1 || { cat "$work/logs/openssl.log" >&2; fail "making the front-proxy certificates"; }
	kubeconfig

	start etcd "$TOOLS/etcd" --name levee-k8s-test --data-dir "$work/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
		--initial-cluster "levee-k8s-test=http://127.0.0.1:$peer_port"
	wait_until 30 "etcd healthy" healthy "http://127.0.0.1:$etcd_port/health"

	start kube-apiserver "$TOOLS/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address 127.0.0.1 --secure-port "$api_port" --cert-dir "$work/apiserver" \
		--tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
		--client-ca-file "$pki/ca.crt" --authorization-mode Node,RBAC \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" "${AGGREGATION_FLAGS[@]}"
	local tls=(--cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key")
	wait_until 90 "kube-apiserver /readyz" healthy "${tls[@]}" "https://127.0.0.1:$api_port/readyz"

	# --controllers=* is every controller on by default (the HPA, endpoints,
	# endpointslice, service-account and token, namespace, PV binder,
	# disruption, node lifecycle...). The HPA looks every 5 s instead of 15:
	# the same decisions (the manifests' behavior policies are in seconds of
	# their own), sooner. K8S_TEST_KCM_ARGS replaces the extra flags.
	# shellcheck disable=SC2086
	start kube-controller-manager "$TOOLS/kube-controller-manager" \
		--kubeconfig "$work/kubeconfig" \
		--authentication-kubeconfig "$work/kubeconfig" --authorization-kubeconfig "$work/kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$kcm_port" --cert-dir "$work/kcm" \
		--controllers '*' --use-service-account-credentials \
		--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
		--cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
		--leader-elect=false ${K8S_TEST_KCM_ARGS---horizontal-pod-autoscaler-sync-period=5s}
	start kube-scheduler "$TOOLS/kube-scheduler" \
		--kubeconfig "$work/kubeconfig" \
		--authentication-kubeconfig "$work/kubeconfig" --authorization-kubeconfig "$work/kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false
	kwok_stages >"$work/kwok.yaml"
	start kwok "$TOOLS/kwok" --kubeconfig "$work/kubeconfig" --config "$work/kwok.yaml" \
		--manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
		--cidr "$POD_CIDR" --node-ip 10.255.0.1 --node-lease-duration-seconds 40
	wait_until 60 "kube-controller-manager /healthz" healthy -k "https://127.0.0.1:$kcm_port/healthz"
	wait_until 60 "kube-scheduler /readyz" healthy -k "https://127.0.0.1:$sched_port/readyz"

	loopback_only
	fake_nodes | k apply --server-side --validate=strict -f - >/dev/null
	wait_until 60 "$NODES kwok nodes Ready" kc nodes -want "$NODES"
	log "control plane up in $((SECONDS - started))s: $("$TOOLS/kube-apiserver" --version), etcd $("$TOOLS/etcd" --version | sed -n 's/^etcd Version: //p'), $NODES kwok nodes"
}

# loopback_only: fails if a component listens anywhere but 127.0.0.1 / ::1.
loopback_only() {
	local i bad
	for i in "${!pids[@]}"; do
		bad=$(ss -Htlnp '! ( src 127.0.0.1 or src [::1] )' | grep "pid=${pids[i]}," || true)
		[[ -z $bad ]] || fail "${names[i]} listens not only on loopback: $bad"
	done
}

# --- CRDs from their Go modules --------------------------------------------

# module_dir MODULE@VERSION: where go mod download put it.
module_dir() {
	(cd "$ROOT/tools/k8s" && $GO mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

crds() {
	local po keda cm
	po=$(module_dir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")
	keda=$(module_dir "github.com/kedacore/keda/v2@$KEDA_VERSION")
	cm=$(module_dir "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION")
	[[ -d $po && -d $keda && -d $cm ]] || fail "downloading the CRDs' modules"
	k apply --server-side --validate=strict \
		-f "$po/example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml" \
		-f "$po/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml" \
		-f "$keda/config/crd/bases/keda.sh_scaledobjects.yaml" \
		-f "$cm/deploy/crds/cert-manager.io_certificates.yaml" \
		-f "$cm/deploy/crds/cert-manager.io_issuers.yaml" >/dev/null
	k wait --for condition=Established --timeout 60s \
		crd/podmonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com crd/scaledobjects.keda.sh \
		crd/certificates.cert-manager.io crd/issuers.cert-manager.io >/dev/null
	log "CRDs: PodMonitor, PrometheusRule (prometheus-operator $PROMETHEUS_OPERATOR_VERSION), ScaledObject (KEDA $KEDA_VERSION), Certificate, Issuer (cert-manager $CERT_MANAGER_VERSION)"
}

# --- one overlay -------------------------------------------------------------

# Before anything an operator would have: the namespaces, the Secret, a
# default StorageClass and volumes for the claims.
overlay_setup() {
	k apply --server-side --validate=strict -f "$ROOT/k8s/base/namespace.yaml" >/dev/null
	k create namespace monitoring --dry-run=client -o yaml | k apply --server-side -f - >/dev/null
	k -n levee create secret generic levee-secrets \
		--from-literal=token-secret="$(openssl rand -hex 32)" \
		--from-literal=admin-token="$(openssl rand -hex 32)" >/dev/null
	# k8s/overlays/postgres's database (none runs here: the URL is never dialled).
	k -n levee create secret generic levee-postgres \
		--from-literal=url='postgres://levee@postgres.invalid:5432/levee?sslmode=verify-full' \
		--from-literal=password="$(openssl rand -hex 24)" >/dev/null
	tls_secrets
	# logic's claims name no class, so they take the default one (k8s/README
	# asks for one); no provisioner: PersistentVolumes made here, on hostPath
	# (no kubelet mounts them), bound by the controller-manager's PV binder.
	{
		cat <<-EOF
			apiVersion: storage.k8s.io/v1
			kind: StorageClass
			metadata:
			  name: standard
			  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
			provisioner: kubernetes.io/no-provisioner
			volumeBindingMode: Immediate
			reclaimPolicy: Retain
		EOF
		for i in 0 1 2 3; do
			cat <<-EOF
				---
				apiVersion: v1
				kind: PersistentVolume
				metadata: {name: levee-test-$i, labels: {levee-k8s-test: "true"}}
				spec:
				  capacity: {storage: 10Gi}
				  accessModes: [ReadWriteOnce]
				  storageClassName: standard
				  persistentVolumeReclaimPolicy: Retain
				  hostPath: {path: "$work/pv/$i", type: DirectoryOrCreate}
			EOF
		done
	} | k apply --server-side --validate=strict -f - >/dev/null
	overlay_extra_setup
}

# Phase 2 hook: start Prometheus, the metrics adapter (or KEDA) and the
# battle processes here, once the namespaces exist.
overlay_extra_setup() { :; }

# overlay_teardown FILE: deletes the objects of FILE but its Namespace, the
# pods (not left to the garbage collector: the next overlay's checks must
# not see them), the claims, the Secret and the volumes, so the next overlay
# starts as on a new cluster. The namespaces stay: deleting one waits for
# the namespace controller to go over every resource type, 12 s or more.
overlay_teardown() {
	trace "teardown"
	kc teardown -f "$1" -timeout "${DEADLINE}s" || fail "tearing down $1"
	trace "teardown done"
}

# check_ready: every Deployment and StatefulSet rolled out with all its
# replicas Ready (an HPA's target at least at its minReplicas); every
# Service with a selector lists, in its EndpointSlices, one ready endpoint
# for each Ready pod its selector matches, and matches one; every claim of
# every StatefulSet replica Bound; every PodDisruptionBudget counting the
# pods its selector matches, all healthy; every HPA evaluated by the
# controller: AbleToScale True, and (K8S_TEST_HPA=unavailable, phase 1)
# ScalingActive False with FailedGet...Metric as no metrics API is
# registered, or (active, phase 2) ScalingActive True. k8scheck ready
# prints one line per object that is not so.
check_ready() { kc ready -hpa "$HPA_EXPECT"; }

# check_hpa_metrics: every metric an HPA names is one the metrics path
# serves: the names the adapter rules give, or with --autoscale those the
# adapter's discovery (custom.metrics.k8s.io/v1beta2) lists. A property of
# the manifests, checked at once after the apply.
check_hpa_metrics() {
	if ((autoscale)); then
		kc hpa-metrics -discovery
	else
		kc hpa-metrics -adapter-rules "$ROOT/k8s/overlays/prometheus-adapter/adapter-rules.yaml"
	fi
}

# test_overlay NAME RENDERED [DEADLINE]: applies RENDERED (the overlay NAME,
# maybe broken) and waits for it to be ready; prints the table.
test_overlay() {
	local name=$1 file=$2 limit=${3:-$DEADLINE} t0=$SECONDS n
	n=$(grep -c '^kind:' "$file")
	overlay_setup
	if ! k apply --server-side --validate=strict --field-manager levee-k8s-test -f "$file" >"$work/apply.out" 2>&1; then
		cat "$work/apply.out" >&2
		fail "overlay $name: the API server refused objects (above)"
	fi
	grep -i '^warning' "$work/apply.out" >&2 && fail "overlay $name: warnings from the API server (above)"
	check_hpa_metrics >"$work/reasons" 2>&1 || { cat "$work/reasons" >&2; fail "overlay $name: an HPA names a metric nothing serves"; }
	wait_until "$limit" "overlay $name ready" check_ready
	echo
	echo "== overlay $name: $n objects accepted (server-side apply, strict validation), ready in $((SECONDS - t0))s"
	kc table -f "$file" || fail "overlay $name: the table"
	echo
}

# render OVERLAY FILE: base is k8s/base, the others k8s/overlays/OVERLAY.
render() {
	local dir=overlays/$1
	[[ $1 == base ]] && dir=base
	k kustomize "$ROOT/k8s/$dir" >"$2"
}

# broken MODE: a copy of the prometheus-adapter overlay broken as MODE says,
# and the message the run must fail with.
broken() {
	local mode=$1 dir=$work/break-$1 patch="" target=""
	mkdir -p "$dir"
	k kustomize "$ROOT/k8s/overlays/prometheus-adapter" >"$dir/all.yaml"
	case $mode in
	misspelt)
		target="{group: apps, version: v1, kind: Deployment, name: gate}"
		patch='[{"op": "move", "from": "/spec/template/spec/terminationGracePeriodSeconds", "path": "/spec/template/spec/terminationGracePeriodSecond"}]'
		expect='gate.*terminationGracePeriodSecond|terminationGracePeriodSecond.*gate' ;;
	selector)
		target="{version: v1, kind: Service, name: gate-admin}"
		patch='[{"op": "replace", "path": "/spec/selector/app.kubernetes.io~1name", "value": "no-such-app"}]'
		expect='Service levee/gate-admin: its selector .*no-such-app.* matches no Ready pod' ;;
	metric)
		target="{group: autoscaling, version: v2, kind: HorizontalPodAutoscaler, name: battle}"
		patch='[{"op": "add", "path": "/spec/metrics/-", "value": {"type": "Pods", "pods": {"metric": {"name": "battle_no_such_metric"}, "target": {"type": "AverageValue", "averageValue": "1"}}}}]'
		expect='HorizontalPodAutoscaler levee/battle names metric battle_no_such_metric' ;;
	cert)
		expect='Secret levee/levee-battle-tls \(mounted by battle pods\): tls.crt.s URI SANs are \[spiffe://levee/logic\], want \[spiffe://levee/battle\]' ;;
	*) fail "unknown --break $mode (misspelt, selector, metric, cert)" ;;
	esac
	if [[ -n ${patch:-} ]]; then
		cat >"$dir/kustomization.yaml" <<-EOF
			resources: [all.yaml]
			patches:
			- target: $target
			  patch: '$patch'
		EOF
	else
		echo "resources: [all.yaml]" >"$dir/kustomization.yaml"
	fi
	k kustomize "$dir" >"$dir/broken.yaml"
	echo "$expect" >"$dir/expect"
}

# shellcheck source=scripts/lib/k8s-drain.sh
. "$ROOT/scripts/lib/k8s-drain.sh"
# shellcheck source=scripts/lib/k8s-autoscale.sh
. "$ROOT/scripts/lib/k8s-autoscale.sh"

# --- main ----------------------------------------------------------------------

k8scheck_bin
levee_certs
control_plane
crds
((autoscale == 0)) || autoscale_setup
for o in $overlays; do
	render "$o" "$work/$o.yaml"
	test_overlay "$o" "$work/$o.yaml"
	[[ $o != base ]] || check_drain # scripts/lib/k8s-drain.sh
	overlay_teardown "$work/$o.yaml"
done
((autoscale == 0)) || autoscale_loop
for b in $breaks; do
	broken "$b"
	# In a subshell, whose fail must not tear the cluster down (traps are
	# reset there), in the background so that set -e holds in it.
	(break_mode=$b; test_overlay "break-$b" "$work/break-$b/broken.yaml" "$BREAK_DEADLINE") >"$work/break-$b/out" 2>&1 &
	rc=0
	wait $! || rc=$?
	if ((rc == 0)); then
		cat "$work/break-$b/out" >&2
		fail "--break $b: the broken manifests passed"
	fi
	grep -E -q -f "$work/break-$b/expect" "$work/break-$b/out" ||
		{ cat "$work/break-$b/out" >&2; fail "--break $b: failed, but without naming the object ($(cat "$work/break-$b/expect"))"; }
	log "--break $b: failed as it should: $(grep -E -f "$work/break-$b/expect" "$work/break-$b/out" | tail -n 1 | sed 's/.*k8s-test: //' | cut -c1-220)"
	overlay_teardown "$work/break-$b/broken.yaml"
done
