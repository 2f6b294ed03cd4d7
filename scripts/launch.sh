#!/usr/bin/env bash
# Replays a launch-day scenario against a local Levee cluster that this
# script starts as processes on loopback and stops again (also on Ctrl-C):
# LAUNCH_GATES gates, 1 logic (8 shards), 2 battle. The arguments go to
# `bin/loadtest run` (the scenario, --scale, --speed, --set ...); by default
# the seed's launch day (the `launch` preset).
#
# Environment:
#   LAUNCH_GATES       gates (1); a full-scale day (80,000 players) needs 5:
#                      one gate per 16,000 players (its file limit is 20,000)
#   LAUNCH_PROTECTION  on (default) or off: off starts every tier with
#                      -protection=false, the gates' line open and no
#                      operator timeline (the "before" of the seed)
#   LAUNCH_DIR         directory for the run file, the HTML report, data and
#                      logs (a new temp dir)
#   LAUNCH_LABEL       the run's label in reports (protected / unprotected)
#   LAUNCH_WORKERS     load processes (0: as many as the peak needs, 15,000
#                      players each); workers dial from 127.0.0.11, .12, ...
#   BASE_PORT          8080: gate i listens on BASE_PORT+10i (+1 gRPC, +2
#                      ops); logic +920/+921; battle +1020/+1021, +1120/+1121
#   LAUNCH_DATA        disk (default): logic keeps its data in $LAUNCH_DIR/logic;
#                      tmpfs: in a new directory under /dev/shm, removed at
#                      the end (the demo's choice: on this kind of shared VM
#                      an fsync can stall for most of a second under load,
#                      and every purchase waits for one; BENCHMARKS.md has
#                      both)
#   LAUNCH_STORE       bolt (default): logic's shards in bbolt files under
#                      the data directory above; postgres: in the database
#                      at LAUNCH_POSTGRES_URL (required then; a database of
#                      its own, migrated by logic at start), the one logic
#                      holding every shard's lease (scripts/store-compare.sh
#                      runs the day on both; LAUNCH_DATA then does not apply
#                      to logic: the database's medium is the caller's)
#   LAUNCH_BUILD       1 (default) builds bin/ first; 0 uses it as it is
#   LAUNCH_COMMAND     run (default): `loadtest run`; capacity: `loadtest
#                      capacity` instead (the scenario's action mix offered
#                      open loop at stepped rates; it prints `capacity: N
#                      requests/s` and writes N to $LAUNCH_DIR/capacity),
#                      with the same cluster and target flags, the gates'
#                      line open
#
# It exits with loadtest's code: 0 the thresholds held (capacity: it was
# measured), 99 one failed, 1 the run could not be made, 2 a bad scenario
# or flag.
set -euo pipefail
cd "$(dirname "$0")/.."

NGATES=${LAUNCH_GATES:-1}
PROTECTION=${LAUNCH_PROTECTION:-on}
DIR=${LAUNCH_DIR:-$(mktemp -d -t levee-launch.XXXXXX)}
LABEL=${LAUNCH_LABEL:-}
WORKERS=${LAUNCH_WORKERS:-0}
CLUSTER_NAME=launch CLUSTER_LOGS=$DIR/logs
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
cluster_ports "${BASE_PORT:-8080}"

die() {
  echo "launch: $*" >&2
  exit 1
}
COMMAND=${LAUNCH_COMMAND:-run}
case $COMMAND in
run | capacity) ;;
*) die "LAUNCH_COMMAND must be run or capacity, got $COMMAND" ;;
esac
case $PROTECTION in
on) PROT_ARGS=() LINE_MODE=queueing LABEL=${LABEL:-protected} ;;
off) PROT_ARGS=(-protection=false) LINE_MODE=open LABEL=${LABEL:-unprotected} ;;
*) die "LAUNCH_PROTECTION must be on or off, got $PROTECTION" ;;
esac
# The capacity search's pool of connections is let in at once: the line open.
[ "$COMMAND" = run ] || LINE_MODE=open
[[ $NGATES =~ ^[1-9][0-9]*$ ]] && [ "$NGATES" -le 8 ] || die "LAUNCH_GATES must be 1..8, got $NGATES"
case ${LAUNCH_DATA:-disk} in
disk) DATA_DIR=$DIR/logic ;;
tmpfs)
  [ -d /dev/shm ] && [ -w /dev/shm ] || die "LAUNCH_DATA=tmpfs needs a writable /dev/shm"
  DATA_DIR= # made once the trap that removes it is set
  ;;
*) die "LAUNCH_DATA must be disk or tmpfs, got $LAUNCH_DATA" ;;
esac

STORE=${LAUNCH_STORE:-bolt}
case $STORE in
bolt) ;;
postgres) [ -n "${LAUNCH_POSTGRES_URL:-}" ] || die "LAUNCH_STORE=postgres needs LAUNCH_POSTGRES_URL" ;;
*) die "LAUNCH_STORE must be bolt or postgres, got $STORE" ;;
esac

SECRET=launch-$RANDOM-$RANDOM-$RANDOM
export GATE_ADMIN_TOKEN=admin-$RANDOM-$RANDOM-$RANDOM # read by every gate; kept out of ps
mkdir -p "$DIR/logs"

