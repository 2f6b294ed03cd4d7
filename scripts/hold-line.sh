#!/usr/bin/env bash
# The launch-day line of issue 9: 80,000 players waiting in five gates'
# admission lines on this machine, with the gates' default settings
# (keepalive -ping-interval 20s, -pong-timeout 10s, -line-push 2s: none is
# overridden). What it costs the gates to hold them, and whether any player
# who is answering is dropped.
#
# It starts one logic (8 shards) and HOLD_LINE_GATES (5) gates in
# -line-mode queueing, each with its admin API, then one `bin/loadtest run
# hold-line` (loadtest/scenarios/hold-line.yaml) with one load process per
# gate, each from its own loopback source address (127.0.0.11, .12, ...:
# each has its own ephemeral ports): the players surge into the lines over
# 30 s and wait; at 85 s the scenario's timeline paces the gates at 100
# players per second in all (split over the gates: 20 each of 5) through
# POST /admin/line; the players
# let in log in and stay. The load tool probes every gate's and logic's
# /metrics each second. Its thresholds are the pass rule (nobody dropped,
# waiting or let in; nobody left out of line; the paced line lets 100/s
# in); this script prints the run's table and the figures it measured,
# read from the run file with `loadtest figure`: the gates' CPU (cores,
# summed over the gates) while the line stands ([60s:80s], 30 s after the
# surge's curve ends: on 2 cores the last players get in line some 25 s
# late, and the fewest held in the window is printed to show they all
# were) and while it is paced ([90s:110s]), the load processes' and
# logic's, the status pushes
# and keepalive pings per second. It keeps the run file (hold-line.ndjson,
# which `bin/loadtest report` and `compare` read), the table and the logs
# in a directory it prints, and exits 1 when a threshold failed or a step
# failed. About 2 minutes on 2 cores. It stops every process it started,
# also on failure or Ctrl-C.
#
# Loopback only. One process may hold at most 20,000 open files: 16,000
# players per gate and per load process stay within it; it raises `ulimit
# -n` to 18,000 when it is lower.
#
# Environment: HOLD_LINE_DIR (a new temp dir), HOLD_LINE_GATES (5; the
# players are the scenario's 80,000, spread over the gates: at most 18,000
# per gate), HOLD_LINE_SET (more --set overrides, space-separated, e.g.
# "arrivals.phases[0].players=40000 arrivals.phases[1].players=40000"),
# HOLD_LINE_SOURCE (11: load process i dials from 127.0.0.(SOURCE+i)),
# HOLD_LINE_BUILD (1: build bin/ first), HOLD_LINE_GATE_ARGS (extra flags
# for every gate, e.g. "-pong-timeout 40s"; empty: the defaults), BASE_PORT
# (8080: gate i on BASE+10i, its gRPC on +1 and ops on +2; logic on
# BASE+920 and BASE+921).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${HOLD_LINE_DIR:-$(mktemp -d -t levee-hold-line.XXXXXX)}
NGATES=${HOLD_LINE_GATES:-5}
SOURCE=${HOLD_LINE_SOURCE:-11}
read -r -a GATE_ARGS <<<"${HOLD_LINE_GATE_ARGS:-}"
read -r -a SETS <<<"${HOLD_LINE_SET:-}"
PER_WORKER=18000
CLUSTER_NAME=hold-line CLUSTER_LOGS=$DIR/logs
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
cluster_ports "${BASE_PORT:-8080}"

die() {
  echo "hold-line: $*" >&2
  exit 1
}
[[ $NGATES =~ ^[0-9]+$ ]] && [ "$NGATES" -ge 1 ] && [ "$NGATES" -le 20 ] || die "HOLD_LINE_GATES must be an integer in 1..20, got '$NGATES'"
[[ $SOURCE =~ ^[0-9]+$ ]] && [ "$SOURCE" -ge 2 ] && [ "$SOURCE" -le $((254 - NGATES)) ] ||
  die "HOLD_LINE_SOURCE must be an integer in 2..$((254 - NGATES)), got '$SOURCE'"

SECRET=hold-$RANDOM-$RANDOM-$RANDOM
export GATE_ADMIN_TOKEN=admin-$RANDOM-$RANDOM-$RANDOM # read by every gate and the load tool; kept out of ps
mkdir -p "$DIR/logs"

want_fds=$((PER_WORKER + 2000)) # per process: a gate's player sockets, or a load process's
if [ "$(ulimit -n)" -lt "$want_fds" ]; then
  ulimit -Hn "$want_fds" 2>/dev/null || true
  ulimit -n "$want_fds" 2>/dev/null ||
    die "cannot raise the open files limit to $want_fds (ulimit -n is $(ulimit -n)); run as root"
fi

if [ "${HOLD_LINE_BUILD:-1}" != 0 ]; then
  echo "hold-line: building bin/"
  mkdir -p bin
  CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/gate ./cmd/logic ./cmd/loadtest
