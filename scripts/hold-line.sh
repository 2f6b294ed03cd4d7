#!/usr/bin/env bash
# The launch-day line of issue 9: 80,000 players waiting in five gates'
# admission lines on this machine, dialing all at once, with the gates'
# default settings (keepalive -ping-interval 20s, -pong-timeout 10s,
# -line-push 2s: none is overridden). What it costs the gates to hold them,
# and whether any player who is answering is dropped.
#
#   1. one logic (8 shards) and HOLD_LINE_GATES (5) gates in -line-mode
#      queueing (everyone waits, nobody is let in), each with its admin API;
#   2. one `bin/loadtest -scenario hold` per gate, all started at once, each
#      dialing HOLD_LINE_CONNS (16,000) players into its gate's line
#      (HOLD_LINE_DIAL_PARALLEL handshakes at a time per process) from its
#      own loopback source address (127.0.0.11, .12, ...: each has its own
#      ephemeral ports);
#   3. once every player is waiting (the sum of the gates' gate_line_waiting
#      is GATES x CONNS, or every load process has its players up, within
#      HOLD_LINE_WAIT), HOLD_LINE_SETTLE, then a HOLD_LINE_WINDOW: "standing
#      line". It measures the CPU the gates, the load processes and logic
#      used (utime + stime from /proc/PID/stat, in cores), the status pushes
#      per second (gate_line_pushes_total{result="sent"}) and any
#      gate_keepalive_*_total counter per second (pings, when exported);
#   4. every gate is switched to paced at HOLD_LINE_RATE (20) players per
#      second through POST /admin/line (100/s in all); after
#      HOLD_LINE_PACED_SETTLE the same over another window: "paced". The
#      players let in log in and stay connected: they are still held;
#   5. the holds end together (the load tool's -hold-end-file), and each
#      load process reports its players held, admitted, dropped (ended
#      before the hold did, waiting or admitted, with the close reason) and
#      failed (never got a place in line). The gates' metrics are read
#      before the holds end: waiting, away (dropped from the line, within
#      their grace), admitted and every gate_keepalive_* series.
# It prints a summary (per gate and in all; CPU per phase; pushes/s) and
# keeps it (summary.txt), the load processes' reports (load-N.json/.txt, and
# the run files load-N.ndjson that `bin/loadtest report` and `compare` read),
# every /metrics read (snap-*/) and the logs in a directory it prints. It
# exits 1 when a player was dropped or did not get into line, or a step
# failed. About 1.5-2.5 minutes at 80,000 on 2 cores. It stops every process
# it started, also on failure or Ctrl-C.
#
# Loopback only. One process may hold at most 20,000 open files: 16,000
# players per gate and per load process stay within it (HOLD_LINE_CONNS is
# at most 18,000); it raises `ulimit -n` to CONNS + 2,000 when it is lower.
# It needs curl and jq.
#
# Environment: HOLD_LINE_DIR (a new temp dir), HOLD_LINE_CONNS (16000,
# players per gate), HOLD_LINE_GATES (5), HOLD_LINE_WAIT (300: seconds the
# players may take to get into line), HOLD_LINE_SETTLE (10, seconds),
# HOLD_LINE_WINDOW (20, seconds, both phases), HOLD_LINE_PACED_SETTLE (5),
# HOLD_LINE_RATE (20: players per second per gate when paced),
# HOLD_LINE_DIAL_PARALLEL (128), HOLD_LINE_DIAL_TIMEOUT (15s: one
# handshake's bound), HOLD_LINE_JSON_FRACTION (0.1: players speaking
# protojson, as the waiting page does), HOLD_LINE_SOURCE (11: load process i
# dials from 127.0.0.(SOURCE+i)), HOLD_LINE_BUILD (1: build bin/ first),
# HOLD_LINE_GATE_ARGS (extra flags for every gate, e.g. "-pong-timeout 40s";
# empty: the defaults), BASE_PORT (8080: gate i on BASE+10i, its gRPC on
# +1 and ops on +2; logic on BASE+920 and BASE+921).
set -euo pipefail
cd "$(dirname "$0")/.."

