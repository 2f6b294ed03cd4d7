# shellcheck shell=bash
# Drain and disruption on the real API (issue 12, item 3), for
# scripts/k8s-test.sh, which sources it and calls check_drain once, on the
# base overlay, after its checks passed (3 gate pods Ready). It only defines
# things; it uses the script's k, log, fail, trace, wait_until and $work.
#
#   check_drain             both checks below, then (K8S_TEST_DRAIN_BREAK=pdb)
#                           the PDB check against a broken budget
#   check_drain_pdb         evict a gate pod through the Eviction API: allowed
#                           (the PDB allows 1 disruption); while it is still
#                           terminating, evict a second: refused, 429
#                           TooManyRequests; the PDB's status says 0
#                           disruptions allowed, and after the controller's
#                           recount the second eviction is refused again
#   check_drain_endpoints   delete a gate pod; while the pod still exists with
#                           a deletionTimestamp, the EndpointSlices of the
#                           Services gate and gate-admin list its endpoint
#                           ready false, terminating true; let it go: it
#                           disappears and the Deployment is back to 3 Ready
#
# kwok has no kubelet: its pod-delete stage deletes a pod with a
# deletionTimestamp at once (grace 0), so nothing would stay Terminating
# for 60 s as with the gate's terminationGracePeriodSeconds. A finalizer of
# our own (DRAIN_FINALIZER), put on the pod before it is evicted or
# deleted, holds it Terminating (the API server keeps an object until its
# finalizers are gone) for as long as a check needs; the check removes it.
#
# The nodes are cordoned during the PDB check, as `kubectl drain` does: the
# ReplicaSet replaces an evicted pod at once, and under kwok the replacement
# would be Ready within a second, giving the budget its disruption back
# (as it should: a PDB bounds the pods unavailable, not the evictions), so
# whether the second eviction were refused would be a race. Cordoned, the
# replacement stays Pending, which the PDB does not count as healthy.
#
# K8S_TEST_DRAIN_BREAK=pdb (a test of the test): after the checks pass,
# raise the PDB's maxUnavailable to 3 and run check_drain_pdb again; it
# must fail saying the second eviction was allowed. K8S_TEST_DRAIN_WAIT
# (60 s) bounds each of the checks' waits.

DRAIN_FINALIZER=k8s-test.levee/hold
DRAIN_GATE_SELECTOR=app.kubernetes.io/name=gate,app.kubernetes.io/part-of=levee
DRAIN_WAIT=${K8S_TEST_DRAIN_WAIT:-60} # seconds for each wait of the checks

check_drain() {
	local t0=$SECONDS
	check_drain_pdb
	check_drain_endpoints
	log "drain checks passed in $((SECONDS - t0))s"
	[[ ${K8S_TEST_DRAIN_BREAK:-} != pdb ]] || drain_break_pdb
}