fi

cluster_trap "the run file, table and logs are in $DIR"

# Gate i's ports, and the load tool's lists.
gate_port() { echo $((GATE + 10 * $1)); }
all_ports=("$LOGIC" "$LOGIC_OPS")
gates=() admins=() metrics=("logic=http://127.0.0.1:$LOGIC_OPS/metrics") sources=()
for ((i = 0; i < NGATES; i++)); do
  gp=$(gate_port "$i")
  all_ports+=("$gp" $((gp + 1)) $((gp + 2)))
  gates+=("ws://127.0.0.1:$gp/ws")
  admins+=("http://127.0.0.1:$((gp + 2))/admin/line")
  metrics+=("gate=http://127.0.0.1:$((gp + 2))/metrics")
  sources+=("127.0.0.$((SOURCE + i))")
done
ports_free -h "set BASE_PORT" "${all_ports[@]}"
join() { local IFS=,; echo "$*"; }

echo "hold-line: $NGATES gates in queueing mode, ${GATE_ARGS[*]:-default settings}; one load process per gate"
echo "hold-line: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
proc_start logic bin/logic -grpc-addr 127.0.0.1:$LOGIC -ops-addr 127.0.0.1:$LOGIC_OPS -data-dir "$DIR/logic" \
  -shards 8 -battle-addrs 127.0.0.1:1 -log-level warn
wait_healthy logic logic 127.0.0.1:$LOGIC
for ((i = 0; i < NGATES; i++)); do
  gp=$(gate_port "$i")
  proc_start "gate-$i" bin/gate -addr "127.0.0.1:$gp" -grpc-addr "127.0.0.1:$((gp + 1))" -ops-addr "127.0.0.1:$((gp + 2))" \
    -logic-addrs 127.0.0.1:$LOGIC -shards 8 -token-secret "$SECRET" -line-mode queueing -log-level warn "${GATE_ARGS[@]}"
done
for ((i = 0; i < NGATES; i++)); do
  wait_healthy "gate-$i" gate "127.0.0.1:$(($(gate_port "$i") + 1))"
done

sets=()
for s in "${SETS[@]}"; do sets+=(-set "$s"); done
set +e
bin/loadtest run hold-line -gate-urls "$(join "${gates[@]}")" -admin-urls "$(join "${admins[@]}")" \
  -metrics "$(join "${metrics[@]}")" -token-secret "$SECRET" -workers "$NGATES" -per-worker "$PER_WORKER" \
  -source-addrs "$(join "${sources[@]}")" -out "$DIR/hold-line.ndjson" -progress line "${sets[@]}" \
  >"$DIR/hold-line.txt" 2>"$DIR/logs/loadtest.log"
rc=$?
set -e
procs_stop
cat "$DIR/hold-line.txt"
[ -s "$DIR/hold-line.ndjson" ] || die "the load tool wrote no run file (exit $rc); see $DIR/logs/loadtest.log"

# fig [FROM TO] NAME: a figure of the run file (AGG:SERIES over [FROM, TO) wall seconds).
fig() {
  if [ $# -eq 3 ]; then
    bin/loadtest figure -from "$1" -to "$2" "$DIR/hold-line.ndjson" "$3" 2>/dev/null || echo "-"
  else
    bin/loadtest figure "$DIR/hold-line.ndjson" "$1" 2>/dev/null || echo "-"
  fi
}
{
  echo
  echo "hold-line: $(fig held) players held by $NGATES gates, ${GATE_ARGS[*]:-default gate settings}"
  echo "  dropped (server closes) $(fig server_closes), of them waiting $(fig server_closes_in_line); not in line (dial failures) $(fig dial_failures); admitted $(fig admitted)"
  printf '  %-22s %8s %8s %8s %8s %10s %10s %12s\n' phase "held min" gates loaders logic "pushes/s" "pings/s" "admitted/s"
  for p in "standing 60 80" "paced 90 110"; do
    read -r name from to <<<"$p"
    printf '  %-22s %8s %8s %8s %8s %10s %10s %12s\n' "$name [${from}s:${to}s]" "$(fig "$from" "$to" min:held)" "$(fig "$from" "$to" avg:cpu_gate)" \
      "$(fig "$from" "$to" avg:cpu_loadtest)" "$(fig "$from" "$to" avg:cpu_logic)" "$(fig "$from" "$to" avg:gate_pushes_per_s)" \
      "$(fig "$from" "$to" avg:gate_pings_per_s)" "$(fig "$from" "$to" avg:admitted)"
  done
  echo "  (CPU in cores from the processes' process_cpu_seconds_total, gates summed; the load processes' own; 1-minute load average now $(cut -d' ' -f1 /proc/loadavg))"
} | tee "$DIR/summary.txt"
[ "$rc" -eq 0 ] || die "the run failed (exit $rc: 99 when a threshold failed); its thresholds are above"