started_at=$SECONDS
DIR=${HOLD_LINE_DIR:-$(mktemp -d -t levee-hold-line.XXXXXX)}
CONNS=${HOLD_LINE_CONNS:-16000}
NGATES=${HOLD_LINE_GATES:-5}
WAIT=${HOLD_LINE_WAIT:-300}
SETTLE=${HOLD_LINE_SETTLE:-10}
WINDOW=${HOLD_LINE_WINDOW:-20}
PACED_SETTLE=${HOLD_LINE_PACED_SETTLE:-5}
RATE=${HOLD_LINE_RATE:-20}
DIAL_PARALLEL=${HOLD_LINE_DIAL_PARALLEL:-128}
DIAL_TIMEOUT=${HOLD_LINE_DIAL_TIMEOUT:-15s}
JSON_FRACTION=${HOLD_LINE_JSON_FRACTION:-0.1}
SOURCE=${HOLD_LINE_SOURCE:-11}
read -r -a GATE_ARGS <<<"${HOLD_LINE_GATE_ARGS:-}"
CLUSTER_NAME=hold-line CLUSTER_LOGS=$DIR/logs
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
cluster_ports "${BASE_PORT:-8080}"

die() {
  echo "hold-line: $*" >&2
  exit 1
}
int_in() { # name value min max
  if ! [[ $2 =~ ^[0-9]+$ ]] || [ "$2" -lt "$3" ] || [ "$2" -gt "$4" ]; then
    die "$1 must be an integer in $3..$4, got '$2'"
  fi
}
int_in HOLD_LINE_CONNS "$CONNS" 1 18000
int_in HOLD_LINE_GATES "$NGATES" 1 20
int_in HOLD_LINE_WAIT "$WAIT" 1 3600
int_in HOLD_LINE_SETTLE "$SETTLE" 0 600
int_in HOLD_LINE_WINDOW "$WINDOW" 1 600
int_in HOLD_LINE_PACED_SETTLE "$PACED_SETTLE" 0 600
int_in HOLD_LINE_RATE "$RATE" 1 10000
int_in HOLD_LINE_DIAL_PARALLEL "$DIAL_PARALLEL" 1 10000
int_in HOLD_LINE_SOURCE "$SOURCE" 2 $((254 - NGATES))
for tool in curl jq; do
  command -v "$tool" >/dev/null || die "needs $tool"
done

TOTAL=$((CONNS * NGATES))
SECRET=hold-$RANDOM-$RANDOM-$RANDOM
export GATE_ADMIN_TOKEN=admin-$RANDOM-$RANDOM-$RANDOM # read by every gate; kept out of ps
END_FILE=$DIR/end-hold
CLK_TCK=$(getconf CLK_TCK)
mkdir -p "$DIR/logs"
rm -f "$END_FILE"
umask 077
printf 'Authorization: Bearer %s\n' "$GATE_ADMIN_TOKEN" >"$DIR/logs/admin-header"
umask 022

want_fds=$((CONNS + 2000)) # per process: a gate's player sockets, or a load process's
if [ "$(ulimit -n)" -lt "$want_fds" ]; then
  ulimit -Hn "$want_fds" 2>/dev/null || true
  ulimit -n "$want_fds" 2>/dev/null ||
    die "cannot raise the open files limit to $want_fds (ulimit -n is $(ulimit -n)); run as root or lower HOLD_LINE_CONNS"
fi

if [ "${HOLD_LINE_BUILD:-1}" != 0 ]; then
  echo "hold-line: building bin/"
  mkdir -p bin
  CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/gate ./cmd/logic ./cmd/loadtest
fi

cluster_trap "summary, reports and logs are in $DIR"

# Gate i's ports.
gate_port() { echo $((GATE + 10 * $1)); }
gate_ops() { echo $((GATE + 10 * $1 + 2)); }
all_ports=("$LOGIC" "$LOGIC_OPS")
for ((i = 0; i < NGATES; i++)); do
  all_ports+=("$(gate_port "$i")" $(($(gate_port "$i") + 1)) "$(gate_ops "$i")")