# drain_gate_steady ALLOWED: the Deployment gate has its 3 replicas Ready,
# 3 gate pods exist (none terminating, none held), each of the Services
# gate and gate-admin lists exactly those 3 as ready endpoints, and the PDB
# gate, observed, allows ALLOWED disruptions. Prints what is not so.
drain_gate_steady() {
	k -n levee get deployment/gate poddisruptionbudget/gate -o json >"$work/drain-objs.json" &&
		k -n levee get pods,endpointslices -o json >"$work/drain-list.json" ||
		{ echo "${FUNCNAME[0]}: kubectl failed"; return 1; }
	jq -r -s --argjson allowed "$1" --arg fin "$DRAIN_FINALIZER" '
		(.[0] | if .kind == "List" then .items else [.] end) as $objs
		| ($objs[] | select(.kind == "Deployment")) as $d
		| ($objs[] | select(.kind == "PodDisruptionBudget")) as $b
		| [.[1].items[] | select(.kind == "Pod" and .metadata.labels["app.kubernetes.io/name"] == "gate")] as $pods
		| [$pods[] | select(.metadata.deletionTimestamp == null
			and any(.status.conditions[]?; .type == "Ready" and .status == "True")) | .metadata.name] as $ready
		| (if ($d.status.readyReplicas // 0) != 3 or $d.spec.replicas != 3 or $d.status.observedGeneration != $d.metadata.generation then
			"Deployment levee/gate: \($d.status.readyReplicas // 0)/\($d.spec.replicas) Ready, want 3/3" else empty end),
		  (if ($pods | length) != 3 or ($ready | length) != 3 then
			"Deployment levee/gate: pods \([$pods[] | "\(.metadata.name)\(if .metadata.deletionTimestamp then " (terminating)" else "" end)"] | join(", ")), want 3 Ready, none terminating" else empty end),
		  ($pods[] | select(.metadata.finalizers // [] | index($fin)) | "Pod levee/\(.metadata.name): still has the finalizer \($fin)"),
		  (["gate", "gate-admin"][] as $svc
			| [.[1].items[] | select(.kind == "EndpointSlice" and .metadata.labels["kubernetes.io/service-name"] == $svc)
				| .endpoints[]? | select(.conditions.ready == true) | .targetRef.name] | sort as $eps
			| if $eps != ($ready | sort) then
				"Service levee/\($svc): ready endpoints for pods [\($eps | join(", "))], want the Ready gate pods [\($ready | sort | join(", "))]" else empty end),
		  (if $b.status.observedGeneration != $b.metadata.generation or $b.status.disruptionsAllowed != $allowed then
			"PodDisruptionBudget levee/gate: \($b.status.disruptionsAllowed) disruption(s) allowed (\($b.status.currentHealthy) healthy of \($b.status.expectedPods), \($b.status.desiredHealthy) needed), want \($allowed)" else empty end)
		' "$work/drain-objs.json" "$work/drain-list.json" >"$work/drain-reasons" || { echo "${FUNCNAME[0]}: jq failed"; return 1; }
	cat "$work/drain-reasons"
	[[ ! -s $work/drain-reasons ]]
}

# drain_ready_gates: the names of the Ready, not terminating, gate pods.
drain_ready_gates() {
	k -n levee get pods -l "$DRAIN_GATE_SELECTOR" -o json | jq -r '.items[]
		| select(.metadata.deletionTimestamp == null and any(.status.conditions[]?; .type == "Ready" and .status == "True"))
		| .metadata.name'
}

# drain_hold POD: puts DRAIN_FINALIZER on POD (which must have none), so that
# it stays Terminating once deleted.
drain_hold() {
	local fins
	fins=$(k -n levee get pod "$1" -o jsonpath='{.metadata.finalizers}')
	[[ -z $fins ]] || fail "Pod levee/$1: has finalizers already ($fins); the drain checks put their own on gate pods"
	k -n levee patch pod "$1" --type merge -p "{\"metadata\":{\"finalizers\":[\"$DRAIN_FINALIZER\"]}}" >/dev/null
}

# drain_release: takes DRAIN_FINALIZER off every pod in levee that has it.
drain_release() {
	local name patch
	k -n levee get pods -o json | jq -r --arg fin "$DRAIN_FINALIZER" '.items[]
		| select(.metadata.finalizers // [] | index($fin))
		| "\(.metadata.name) \({metadata: {finalizers: (.metadata.finalizers - [$fin])}} | tojson)"' |
		while read -r name patch; do
			trace "releasing pod levee/$name"
			k -n levee patch pod "$name" --type merge -p "$patch" >/dev/null
		done
}

# drain_evict POD: asks the Eviction API to evict POD (policy/v1); the
# answer (kubectl's) in $work/evict.out; the status is kubectl's.
drain_evict() {
	k create --raw "/api/v1/namespaces/levee/pods/$1/eviction" -f - >"$work/evict.out" 2>&1 <<-EOF
		{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "$1", "namespace": "levee"}}
	EOF
}

# drain_refused POD WHEN: evicts POD, which must be refused by the budget:
# HTTP 429, which kubectl reports as "Error from server (TooManyRequests)"
# (the reason the API server gives a 429 Status), with the disruption
# budget's message. WHEN says when, for the failure message.
drain_refused() {
	if drain_evict "$1"; then
		fail "PodDisruptionBudget levee/gate: second eviction of levee/$1 ($2) was allowed; want 429 TooManyRequests: $(tr '\n' ' ' <"$work/evict.out")"
	fi
	grep -q "(TooManyRequests).*Cannot evict pod as it would violate the pod's disruption budget" "$work/evict.out" ||
		fail "PodDisruptionBudget levee/gate: second eviction of levee/$1 ($2) was refused, but not with 429 TooManyRequests for the budget: $(tr '\n' ' ' <"$work/evict.out")"
}

# drain_pdb_status POD: POD still exists, terminating, and the PDB gate has
# counted it out: 3 expected, 2 healthy, 2 needed, 0 disruptions allowed.
drain_pdb_status() {
	k -n levee get "pod/$1" poddisruptionbudget/gate -o json | jq -r -s --arg p "$1" '
		(.[0] | if .kind == "List" then .items else [.] end) as $o
		| ($o[] | select(.kind == "Pod")) as $pod | ($o[] | select(.kind == "PodDisruptionBudget")) as $b
		| if $pod.metadata.deletionTimestamp == null then "Pod levee/\($p): not terminating after its eviction"
		  elif $b.status.disruptionsAllowed != 0 or $b.status.currentHealthy != 2 or $b.status.expectedPods != 3 then
			"PodDisruptionBudget levee/gate: \($b.status.disruptionsAllowed) disruption(s) allowed, \($b.status.currentHealthy) healthy of \($b.status.expectedPods) (\($b.status.desiredHealthy) needed) while levee/\($p) is terminating; want 0 allowed, 2 healthy of 3"
		  else empty end' >"$work/drain-reasons"
	cat "$work/drain-reasons"
	[[ ! -s $work/drain-reasons ]]
}

# drain_pod_gone POD: POD no longer exists.
drain_pod_gone() {
	local out
	out=$(k -n levee get pod "$1" --ignore-not-found -o jsonpath='{.metadata.finalizers}') || return 1
	[[ -z $out ]] || { echo "Pod levee/$1: still there, finalizers $out"; return 1; }
	[[ -z $(k -n levee get pod "$1" --ignore-not-found -o name) ]] || { echo "Pod levee/$1: still there"; return 1; }
}

# check_drain_pdb [ALLOWED]: ALLOWED is the number of disruptions the PDB
# allows with every gate Ready (1; 3 for the break).
check_drain_pdb() {
	local first second pods status t0=$SECONDS
	wait_until "$DRAIN_WAIT" "drain: gate steady before the eviction" drain_gate_steady "${1:-1}"
	mapfile -t pods < <(drain_ready_gates)
	first=${pods[0]} second=${pods[1]}
	k cordon -l type=kwok >/dev/null
	drain_hold "$first"
	if ! drain_evict "$first"; then
		fail "PodDisruptionBudget levee/gate: eviction of levee/$first refused with all 3 gate pods Ready; want it allowed (maxUnavailable 1): $(tr '\n' ' ' <"$work/evict.out")"
	fi
	log "drain: evicted levee/$first (Eviction API, allowed: the PDB allowed 1 disruption); held Terminating by the finalizer $DRAIN_FINALIZER"
	# At once: the eviction itself took the budget's one disruption.
	drain_refused "$second" "right after levee/$first's"
	log "drain: second eviction, of levee/$second, refused: $(tr '\n' ' ' <"$work/evict.out")"
	wait_until "$DRAIN_WAIT" "drain: PodDisruptionBudget levee/gate counting levee/$first out" drain_pdb_status "$first"
	status=$(k -n levee get poddisruptionbudget gate -o jsonpath='expectedPods {.status.expectedPods}, currentHealthy {.status.currentHealthy}, desiredHealthy {.status.desiredHealthy}, disruptionsAllowed {.status.disruptionsAllowed}')
	# Again once the disruption controller has recounted.
	drain_refused "$second" "after the controller's recount: $status"
	log "drain: PodDisruptionBudget levee/gate while levee/$first terminates: $status; levee/$second's eviction refused again (TooManyRequests)"
	drain_release
	wait_until "$DRAIN_WAIT" "drain: levee/$first gone once released" drain_pod_gone "$first"
	k uncordon -l type=kwok >/dev/null
	wait_until "$DRAIN_WAIT" "drain: gate back to 3 Ready after the eviction" drain_gate_steady 1
	log "drain: levee/$first gone, gate back to 3/3 Ready, PDB allows 1 again ($((SECONDS - t0))s)"
}

# drain_endpoints_terminating POD: POD still exists with a deletionTimestamp,
# and each of the Services gate and gate-admin lists its endpoint, not
# ready and terminating. Prints what is not so, or (passing) the conditions.
drain_endpoints_terminating() {
	k -n levee get pods,endpointslices -o json | jq -r --arg p "$1" '
		([.items[] | select(.kind == "Pod" and .metadata.name == $p)] | first) as $pod
		| if $pod == null then "Pod levee/\($p): gone before its endpoints were seen not ready"
		  elif $pod.metadata.deletionTimestamp == null then "Pod levee/\($p): no deletionTimestamp yet"
		  else
			(["gate", "gate-admin"][] as $svc
			| [.items[] | select(.kind == "EndpointSlice" and .metadata.labels["kubernetes.io/service-name"] == $svc)
				| .metadata.name as $slice | .endpoints[]? | select(.targetRef.name == $p) | . + {slice: $slice}] as $eps
			| if ($eps | length) == 0 then
				"Service levee/\($svc): its EndpointSlices list no endpoint for the terminating pod levee/\($p); want it listed ready false, terminating true"
			  else $eps[] | select(.conditions.ready != false or .conditions.terminating != true)
				| "Service levee/\($svc): EndpointSlice levee/\(.slice) lists the terminating pod levee/\($p) ready \(.conditions.ready), terminating \(.conditions.terminating); want ready false, terminating true"
			  end)
		  end' >"$work/drain-reasons"
	cat "$work/drain-reasons"
	[[ ! -s $work/drain-reasons ]]
}

check_drain_endpoints() {
	local pod pods t0=$SECONDS ms0 ms conds
	wait_until "$DRAIN_WAIT" "drain: gate steady before the deletion" drain_gate_steady 1
	mapfile -t pods < <(drain_ready_gates)
	pod=${pods[0]}
	drain_hold "$pod"
	ms0=$(date +%s%3N)
	k -n levee delete pod "$pod" --wait=false >/dev/null
	wait_until "$DRAIN_WAIT" "drain: the endpoints of the terminating pod levee/$pod not ready" drain_endpoints_terminating "$pod"
	ms=$(($(date +%s%3N) - ms0))
	conds=$(k -n levee get endpointslices -o json | jq -r --arg p "$pod" '[.items[]
		| .metadata.labels["kubernetes.io/service-name"] as $svc | .endpoints[]? | select(.targetRef.name == $p)
		| "\($svc): ready \(.conditions.ready), serving \(.conditions.serving), terminating \(.conditions.terminating)"] | join("; ")')
	log "drain: deleted levee/$pod (kwok deleted it again at once, grace now $(k -n levee get pod "$pod" -o jsonpath='{.metadata.deletionGracePeriodSeconds}')s; the finalizer holds it); within ${ms}ms, the pod still there, its endpoints: $conds"
	drain_release
	wait_until "$DRAIN_WAIT" "drain: levee/$pod gone once released" drain_pod_gone "$pod"
	wait_until "$DRAIN_WAIT" "drain: gate back to 3 Ready after the deletion" drain_gate_steady 1
	log "drain: levee/$pod gone, its endpoints with it, gate back to 3/3 Ready ($((SECONDS - t0))s)"
}

# drain_break_pdb: the test of the test. A PDB allowing 3 disruptions must
# make check_drain_pdb fail, naming the budget and the second eviction.
drain_break_pdb() {
	local rc=0 expect="PodDisruptionBudget levee/gate: second eviction of levee/gate-[^ ]* .* was allowed; want 429"
	k -n levee patch poddisruptionbudget gate --type merge -p '{"spec":{"maxUnavailable":3}}' >/dev/null
	wait_until "$DRAIN_WAIT" "drain (break pdb): the PDB at maxUnavailable 3 observed" drain_gate_steady 3
	# In a subshell, whose fail must not tear the cluster down, in the
	# background so that set -e holds in it (as the script's --break loop).
	(check_drain_pdb 3) >"$work/drain-break.out" 2>&1 &
	wait $! || rc=$?
	if ((rc == 0)); then
		cat "$work/drain-break.out" >&2
		fail "drain (break pdb): check_drain_pdb passed with maxUnavailable 3"
	fi
	grep -q -- "$expect" "$work/drain-break.out" ||
		{ cat "$work/drain-break.out" >&2; fail "drain (break pdb): failed, but not with: $expect"; }
	log "drain (break pdb): failed as it should: $(grep -- "$expect" "$work/drain-break.out" | tail -n 1 | sed 's/.*k8s-test: //' | cut -c1-240)"
	drain_release
	k uncordon -l type=kwok >/dev/null
	k -n levee patch poddisruptionbudget gate --type merge -p '{"spec":{"maxUnavailable":1}}' >/dev/null
	wait_until "$DRAIN_WAIT" "drain (break pdb): gate back to 3 Ready, the PDB at maxUnavailable 1" drain_gate_steady 1
}
