#!/usr/bin/env bash
# The overload test of issue 3, twice: a local Levee cluster as processes on
# loopback (1 gate, 1 logic with 8 shards, 2 battle), first with protection
# on (the default) and then with every binary started with -protection=false.
# Each time `bin/loadtest capacity overload` measures the cluster's capacity
# C (a closed loop, then a stepped open-loop search), then `bin/loadtest run
# overload --set capacity=C` offers 0.8 x C and 10 x C open loop and judges
# it by the thresholds of loadtest/scenarios/overload.yaml. It prints both
# reports and the two side by side, and keeps everything in a directory it
# prints: <label>.ndjson (the run file: `bin/loadtest report -html` plots
# it), <label>-capacity.ndjson (the search's steps), <label>.txt, logs/, and
# compare.txt / compare.html (the per-second comparison). About 2.5 minutes.
# It stops every process it started, also on Ctrl-C.
#
# Exit status: that of the protected run (0 when the cluster held). The
# unprotected run only reports; it is skipped when a binary does not have a
# -protection flag.
#
# Environment: OVERLOAD_DIR (a new temp dir), BASE_PORT (8080; the same port
# scheme as scripts/demo.sh), OVERLOAD_BUILD (1: build bin/ first; `make
# overload` builds and sets 0), OVERLOAD_ARGS (extra `bin/loadtest run`
# flags, e.g. "--set pool.phases[1].duration=10s"), OVERLOAD_CAPACITY_ARGS
# (extra `bin/loadtest capacity` flags, e.g. "-closed-concurrency 32"),
# OVERLOAD_UNPROTECTED (1; 0 skips the second run).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${OVERLOAD_DIR:-$(mktemp -d -t levee-overload.XXXXXX)}
CLUSTER_NAME=overload CLUSTER_LOGS=$DIR
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
cluster_ports "${BASE_PORT:-8080}"
SECRET=${OVERLOAD_TOKEN_SECRET:-overload-$RANDOM-$RANDOM-$RANDOM}
read -r -a EXTRA <<<"${OVERLOAD_ARGS:-}"
read -r -a CAP_EXTRA <<<"${OVERLOAD_CAPACITY_ARGS:-}"
mkdir -p "$DIR"

if [ "${OVERLOAD_BUILD:-1}" != 0 ]; then
  echo "overload: building bin/"
  mkdir -p bin
  CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/gate ./cmd/logic ./cmd/battle ./cmd/loadtest
fi

cluster_trap "reports, logs and data are in $DIR"

# run_cluster LABEL [tier flags...]: start the cluster with the tier flags
# given to every binary, measure its capacity, run the overload scenario at
# it, stop the cluster. Sets rc to the run's exit status.
run_cluster() {
  local label=$1; shift
  local run="$DIR/$label"
  mkdir -p "$run/logs"
  CLUSTER_LOGS=$run/logs
  ports_free $GATE $GATE_GRPC $GATE_OPS $LOGIC $LOGIC_OPS $B1 $B1_OPS $B2 $B2_OPS
  echo
  echo "overload: [$label] starting battle x2, logic (8 shards), gate ${*:-(defaults)}"
  proc_start battle-1 bin/battle -grpc-addr 127.0.0.1:$B1 -ops-addr 127.0.0.1:$B1_OPS "$@"
  proc_start battle-2 bin/battle -grpc-addr 127.0.0.1:$B2 -ops-addr 127.0.0.1:$B2_OPS "$@"
  wait_healthy battle-1 battle 127.0.0.1:$B1
  wait_healthy battle-2 battle 127.0.0.1:$B2
  proc_start logic bin/logic -grpc-addr 127.0.0.1:$LOGIC -ops-addr 127.0.0.1:$LOGIC_OPS \
    -data-dir "$run/logic" -shards 8 -battle-addrs 127.0.0.1:$B1,127.0.0.1:$B2 "$@"
  wait_healthy logic logic 127.0.0.1:$LOGIC
  proc_start gate bin/gate -addr 127.0.0.1:$GATE -grpc-addr 127.0.0.1:$GATE_GRPC -ops-addr 127.0.0.1:$GATE_OPS \
    -logic-addrs 127.0.0.1:$LOGIC -shards 8 -token-secret "$SECRET" "$@"
  wait_healthy gate gate 127.0.0.1:$GATE_GRPC
  echo "overload: [$label] cluster is up; the capacity search takes about 40 s, the overload run 35 s"

  local target=(-gate-urls "ws://127.0.0.1:$GATE/ws" -token-secret "$SECRET"
    -metrics "gate=http://127.0.0.1:$GATE_OPS/metrics,logic=http://127.0.0.1:$LOGIC_OPS/metrics,battle=http://127.0.0.1:$B1_OPS/metrics,battle=http://127.0.0.1:$B2_OPS/metrics")
  set +e
  bin/loadtest capacity overload "${target[@]}" -label "$label" -out "$DIR/$label-capacity.ndjson" \
    -value-out "$DIR/$label.capacity" ${CAP_EXTRA[@]+"${CAP_EXTRA[@]}"} \
    2>"$run/logs/capacity.log" | tee "$DIR/$label-capacity.txt"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    bin/loadtest run overload "${target[@]}" --set "capacity=$(cat "$DIR/$label.capacity")" -label "$label" \
      -out "$DIR/$label.ndjson" -progress line ${EXTRA[@]+"${EXTRA[@]}"} \
      2>"$run/logs/loadtest.log" | tee "$DIR/$label.txt"
    rc=${PIPESTATUS[0]}
  else
    echo "overload: [$label] the capacity was not measured (exit $rc); see $run/logs/capacity.log" >&2
  fi
  set -e
  echo "overload: [$label] stopping the cluster"
  procs_stop
}

run_cluster protected
protected_rc=$rc

unprotected=${OVERLOAD_UNPROTECTED:-1}
if [ "$unprotected" != 0 ]; then
  for b in gate logic battle; do
    if ! "bin/$b" -h 2>&1 | grep -q -- '-protection'; then
      echo "overload: bin/$b has no -protection flag yet; skipping the unprotected run"
      unprotected=0
      break
    fi
  done
fi
if [ "$unprotected" != 0 ]; then
  run_cluster unprotected -protection=false
  echo "overload: [unprotected] exit $rc (it only reports)"
fi

echo
for label in protected unprotected; do
  if [ -f "$DIR/$label.ndjson" ]; then
    echo "overload: [$label] capacity $(bin/loadtest figure "$DIR/$label.ndjson" capacity)/s;" \
      "overload goodput $(bin/loadtest figure -from 10 -to 30 "$DIR/$label.ndjson" avg:goodput)/s;" \
      "lost replies $(bin/loadtest figure "$DIR/$label.ndjson" lost_replies)"
  fi
done
if [ -f "$DIR/protected.ndjson" ] && [ -f "$DIR/unprotected.ndjson" ]; then
  echo
  echo "overload: side by side"
  if bin/loadtest compare -html "$DIR/compare.html" "$DIR/protected.ndjson" "$DIR/unprotected.ndjson" | tee "$DIR/compare.txt"; then
    echo "overload: per-second comparison in $DIR/compare.txt, plots in $DIR/compare.html"
  else
    echo "overload: comparing the run files failed (see $DIR/compare.txt)" >&2
  fi
fi
if [ "$protected_rc" -ne 0 ]; then
  echo "overload: with protection on, the cluster did not hold (exit $protected_rc)" >&2
fi
exit "$protected_rc"