done
ports_free -h "set BASE_PORT" "${all_ports[@]}"

echo "hold-line: $NGATES gates in queueing mode, ${GATE_ARGS[*]:-default settings}; $NGATES load processes x $CONNS players = $TOTAL"
echo "hold-line: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
proc_start logic bin/logic -grpc-addr 127.0.0.1:$LOGIC -ops-addr 127.0.0.1:$LOGIC_OPS -data-dir "$DIR/logic" \
  -shards 8 -battle-addrs 127.0.0.1:1 -log-level warn
logic_pid=$PROC_PID
wait_healthy logic logic 127.0.0.1:$LOGIC
gate_pids=()
for ((i = 0; i < NGATES; i++)); do
  gp=$(gate_port "$i")
  proc_start "gate-$i" bin/gate -addr "127.0.0.1:$gp" -grpc-addr "127.0.0.1:$((gp + 1))" -ops-addr "127.0.0.1:$(gate_ops "$i")" \
    -logic-addrs 127.0.0.1:$LOGIC -shards 8 -token-secret "$SECRET" -line-mode queueing -log-level warn "${GATE_ARGS[@]}"
  gate_pids+=("$PROC_PID")
done
for ((i = 0; i < NGATES; i++)); do
  wait_healthy "gate-$i" gate "127.0.0.1:$(($(gate_port "$i") + 1))"
done
service_pids=("${pids[@]}")

# The holds last until the script ends them (END_FILE); -hold only bounds
# them, in case it cannot.
hold_bound=$((WAIT + SETTLE + WINDOW + PACED_SETTLE + WINDOW + 300))
load_pids=()
surge_at=$SECONDS
for ((i = 0; i < NGATES; i++)); do
  bin/loadtest -scenario hold -gate-url "ws://127.0.0.1:$(gate_port "$i")/ws" -token-secret "$SECRET" \
    -source-addr "127.0.0.$((SOURCE + i))" -conns "$CONNS" -dial-parallel "$DIAL_PARALLEL" -request-timeout "$DIAL_TIMEOUT" \
    -bound "${WAIT}s" -hold "${hold_bound}s" -hold-settle "${SETTLE}s" -hold-end-file "$END_FILE" \
    -target-pid "${gate_pids[$i]}" -metrics-urls "http://127.0.0.1:$(gate_ops "$i")/metrics" \
    -json-fraction "$JSON_FRACTION" -progress 0 -run-id "g$i" -json-out "$DIR/load-$i.json" \
    -run-file "$DIR/load-$i.ndjson" -label "g$i" \
    >"$DIR/load-$i.txt" 2>"$DIR/logs/load-$i.log" &
  load_pids+=("$!")
  pids+=("$!")
done

# pause SECONDS: sleep, and let a signal's trap run at once (bash runs it
# only after a foreground command is done).
pause() {
  sleep "$1" &
  pids+=("$!")
  wait "$!"
  unset 'pids[-1]'
}

# metrics I FILE: gate i's /metrics into FILE.
metrics() { curl -sf --max-time 10 "http://127.0.0.1:$(gate_ops "$1")/metrics" >"$2"; }
# msum NAME [LABELS] < FILE: the sum of the series NAME (those whose labels
# contain LABELS, e.g. 'result="sent"'), 0 when there is none.
msum() {
  awk -v name="$1" -v lab="${2:-}" '
    (lab == "" && $1 == name) || (index($1, name "{") == 1 && index($1, lab) > 0) { s += $2 }
    END { printf "%.10g\n", s }'
}
# ticks PID...: the CPU time the processes used, in clock ticks.
ticks() {
  local p t=0
  for p in "$@"; do
    t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
  done
  echo $t
}

# note_load: the 1-minute load average into load, and its peak so far.
note_load() {
  load=$(cut -d' ' -f1 /proc/loadavg)
  peak_load=$(awk -v a="$load" -v b="$peak_load" 'BEGIN { print (a > b) ? a : b }')
}

