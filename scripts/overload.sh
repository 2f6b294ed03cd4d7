#!/usr/bin/env bash
# The overload test of issue 3, twice: a local Levee cluster as processes on
# loopback (1 gate, 1 logic with 8 shards, 2 battle), first with protection
# on (the default) and then with every binary started with -protection=false,
# each time `bin/loadtest -scenario overload` against it (capacity C, then
# 0.8 x C, then 10 x C). It prints both reports and then the two side by
# side, and keeps the JSON reports, texts and logs in a directory it prints,
# with each run's NDJSON run file (<label>.ndjson, which `bin/loadtest report
# -html` plots) and their per-second comparison (compare.txt, compare.html).
# About 2 minutes. It stops every process it started, also on Ctrl-C.
#
# Exit status: that of the protected run (0 when the cluster held). The
# unprotected run only reports (-expect-hold=false); it is skipped when a
# binary does not have a -protection flag yet.
#
# Environment: OVERLOAD_DIR (a new temp dir), BASE_PORT (8080; the same port
# scheme as scripts/demo.sh), OVERLOAD_BUILD (1: build bin/ first; `make
# overload` builds and sets 0), OVERLOAD_ARGS (extra bin/loadtest flags, e.g.
# "-overload-time 10s -capacity-concurrency 32"), OVERLOAD_UNPROTECTED (1; 0
# skips the second run), OVERLOAD_MAX_RSS_MB (512: the bound on each tier's
# resident memory that "memory stays bounded" is judged by).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${OVERLOAD_DIR:-$(mktemp -d -t levee-overload.XXXXXX)}
CLUSTER_NAME=overload CLUSTER_LOGS=$DIR
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
cluster_ports "${BASE_PORT:-8080}"
MAX_RSS_MB=${OVERLOAD_MAX_RSS_MB:-512}
SECRET=${OVERLOAD_TOKEN_SECRET:-overload-$RANDOM-$RANDOM-$RANDOM}
read -r -a EXTRA <<<"${OVERLOAD_ARGS:-}"
mkdir -p "$DIR"

if [ "${OVERLOAD_BUILD:-1}" != 0 ]; then
  echo "overload: building bin/"
  mkdir -p bin
  CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/gate ./cmd/logic ./cmd/battle ./cmd/loadtest
fi

cluster_trap "reports, logs and data are in $DIR"

# run_cluster LABEL EXPECT_HOLD [tier flags...]: start the cluster with the
# tier flags given to every binary, run the overload test, stop the cluster.
# Sets rc to the load test's exit status.
run_cluster() {
  local label=$1 hold=$2; shift 2
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
  echo "overload: [$label] cluster is up; the load test takes about 50 s"

  set +e
  bin/loadtest -scenario overload -gate-url "ws://127.0.0.1:$GATE/ws" -token-secret "$SECRET" \
    -metrics-urls "gate=http://127.0.0.1:$GATE_OPS/metrics,logic=http://127.0.0.1:$LOGIC_OPS/metrics,battle-1=http://127.0.0.1:$B1_OPS/metrics,battle-2=http://127.0.0.1:$B2_OPS/metrics" \
    -max-rss-mb "$MAX_RSS_MB" -expect-hold="$hold" -json-out "$DIR/$label.json" -run-id "$label" \
    -run-file "$DIR/$label.ndjson" -label "$label" ${EXTRA[@]+"${EXTRA[@]}"} \
    2>"$run/logs/loadtest.log" | tee "$DIR/$label.txt"
  rc=${PIPESTATUS[0]}
  set -e
  echo "overload: [$label] stopping the cluster"
  procs_stop
}

run_cluster protected true
protected_rc=$rc
reports=("protected=$DIR/protected.json")

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
  run_cluster unprotected false -protection=false
  if [ "$rc" -ne 0 ]; then
    echo "overload: the unprotected run could not complete (exit $rc)" >&2
  fi
  [ -f "$DIR/unprotected.json" ] && reports+=("unprotected=$DIR/unprotected.json")
fi

if [ -f "$DIR/protected.json" ]; then
  echo
  echo "overload: side by side"
  bin/loadtest compare "${reports[@]}" || true
fi
if [ -f "$DIR/protected.ndjson" ] && [ -f "$DIR/unprotected.ndjson" ]; then
  if bin/loadtest compare -html "$DIR/compare.html" "$DIR/protected.ndjson" "$DIR/unprotected.ndjson" >"$DIR/compare.txt"; then
    echo "overload: per-second comparison in $DIR/compare.txt, plots in $DIR/compare.html"
  else
    echo "overload: comparing the run files failed (see $DIR/compare.txt)" >&2
  fi
fi
if [ "$protected_rc" -ne 0 ]; then
  echo "overload: with protection on, the cluster did not hold (exit $protected_rc)" >&2
fi
exit "$protected_rc"
