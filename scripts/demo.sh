#!/usr/bin/env bash
# Starts a local Levee cluster as processes on loopback (1 gate, 1 logic with
# 8 shards, 2 battle), runs a short smoke load against it with bin/loadtest,
# prints the summary and stops every process it started, also on Ctrl-C.
#
# Environment: DEMO_BOTS (300), DEMO_DURATION (20s), DEMO_DIR (a new temp dir
# for data and logs), BASE_PORT (8080; the cluster uses BASE_PORT..+2 for the
# gate, +920..+921 logic, +1020..+1021 and +1120..+1121 battle).
set -euo pipefail
cd "$(dirname "$0")/.."

BOTS=${DEMO_BOTS:-300}
DURATION=${DEMO_DURATION:-20s}
DIR=${DEMO_DIR:-$(mktemp -d -t levee-demo.XXXXXX)}
CLUSTER_NAME=demo CLUSTER_LOGS=$DIR/logs
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
cluster_ports "${BASE_PORT:-8080}"
SECRET=${DEMO_TOKEN_SECRET:-demo-$RANDOM-$RANDOM-$RANDOM}
mkdir -p "$DIR/logs"

ports_free $GATE $GATE_GRPC $GATE_OPS $LOGIC $LOGIC_OPS $B1 $B1_OPS $B2 $B2_OPS
cluster_trap "logs and data are in $DIR"

echo "demo: starting battle x2, logic (8 shards), gate; data and logs in $DIR"
proc_start battle-1 bin/battle -grpc-addr 127.0.0.1:$B1 -ops-addr 127.0.0.1:$B1_OPS
proc_start battle-2 bin/battle -grpc-addr 127.0.0.1:$B2 -ops-addr 127.0.0.1:$B2_OPS
wait_healthy battle-1 battle 127.0.0.1:$B1
wait_healthy battle-2 battle 127.0.0.1:$B2
proc_start logic bin/logic -grpc-addr 127.0.0.1:$LOGIC -ops-addr 127.0.0.1:$LOGIC_OPS \
  -data-dir "$DIR/logic" -shards 8 -battle-addrs 127.0.0.1:$B1,127.0.0.1:$B2
wait_healthy logic logic 127.0.0.1:$LOGIC
proc_start gate bin/gate -addr 127.0.0.1:$GATE -grpc-addr 127.0.0.1:$GATE_GRPC -ops-addr 127.0.0.1:$GATE_OPS \
  -logic-addrs 127.0.0.1:$LOGIC -shards 8 -token-secret "$SECRET"
wait_healthy gate gate 127.0.0.1:$GATE_GRPC
echo "demo: cluster is up: ws://127.0.0.1:$GATE/ws, metrics on :$GATE_OPS :$LOGIC_OPS :$B1_OPS :$B2_OPS"

echo "demo: smoke load: $BOTS bots for $DURATION"
set +e
bin/loadtest -gate-url "ws://127.0.0.1:$GATE/ws" -token-secret "$SECRET" -bots "$BOTS" -duration "$DURATION" \
  -json-out "$DIR/report.json"
rc=$?
set -e
echo "demo: cluster metrics after the run:"
curl -s "http://127.0.0.1:$GATE_OPS/metrics" 2>/dev/null | grep -E '^gate_active_connections ' || true
curl -s "http://127.0.0.1:$LOGIC_OPS/metrics" 2>/dev/null | grep -E '^logic_queue_depth' | head -8 || true
curl -s "http://127.0.0.1:$B1_OPS/metrics" 2>/dev/null | grep -E '^battle_latency_seconds_(count|sum)' || true
curl -s "http://127.0.0.1:$GATE_OPS/metrics" 2>/dev/null | grep -E '^gate_requests_total' | grep -v 'outcome="ok"' > "$CLUSTER_LOGS/gate-errors.txt" || true
curl -s "http://127.0.0.1:$LOGIC_OPS/metrics" 2>/dev/null | grep -E '^logic_(rejections|battle_calls|battle_waits)_total' > "$CLUSTER_LOGS/logic-refusals.txt" || true
curl -s "http://127.0.0.1:$B1_OPS/metrics" 2>/dev/null | grep -E '^battle_(throttle_delay_seconds_(count|sum)|cpu_utilization|shed_total|adaptive_limit)' > "$CLUSTER_LOGS/battle-1.txt" || true
ps -o comm=,times= -p "$(IFS=,; echo "${pids[*]}")" > "$CLUSTER_LOGS/cpu-seconds.txt" 2>/dev/null || true
if [ $rc -ne 0 ]; then
  echo "demo: the load test reported a problem (exit $rc)" >&2
fi
exit $rc