# loaders_up: how many load processes have all their players up (or
# failed): each logs it once.
loaders_up() { cat "$DIR"/logs/load-*.log | grep -c '"msg":"connections held"' || true; }

# Wait for the surge to be in line.
echo "hold-line: the surge: $TOTAL players dialing at once"
peak_load=0
waiting=0
said=0
while :; do
  waiting=0
  for ((i = 0; i < NGATES; i++)); do
    if metrics "$i" "$DIR/logs/waiting.metrics"; then
      waiting=$((waiting + $(msum gate_line_waiting <"$DIR/logs/waiting.metrics")))
    fi
  done
  note_load
  up=$(loaders_up)
  for ((i = 0; i < NGATES; i++)); do
    kill -0 "${load_pids[$i]}" 2>/dev/null || {
      tail -n 20 "$DIR/logs/load-$i.log" >&2
      die "load process $i ended during the surge; its log is above"
    }
  done
  elapsed=$((SECONDS - surge_at))
  if [ "$waiting" -ge "$TOTAL" ] || [ "$up" -eq "$NGATES" ]; then
    break
  fi
  [ "$elapsed" -lt "$WAIT" ] || die "only $waiting of $TOTAL players in line after ${WAIT}s (HOLD_LINE_WAIT)"
  if [ $((elapsed - said)) -ge 5 ]; then
    echo "hold-line:   ${elapsed}s: $waiting waiting, $up of $NGATES load processes up, load average $load"
    said=$elapsed
  fi
  sleep 1
done
in_line_after=$elapsed
# Every load process has its players up (or failed) once it logs; the last
# ones may log after the gates count them.
until [ "$up" -eq "$NGATES" ]; do
  [ $((SECONDS - surge_at)) -lt "$WAIT" ] || die "the load processes did not finish dialing in ${WAIT}s"
  sleep 1
  up=$(loaders_up)
done
echo "hold-line: in line after ${in_line_after}s: $waiting waiting by the gates' count (it lags a push interval), $up of $NGATES load processes up (load average $peak_load at most)"

# snap NAME: the time, every process's CPU ticks and every gate's /metrics.
snap() {
  local d=$DIR/snap-$1 i
  mkdir -p "$d"
  note_load
  date +%s.%N >"$d/time"
  for ((i = 0; i < NGATES; i++)); do
    ticks "${gate_pids[$i]}" >"$d/gate-$i.ticks"
  done
  ticks "${load_pids[@]}" >"$d/load.ticks"
  ticks "$logic_pid" >"$d/logic.ticks"
  for ((i = 0; i < NGATES; i++)); do
    metrics "$i" "$d/gate-$i.metrics" || die "cannot read gate $i's /metrics"
  done
}
# sum_gates_ticks SNAP, sum_gates_metric SNAP NAME [LABELS]: summed over
# the gates.
sum_gates_ticks() { cat "$DIR/snap-$1"/gate-*.ticks | awk '{ s += $1 } END { print s }'; }
sum_gates_metric() { cat "$DIR/snap-$1"/gate-*.metrics | msum "$2" "${3:-}"; }
# phase A B LABEL: the figures between snapshots A and B, one line of
# name=value pairs into $DIR/phase-LABEL.
phase() {
  local a=$1 b=$2 label=$3 i dt
  dt=$(awk -v a="$(cat "$DIR/snap-$a/time")" -v b="$(cat "$DIR/snap-$b/time")" 'BEGIN { print b - a }')
  {
    echo "seconds $dt"
    awk -v a="$(sum_gates_ticks "$a")" -v b="$(sum_gates_ticks "$b")" -v t="$CLK_TCK" -v d="$dt" \
      'BEGIN { printf "gates %.3f\n", (b - a) / t / d }'
    for ((i = 0; i < NGATES; i++)); do
      awk -v a="$(cat "$DIR/snap-$a/gate-$i.ticks")" -v b="$(cat "$DIR/snap-$b/gate-$i.ticks")" -v t="$CLK_TCK" -v d="$dt" \
        -v i="$i" 'BEGIN { printf "gate-%d %.3f\n", i, (b - a) / t / d }'
    done
    for p in load logic; do
      awk -v a="$(cat "$DIR/snap-$a/$p.ticks")" -v b="$(cat "$DIR/snap-$b/$p.ticks")" -v t="$CLK_TCK" -v d="$dt" \
        -v p="$p" 'BEGIN { printf "%s %.3f\n", p, (b - a) / t / d }'
    done
    awk -v a="$(sum_gates_metric "$a" gate_line_pushes_total 'result="sent"')" \
      -v b="$(sum_gates_metric "$b" gate_line_pushes_total 'result="sent"')" -v d="$dt" \
      'BEGIN { printf "pushes %.0f\n", (b - a) / d }'
    awk -v a="$(sum_gates_metric "$a" gate_line_admitted_total)" -v b="$(sum_gates_metric "$b" gate_line_admitted_total)" \
      -v d="$dt" 'BEGIN { printf "admitted %.1f\n", (b - a) / d }'
    # Every keepalive counter the gates export, per second (none today).
    cat "$DIR/snap-$b"/gate-*.metrics | awk '$1 ~ /^gate_keepalive_[a-z_]*_total([{]|$)/ { sub(/[{].*/, "", $1); print $1 }' |
      sort -u | while read -r name; do
      awk -v a="$(sum_gates_metric "$a" "$name")" -v b="$(sum_gates_metric "$b" "$name")" -v d="$dt" -v n="$name" \
        'BEGIN { printf "%s %.1f\n", n, (b - a) / d }'
    done
  } >"$DIR/phase-$label"
}
fig() { awk -v k="$2" '$1 == k { print $2 }' "$DIR/phase-$1"; }

