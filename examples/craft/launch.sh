#!/usr/bin/env bash
# Craft's own cluster and launch day: builds the craft binary, starts on
# loopback a battle (job) tier, a logic tier (8 shards) and a gate with the
# admission line, replays the launch-day scenario (launch.yaml by default;
# the arguments go to `craft loadtest run`), prints the table and exits
# with the load tool's code: 0 when every threshold held, 99 when one
# failed, 1 when the run could not be made, 2 for a bad scenario or flag.
# Everything it starts is stopped at the end, also on Ctrl-C.
#
#   ./launch.sh                          # launch.yaml, at full (laptop) scale
#   ./launch.sh launch.yaml --scale 0.2  # a smaller day
#
# Environment:
#   BASE_PORT    18080: gate +0 (ws) +1 (gRPC health) +2 (ops); logic
#                +100/+101; battle +200/+201
#   LAUNCH_DIR   directory for the binary, run file, report, data and logs
#                (a new temp dir)
#   GO           the go command (go)
set -euo pipefail
cd "$(dirname "$0")"

BASE=${BASE_PORT:-18080}
GATE=$BASE GATE_GRPC=$((BASE + 1)) GATE_OPS=$((BASE + 2))
LOGIC=$((BASE + 100)) LOGIC_OPS=$((BASE + 101))
BATTLE=$((BASE + 200)) BATTLE_OPS=$((BASE + 201))
DIR=${LAUNCH_DIR:-$(mktemp -d -t craft-launch.XXXXXX)}
mkdir -p "$DIR/logs"
BIN=$DIR/craft

say() { echo "craft-launch: $*"; }
for p in $GATE $GATE_GRPC $GATE_OPS $LOGIC $LOGIC_OPS $BATTLE $BATTLE_OPS; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    say "port $p on 127.0.0.1 is already in use; set BASE_PORT to move the cluster" >&2
    exit 1
  fi
done

say "building $BIN"
CGO_ENABLED=0 ${GO:-go} build -trimpath -o "$BIN" ./cmd/craft

pids=()
stop() {
  trap - EXIT INT TERM
  if [ ${#pids[@]} -gt 0 ]; then
    say "stopping the cluster"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  fi
  say "run file, report and logs are in $DIR"
}
trap stop EXIT
trap 'exit 130' INT TERM

start() { # name, then the craft subcommand and its flags
  local name=$1
  shift
  "$BIN" "$@" >"$DIR/logs/$name.log" 2>&1 &
  pids+=($!)
}
healthy() { # name, tier, gRPC address
  local deadline=$((SECONDS + 20))
  until "$BIN" "$2" healthcheck -addr "$3" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      say "$1 did not become healthy; its log:" >&2
      tail -n 20 "$DIR/logs/$1.log" >&2
      exit 1
    fi
    sleep 0.2
  done
}

SECRET=craft-$RANDOM-$RANDOM-$RANDOM
export GATE_ADMIN_TOKEN=admin-$RANDOM-$RANDOM-$RANDOM # read by the gate and the load tool; kept out of ps

say "battle (forge), logic (8 shards), gate with the line; logs in $DIR/logs"
start battle battle -grpc-addr 127.0.0.1:$BATTLE -ops-addr 127.0.0.1:$BATTLE_OPS -log-level warn
healthy battle battle 127.0.0.1:$BATTLE
start logic logic -grpc-addr 127.0.0.1:$LOGIC -ops-addr 127.0.0.1:$LOGIC_OPS -data-dir "$DIR/data" \
  -shards 8 -battle-addrs 127.0.0.1:$BATTLE -log-level warn
healthy logic logic 127.0.0.1:$LOGIC
start gate gate -addr 127.0.0.1:$GATE -grpc-addr 127.0.0.1:$GATE_GRPC -ops-addr 127.0.0.1:$GATE_OPS \
  -logic-addrs 127.0.0.1:$LOGIC -shards 8 -token-secret "$SECRET" -line-mode queueing -log-level warn
healthy gate gate 127.0.0.1:$GATE_GRPC

[ $# -gt 0 ] || set -- launch.yaml
set +e
"$BIN" loadtest run -gate-urls ws://127.0.0.1:$GATE/ws -token-secret "$SECRET" \
  -admin-urls http://127.0.0.1:$GATE_OPS/admin/line \
  -metrics battle=http://127.0.0.1:$BATTLE_OPS/metrics,logic=http://127.0.0.1:$LOGIC_OPS/metrics,gate=http://127.0.0.1:$GATE_OPS/metrics \
  -label craft -out "$DIR/run.ndjson" -html "$DIR/report.html" "$@"
rc=$?
set -e
exit $rc