# A gate holds its players' sockets; 16,000 each plus room.
want_fds=20000
if [ "$(ulimit -n)" -lt "$want_fds" ]; then
  ulimit -Hn "$want_fds" 2>/dev/null || true
  ulimit -n "$want_fds" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi

if [ "${LAUNCH_BUILD:-1}" != 0 ]; then
  echo "launch: building bin/"
  mkdir -p bin
  CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/gate ./cmd/logic ./cmd/battle ./cmd/loadtest
fi

gate_port() { echo $((GATE + 10 * $1)); }
gate_ops() { echo $((GATE + 10 * $1 + 2)); }
all_ports=("$LOGIC" "$LOGIC_OPS" "$B1" "$B1_OPS" "$B2" "$B2_OPS")
for ((i = 0; i < NGATES; i++)); do
  all_ports+=("$(gate_port "$i")" $(($(gate_port "$i") + 1)) "$(gate_ops "$i")")
done
ports_free "${all_ports[@]}"
cluster_trap "run file, report and logs are in $DIR"
if [ "${LAUNCH_DATA:-disk}" = tmpfs ]; then
  # Removed after the cluster has stopped (EXIT runs the cluster's trap).
  trap '_cluster_cleanup; rm -rf "$DATA_DIR"' EXIT
  DATA_DIR=$(mktemp -d /dev/shm/levee-logic.XXXXXX)
fi

echo "launch: protection $PROTECTION: battle x2, logic (8 shards, store $STORE), $NGATES gate(s) with the line $LINE_MODE; logs in $DIR/logs"
proc_start battle-1 bin/battle -grpc-addr 127.0.0.1:$B1 -ops-addr 127.0.0.1:$B1_OPS -log-level warn "${PROT_ARGS[@]}"
proc_start battle-2 bin/battle -grpc-addr 127.0.0.1:$B2 -ops-addr 127.0.0.1:$B2_OPS -log-level warn "${PROT_ARGS[@]}"
wait_healthy battle-1 battle 127.0.0.1:$B1
wait_healthy battle-2 battle 127.0.0.1:$B2
if [ "$STORE" = postgres ]; then
  # The URL through the environment (LOGIC_POSTGRES_URL), not ps.
  export LOGIC_POSTGRES_URL=$LAUNCH_POSTGRES_URL
  STORE_ARGS=(-store postgres -advertise-addr "127.0.0.1:$LOGIC" -node-id "launch-logic-$$")
else
  STORE_ARGS=(-data-dir "$DATA_DIR")
fi
proc_start logic bin/logic -grpc-addr 127.0.0.1:$LOGIC -ops-addr 127.0.0.1:$LOGIC_OPS "${STORE_ARGS[@]}" \
  -shards 8 -battle-addrs 127.0.0.1:$B1,127.0.0.1:$B2 -log-level warn "${PROT_ARGS[@]}"
wait_healthy logic logic 127.0.0.1:$LOGIC
gates=() admins=() metrics=(battle=http://127.0.0.1:$B1_OPS/metrics battle=http://127.0.0.1:$B2_OPS/metrics
  logic=http://127.0.0.1:$LOGIC_OPS/metrics)
for ((i = 0; i < NGATES; i++)); do
  gp=$(gate_port "$i")
  proc_start "gate-$i" bin/gate -addr "127.0.0.1:$gp" -grpc-addr "127.0.0.1:$((gp + 1))" -ops-addr "127.0.0.1:$(gate_ops "$i")" \
    -logic-addrs 127.0.0.1:$LOGIC -shards 8 -token-secret "$SECRET" -line-mode "$LINE_MODE" -log-level warn "${PROT_ARGS[@]}"
  gates+=("ws://127.0.0.1:$gp/ws")
  admins+=("http://127.0.0.1:$(gate_ops "$i")/admin/line")
  metrics+=("gate=http://127.0.0.1:$(gate_ops "$i")/metrics")
done
for ((i = 0; i < NGATES; i++)); do
  wait_healthy "gate-$i" gate "127.0.0.1:$(($(gate_port "$i") + 1))"
done

join() { local IFS=,; echo "$*"; }
target_args=(-gate-urls "$(join "${gates[@]}")" -metrics "$(join "${metrics[@]}")" -token-secret "$SECRET")
[ $# -gt 0 ] || set -- launch
set +e
if [ "$COMMAND" = capacity ]; then
  bin/loadtest capacity "${target_args[@]}" -out "$DIR/capacity.ndjson" -value-out "$DIR/capacity" "$@"
  rc=$?
else
  run_args=("${target_args[@]}" -label "$LABEL" -out "$DIR/run.ndjson" -html "$DIR/report.html" -workers "$WORKERS"
    -source-addrs 127.0.0.11,127.0.0.12,127.0.0.13,127.0.0.14,127.0.0.15,127.0.0.16)
  if [ "$PROTECTION" = on ]; then
    run_args+=(-admin-urls "$(join "${admins[@]}")") # the token: $GATE_ADMIN_TOKEN
  fi
  bin/loadtest run "${run_args[@]}" "$@"
  rc=$?
fi
set -e
ps -o comm=,times= -p "$(IFS=,; echo "${pids[*]}")" >"$DIR/logs/cpu-seconds.txt" 2>/dev/null || true
exit $rc