echo "hold-line: standing line: settling ${SETTLE}s, then measuring ${WINDOW}s"
pause "$SETTLE"
snap standing-0
pause "$WINDOW"
snap standing-1
phase standing-0 standing-1 standing

echo "hold-line: pacing every gate at $RATE players/s ($((RATE * NGATES))/s in all)"
for ((i = 0; i < NGATES; i++)); do
  curl -sf --max-time 10 -H @"$DIR/logs/admin-header" -d mode=paced -d rate="$RATE" -d interval=1s \
    "http://127.0.0.1:$(gate_ops "$i")/admin/line" >"$DIR/logs/admin-gate-$i.json" ||
    die "POST /admin/line on gate $i failed"
done
echo "hold-line: paced: settling ${PACED_SETTLE}s, then measuring ${WINDOW}s"
pause "$PACED_SETTLE"
snap paced-0
pause "$WINDOW"
snap paced-1
phase paced-0 paced-1 paced

# End the holds together and collect the reports.
touch "$END_FILE"
load_rc=()
for ((i = 0; i < NGATES; i++)); do
  rc=0
  wait "${load_pids[$i]}" || rc=$?
  load_rc+=("$rc")
done
pids=("${service_pids[@]}")
procs_stop

# The summary.
fail=()
{
  echo "hold-line: $NGATES gates x $CONNS players = $TOTAL waiting, ${GATE_ARGS[*]:-default gate settings}"
  echo "  in line after ${in_line_after}s of the surge; 1-minute load average at most $peak_load ($(nproc) CPUs)"
  echo "  waiting by the gates' count: $(sum_gates_metric standing-0 gate_line_waiting) as the standing window began, $(sum_gates_metric paced-1 gate_line_waiting) as the paced one ended"
  printf '  %-6s %7s %8s %7s %6s %8s %6s %9s %9s  %s\n' gate held admitted dropped failed gate:away KiB/pl cpu:stand cpu:paced "drop reasons; failures"
  th=0 ta=0 td=0 tf=0 taway=0
  for ((i = 0; i < NGATES; i++)); do
    j=$DIR/load-$i.json
    if [ ! -s "$j" ]; then
      fail+=("load process $i wrote no report (exit ${load_rc[$i]}; see logs/load-$i.log)")
      continue
    fi
    [ "${load_rc[$i]}" -le 1 ] || fail+=("load process $i exited ${load_rc[$i]}")
    held=$(jq -r .held "$j") adm=$(jq -r .admitted "$j") drop=$(jq -r .dropped "$j")
    failed=$(jq -r '[.failures[]] | add // 0' "$j")
    kib=$(jq -r '.rss_per_conn_bytes / 1024 | . * 100 | round / 100' "$j")
    reasons=$(jq -r '[(.drop_reasons // {} | to_entries[] | "\(.key) \(.value)"), (.failures | to_entries[] | "failed: \(.key) \(.value)")] | join(", ")' "$j")
    m=$DIR/snap-paced-1/gate-$i.metrics
    away=$(($(msum gate_line_length <"$m") - $(msum gate_line_waiting <"$m")))
    printf '  %-6s %7d %8d %7d %6d %8d %6s %9s %9s  %s\n' "$((i + 1))" "$held" "$adm" "$drop" "$failed" "$away" "$kib" \
      "$(fig standing "gate-$i")" "$(fig paced "gate-$i")" "$reasons"
    th=$((th + held)) ta=$((ta + adm)) td=$((td + drop)) tf=$((tf + failed)) taway=$((taway + away))
  done
  printf '  %-6s %7d %8d %7d %6d %8d %6s %9s %9s\n' all "$th" "$ta" "$td" "$tf" "$taway" "" "$(fig standing gates)" "$(fig paced gates)"
  # One example of each reason, over all the reports.
  for j in "$DIR"/load-*.json; do
    if [ -s "$j" ]; then jq -r '(.drop_examples // {} | to_entries[] | "dropped, \(.key): \(.value)"),
      (.failure_examples // {} | to_entries[] | "failed, \(.key): \(.value)")' "$j"; fi
  done | sort -t: -k1,1 -u | sed 's/^/  first /'
  echo
  printf '  %-26s %8s %8s %8s %10s %12s  %s\n' phase gates loaders logic "pushes/s" "admitted/s" "keepalive counters /s"
  for p in standing paced; do
    case $p in
    standing) label="standing line (${WINDOW}s)" ;;
    paced) label="paced at $((RATE * NGATES))/s (${WINDOW}s)" ;;
    esac
    ka=$(awk '$1 ~ /^gate_keepalive_/ { printf "%s%s %s", sep, $1, $2; sep = ", " }' "$DIR/phase-$p")
    printf '  %-26s %8s %8s %8s %10s %12s  %s\n' "$label" "$(fig $p gates)" "$(fig $p load)" "$(fig $p logic)" \
      "$(fig $p pushes)" "$(fig $p admitted)" "${ka:-(no gate_keepalive_* counters exported)}"
  done
  echo "  (CPU in cores: utime + stime from /proc/PID/stat over each window; gates summed over all $NGATES)"
  ka_end=$(cat "$DIR"/snap-paced-1/gate-*.metrics | awk '$1 ~ /^gate_keepalive_/ && $1 !~ /_bucket[{]/ {
      n = $1; sub(/[{].*/, "", n); s[n] += $2 } END { for (n in s) printf "%s %g\n", n, s[n] }' | sort)
  if [ -n "$ka_end" ]; then
    echo "  gates' keepalive metrics before the holds ended (summed over the gates):"
    while read -r n v; do echo "    $n $v"; done <<<"$ka_end"
  fi
  echo "  whole run $((SECONDS - started_at))s"
  [ "$td" -eq 0 ] || fail+=("$td of $th held players dropped")
  [ "$tf" -eq 0 ] || fail+=("$tf players did not get into line")
  [ $((th + tf)) -eq "$TOTAL" ] || fail+=("the reports account for $((th + tf)) of $TOTAL players")
  if [ ${#fail[@]} -eq 0 ]; then
    echo "PASS"
  else
    echo "FAIL"
    for f in "${fail[@]}"; do echo "  - $f"; done
  fi
} | tee "$DIR/summary.txt"
grep -qx PASS "$DIR/summary.txt"
