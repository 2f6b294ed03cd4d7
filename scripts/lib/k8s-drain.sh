# shellcheck shell=bash
# Drain and disruption on the real API (issue 12, item 3), for
# scripts/k8s-test.sh, which sources it and calls check_drain once, on the
# base overlay, after its checks passed (3 gate pods Ready). It only defines
# things; it uses the script's kc, k, log, fail and $work. The checks are
# k8scheck drain's (tools/deploycheck/cmd/k8scheck/drain.go, which says why
# a finalizer holds the pods Terminating and why the nodes are cordoned):
#
#   pdb        evict a gate pod through the Eviction API: allowed (the PDB
#              allows 1 disruption); while it is still terminating, evict a
#              second: refused, 429 TooManyRequests; the PDB's status says 0
#              disruptions allowed, and after the controller's recount the
#              second eviction is refused again
#   endpoints  delete a gate pod; while the pod still exists with a
#              deletionTimestamp, the EndpointSlices of the Services gate
#              and gate-admin list its endpoint ready false, terminating
#              true; let it go: it disappears and the Deployment is back to
#              3 Ready
#
# K8S_TEST_DRAIN_BREAK=pdb (a test of the test): after the checks pass,
# raise the PDB's maxUnavailable to 3 and run the PDB check again; it must
# fail saying the second eviction was allowed. K8S_TEST_DRAIN_WAIT (60 s)
# bounds each of the checks' waits.

DRAIN_FINALIZER=k8s-test.levee/hold
DRAIN_WAIT=${K8S_TEST_DRAIN_WAIT:-60} # seconds for each wait of the checks

# kdrain [FLAGS...]: k8scheck drain with the finalizer and the waits.
kdrain() { kc drain -finalizer "$DRAIN_FINALIZER" -wait "${DRAIN_WAIT}s" "$@"; }

check_drain() {
	kdrain || fail "the drain checks (above)"
	[[ ${K8S_TEST_DRAIN_BREAK:-} != pdb ]] || drain_break_pdb
}

# drain_break_pdb: the test of the test. A PDB allowing 3 disruptions must
# make the PDB check fail, naming the budget and the second eviction.
drain_break_pdb() {
	local rc=0 expect="PodDisruptionBudget levee/gate: second eviction of levee/gate-[^ ]* .* was allowed; want 429"
	k -n levee patch poddisruptionbudget gate --type merge -p '{"spec":{"maxUnavailable":3}}' >/dev/null
	kdrain -only steady -allowed 3 || fail "drain (break pdb): the PDB at maxUnavailable 3 not observed"
	kdrain -only pdb -allowed 3 >"$work/drain-break.out" 2>&1 || rc=$?
	if ((rc == 0)); then
		cat "$work/drain-break.out" >&2
		fail "drain (break pdb): the PDB check passed with maxUnavailable 3"
	fi
	grep -q -- "$expect" "$work/drain-break.out" ||
		{ cat "$work/drain-break.out" >&2; fail "drain (break pdb): failed, but not with: $expect"; }
	log "drain (break pdb): failed as it should: $(grep -- "$expect" "$work/drain-break.out" | tail -n 1 | sed 's/.*k8s-test: //' | cut -c1-240)"
	kdrain -only release || fail "drain (break pdb): releasing the pods, uncordoning the nodes"
	k -n levee patch poddisruptionbudget gate --type merge -p '{"spec":{"maxUnavailable":1}}' >/dev/null
	kdrain -only steady -allowed 1 || fail "drain (break pdb): gate back to 3 Ready, the PDB at maxUnavailable 1"
}
