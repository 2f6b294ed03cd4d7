#!/usr/bin/env bash
# CPU each tier spends per request at a steady load well below capacity
# (issue 21, "Figures"): builds a tree's gate, logic, battle and loadtest,
# starts one of each tier on loopback, offers a steady rate of one mix with
# that tree's own `loadtest run` and the SDK client, lets it warm up, then
# reads utime+stime of each tier from /proc/PID/stat over a steady window and
# divides by the requests that tier answered in the window, counted from the
# tier's own /metrics counter (the v1 generation: gate_requests_total,
# logic_requests_total, battle_requests_total; every outcome, summed).
#
#   scripts/cpu-per-request.sh -tree DIR [-tree DIR2 ...] -mix read|demo|read,demo
#       -rate R|read=R,demo=R [-window 60s] [-warmup 15s] [-idle 10s] [-rounds N]
#       [-capacity] [-lock FILE|none] [-keep] [-- LOADTEST-FLAGS...]
#
#   -tree DIR   a checkout of Levee (any generation); repeat it to alternate
#               trees in one session: every round runs each tree in turn, the
#               order reversed on even rounds (A B, B A, A B, ...).
#               DIR:tls runs that tree's gate with TLS at the edge (issue 22:
#               -tls-cert/-tls-key, a throw-away ECDSA P-256 certificate from
#               scripts/lib/edgetls.sh) and the load over wss:// (-ca-file);
#               `-tree T -tree T:tls` is TLS against plain in one session
#   -mix        read: profile reads only; demo: launch.yaml's mix (profile 5,
#               purchase 2, battle 3); both with json 0.1 (a tenth of the
#               players speak protojson). A comma list alternates them
#               within each round
#   -rate R     requests/s offered: R players, each one request per second
#               (±50 %), arriving over 5 s and staying (1..3000); or one
#               rate per mix: read=300,demo=100
#   -window D   the measured window (default 60s; /proc's tick is 10 ms, so
#               a short window is coarse)
#   -warmup D   from the moment every player is connected to the window
#               (default 15s)
#   -idle D     before the load, the idle cluster's CPU is read over D
#               (default 10s; 0: not), printed as "idle cores": the figures
#               per request include that much per second of the window
#   -rounds N   rounds (default 1, at most 20); a round is each mix x tree
#   -capacity   instead: measure the cluster's capacity for each mix with the
#               tree's `loadtest capacity` (pick -rate at <= 30 % of it)
#   -lock FILE  each round (cluster start to stop) and each build holds an
#               exclusive flock on FILE (default /tmp/levee-heavy.lock), so
#               other heavy work does not land in a window; none: no lock
#   -keep       keep the work directory (logs, run files, per-round data)
#   -- ...      the rest goes to every `loadtest run` (or `loadtest
#               capacity`) as it is: -set PATH=VALUE, -search-time 60s, ...
#
# The generation of a tree picks the directory of scenario files and tier
# flags: scripts/cpu-per-request/v2/ if DIR/examples/arena exists, else v1/
# (see scripts/cpu-per-request/README.md). One gate, one logic (8 shards,
# its data on tmpfs when /dev/shm is writable) and one battle, all on
# loopback with ports outside the ephemeral range; the load tool shares the
# machine's cores with them. Everything it starts it stops, also on failure
# or Ctrl-C. It prints one row per round, tier and mix, then the median and
# spread over the rounds. Exit 0: measured; 1: a round failed; 2: bad flags.
set -euo pipefail

SELF_DIR=$(cd "$(dirname "$0")" && pwd)
CLUSTER_NAME=cpu-per-request
# shellcheck source=scripts/lib/cluster.sh
. "$SELF_DIR/lib/cluster.sh" # free_port
# shellcheck source=scripts/lib/edgetls.sh
. "$SELF_DIR/lib/edgetls.sh" # edge_cert, gate_has_tls

usage() {
  sed -n '11,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  echo "(the comment at the top of $0 explains every flag)" >&2
  exit 2
}
die() {
  echo "cpu-per-request: $*" >&2
  exit 2
}
fail() {
  echo "cpu-per-request: $*" >&2
  FAILED=1
  exit 1
}
secs() { # duration (90, 90s, 2m, 1m30s) -> whole seconds
  local d=$1 m=0 s=0
  if [[ $d =~ ^([0-9]+)$ ]]; then
    s=${BASH_REMATCH[1]}
  elif [[ $d =~ ^(([0-9]+)m)?(([0-9]+)s)?$ ]] && [ -n "$d" ]; then
    m=${BASH_REMATCH[2]:-0} s=${BASH_REMATCH[4]:-0}
  else
    return 1
  fi
  echo $((10#$m * 60 + 10#$s))
}

CONNECT_MAX=20
EXTRA=() TREES=() TLS_OF=() MIXES=() RATE= WINDOW=60 WARMUP=15 IDLE=10 ROUNDS=1 CAPACITY=0 LOCK=/tmp/levee-heavy.lock KEEP=0
ARGS=("$@")
while [ $# -gt 0 ]; do
  case $1 in
  -tree | -mix | -rate | -window | -warmup | -idle | -rounds | -lock)
    [ $# -ge 2 ] || die "$1 needs a value"
    ;;
  esac
  case $1 in
  -tree)
    t=$2 tls=0
    if [[ $t == *:tls ]]; then t=${t%:tls} tls=1; fi
    [ -f "$t/go.mod" ] || die "-tree $t: not a Go module (no go.mod)"
    TREES+=("$(cd "$t" && pwd)")
    TLS_OF+=("$tls")
    shift 2
    ;;
  -mix)
    IFS=, read -r -a MIXES <<<"$2"
    for m in "${MIXES[@]}"; do
      case $m in read | demo) ;; *) die "-mix: want read, demo or a comma list of them, got $2" ;; esac
    done
    shift 2
    ;;
  -rate)
    RATE=$2
    shift 2
    ;;
  -window)
    WINDOW=$(secs "$2") && [ "$WINDOW" -ge 5 ] && [ "$WINDOW" -le 600 ] || die "-window: want a duration of 5s..10m (60s, 2m), got $2"
    shift 2
    ;;
  -warmup)
    WARMUP=$(secs "$2") && [ "$WARMUP" -le 600 ] || die "-warmup: want a duration of 0..10m (15s), got $2"
    shift 2
    ;;
  -idle)
    IDLE=$(secs "$2") && [ "$IDLE" -le 600 ] || die "-idle: want a duration of 0..10m (10s), got $2"
    shift 2
    ;;
  -rounds)
    [[ $2 =~ ^[1-9][0-9]*$ ]] && [ "$2" -le 20 ] || die "-rounds: want 1..20, got $2"
    ROUNDS=$2
    shift 2
    ;;
  -capacity) CAPACITY=1 && shift ;;
  -lock)
    LOCK=$2
    shift 2
    ;;
  -keep) KEEP=1 && shift ;;
  --)
    shift
    EXTRA=("$@")
    break
    ;;
  -h | -help | --help) usage ;;
  *) die "unknown argument $1 (see the comment at the top of $0)" ;;
  esac
done
[ ${#TREES[@]} -gt 0 ] || die "-tree DIR is required"
[ ${#MIXES[@]} -gt 0 ] || die "-mix read|demo is required"
[ "$CAPACITY" = 1 ] || [ -n "$RATE" ] || die "-rate R is required (or -capacity to measure what to pick it from)"
declare -A RATE_OF=()
if [ -n "$RATE" ]; then
  rate_ok() { [[ $1 =~ ^[1-9][0-9]*$ ]] && [ "$1" -le 3000 ]; }
  if rate_ok "$RATE"; then
    for m in "${MIXES[@]}"; do RATE_OF[$m]=$RATE; done
  else
    IFS=, read -r -a kvs <<<"$RATE"
    for kv in "${kvs[@]}"; do
      m=${kv%%=*} v=${kv#*=}
      [[ $m =~ ^(read|demo)$ ]] && [ "$m" != "$kv" ] && rate_ok "$v" ||
        die "-rate: want requests/s in 1..3000 (300) or one per mix (read=300,demo=100), got $RATE"
      RATE_OF[$m]=$v
    done
    for m in "${MIXES[@]}"; do [ -n "${RATE_OF[$m]:-}" ] || die "-rate $RATE has no rate for the $m mix"; done
  fi
fi
[ -r /proc/self/stat ] || die "needs Linux /proc"
command -v curl >/dev/null || die "needs curl"
[ "$LOCK" = none ] || command -v flock >/dev/null || die "needs flock (util-linux), or -lock none"
HZ=$(getconf CLK_TCK)

# The generation directory of each tree.
GENS=()
for t in "${TREES[@]}"; do
  if [ -d "$t/examples/arena" ]; then g=v2; else g=v1; fi
  [ -f "$SELF_DIR/cpu-per-request/$g/tree.sh" ] ||
    die "-tree $t is a generation $g tree, and scripts/cpu-per-request/$g/ has no tree.sh yet (see its README.md)"
  GENS+=("$g")
done

WORK=$(mktemp -d -t levee-cpu.XXXXXX)
pids=() names=() DATA= FAILED=0 LOCKED=0 UNCLEAN=0
stop_all() {
  local i pid n
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM "$pid" 2>/dev/null || continue
  done
  for pid in "${pids[@]}"; do
    for ((n = 0; n < 150; n++)); do # 15 s each at most, then SIGKILL
      alive "$pid" || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  pids=() names=()
  if [ -n "$DATA" ]; then rm -rf "$DATA"; fi
  DATA=
  unlock
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "$LOCKER" "$NAP"; do if [ -n "$p" ]; then kill "$p" 2>/dev/null || true; fi; done
  stop_all
  if [ "$KEEP" = 1 ] || [ "$FAILED" = 1 ] || [ "$UNCLEAN" = 1 ] || [ "$rc" -ne 0 ]; then
    rm -rf "$WORK"/bin-*
    echo "cpu-per-request: logs and run files are in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# lock: an exclusive flock on $LOCK through descriptor 9, waited for in
# the background so that a signal ends the wait (a foreground command
# would hold the trap back until the lock came).
LOCKER=
lock() {
  [ "$LOCK" = none ] && return 0
  exec 9>>"$LOCK"
  flock 9 &
  LOCKER=$!
  wait "$LOCKER" || fail "flock $LOCK failed"
  LOCKER=
  LOCKED=1
}
unlock() {
  [ "$LOCKED" = 1 ] || return 0
  flock -u 9
  exec 9>&-
  LOCKED=0
}

# nap SECONDS: sleep, in the background so that a signal ends it at once.
NAP=
nap() {
  sleep "$1" 9>&- &
  NAP=$!
  wait "$NAP"
  NAP=
}
# alive PID: the process runs (a zombie does not).
alive() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  [ "${s%% *}" != Z ]
}
# ticks PID: its utime + stime, in clock ticks (all its threads, live and
# exited).
ticks() {
  local s
  s=$(cat "/proc/$1/stat") || return 1
  s=${s##*) } # the fields after "pid (comm) "; comm may hold spaces
  # shellcheck disable=SC2086
  set -- $s
  echo $((${12} + ${13}))
}
# start NAME CMD...: in the background, output to $RUN/NAME.log, the lock's
# descriptor closed; its pid is PID.
start() {
  local name=$1
  shift
  "$@" >"$RUN/$name.log" 2>&1 9>&- &
  PID=$!
  pids+=("$PID")
  names+=("$name")
}
wait_healthy() { # name, bin, addr
  local deadline=$((SECONDS + 30))
  until gen_healthy "$BIN" "$2" "$3"; do
    [ $SECONDS -lt $deadline ] || {
      tail -n 20 "$RUN/$1.log" >&2
      fail "$1 did not become healthy in 30 s; its log is above"
    }
    alive "$PID" || {
      tail -n 20 "$RUN/$1.log" >&2
      fail "$1 exited at start; its log is above"
    }
    sleep 0.2
  done
}
# scrape URL NAME: every series of metric NAME, "labels value" a line (an
# https:// URL, a TLS gate's ops port, is checked against the bench CA).
scrape() {
  local ca=()
  if [[ $1 == https:* ]]; then ca=(--cacert "$WORK/certs/ca.crt"); fi
  curl -sf --max-time 5 "${ca[@]}" "$1" | awk -v n="$2" '
    index($0, n "{") == 1 || index($0, n " ") == 1 { lab = $1; sub("^" n, "", lab); print (lab == "" ? "{}" : lab), $NF }'
}
sum_of() { awk '{ s += $2 } END { printf "%.0f\n", s }' "$1"; }
# not_ok BEFORE AFTER: the series whose outcome is not "ok" that grew, as
# outcome(action)=delta,... ("" when none).
not_ok() {
  awk 'NR == FNR { a[$1] = $2; next }
    { d = $2 - a[$1]; if (d > 0 && $1 !~ /outcome="ok"/) { l = $1; gsub(/[{}"]/, "", l); out = out (out == "" ? "" : ",") l "=" d } }
    END { print out }' "$1" "$2"
}

# calibrate: the user CPU, in ms, of hashing 64 MiB with sha256sum: the
# same work in every round, so a round in which the machine (or the host
# under it) ran slower shows it here as well as in the tiers' figures.
calibrate() {
  local TIMEFORMAT=%3U t
  t=$({ time head -c 67108864 /dev/zero | sha256sum >/dev/null; } 2>&1)
  awk -v t="$t" 'BEGIN { printf "%.0f", t * 1000 }'
}

# counters SUFFIX: the three tiers' request counters, scraped at once, to
# $RUN/TIER.SUFFIX.
counters() {
  local tier c u ps=()
  for tier in gate logic battle; do
    c=GEN_COUNTER_$tier
    eval "u=\$OPS_$tier"
    scrape "$u" "${!c}" >"$RUN/$tier.$1" &
    ps+=($!)
  done
  for c in "${ps[@]}"; do wait "$c" || fail "could not read the tiers' /metrics"; done
}

setup_tree() { # index
  TREE=${TREES[$1]} GEN=${GENS[$1]} BIN=$WORK/bin-$1
  GEN_DIR=$SELF_DIR/cpu-per-request/$GEN
  # shellcheck source=scripts/cpu-per-request/v1/tree.sh
  . "$GEN_DIR/tree.sh"
  LABEL=${LABELS[$1]:-}
  TLS=${TLS_OF[$1]}
}
# label TREE: its directory's name, @ its commit, +dirty with changes to
# tracked files: read once, when it is built.
label() {
  local l
  l=$(basename "$1")@$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo "?")
  if [ -n "$(git -C "$1" status --porcelain --untracked-files=no 2>/dev/null)" ]; then l+=+dirty; fi
  echo "$l"
}

# cluster: start battle, logic and gate of the current tree; sets WS, OPS_*.
cluster() {
  local port_bg port_bo port_lg port_lo port_gw port_gg port_go secret v
  # (free_port has locals of its own: these names must not clash with them)
  for v in bg bo lg lo gw gg go; do free_port "port_$v"; done
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    DATA=$(mktemp -d /dev/shm/levee-cpu.XXXXXX) DATA_KIND=tmpfs
  else
    DATA=$(mktemp -d "$RUN/data.XXXXXX") DATA_KIND=disk
  fi
  secret=cpu-$RANDOM-$RANDOM-$RANDOM
  gen_battle_cmd "$BIN" "$port_bg" "$port_bo"
  start battle "${GEN_CMD[@]}"
  PID_battle=$PID
  wait_healthy battle battle "127.0.0.1:$port_bg"
  gen_logic_cmd "$BIN" "$port_lg" "$port_lo" "$DATA" "$port_bg"
  start logic "${GEN_CMD[@]}"
  PID_logic=$PID
  wait_healthy logic logic "127.0.0.1:$port_lg"
  gen_gate_cmd "$BIN" "$port_gw" "$port_gg" "$port_go" "$port_lg" "$secret"
  local scheme=ws ops=http
  if [ "$TLS" = 1 ]; then
    GEN_CMD+=(-tls-cert "$WORK/certs/edge.crt" -tls-key "$WORK/certs/edge.key")
    scheme=wss ops=https
  fi
  start gate "${GEN_CMD[@]}"
  PID_gate=$PID
  wait_healthy gate gate "127.0.0.1:$port_gg"
  OPS_gate=$ops://127.0.0.1:$port_go/metrics OPS_logic=http://127.0.0.1:$port_lo/metrics OPS_battle=http://127.0.0.1:$port_bo/metrics
  gen_target_args "$scheme://127.0.0.1:$port_gw/ws" "$secret"
  TARGET=("${GEN_CMD[@]}")
  if [ "$TLS" = 1 ]; then TARGET+=(-ca-file "$WORK/certs/ca.crt"); fi
}

# round TREE_INDEX MIX ROUND: one measurement; appends its rows to $RESULTS.
round() {
  local mix=$2 r=$3 players=${RATE_OF[$2]} calib dur lt t0 t1 n tier c0 c1 i0 i1 idle load rc window us rate notok
  setup_tree "$1"
  RUN=$WORK/round-$r-$mix-$1
  mkdir -p "$RUN"
  lock
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  calib=$(calibrate)
  cluster
  # The idle cluster's own CPU (timers, samplers, GC), for reference: the
  # figures per request include it.
  local i0_gate i0_logic i0_battle ti0 ti1
  if [ "$IDLE" -gt 0 ]; then
    nap 2
    for tier in gate logic battle; do eval "i0_$tier=\$(ticks \$PID_$tier)"; done
    ti0=$(date +%s%N)
    nap "$IDLE"
    for tier in gate logic battle; do eval "i1_$tier=\$(ticks \$PID_$tier)"; done
    ti1=$(date +%s%N)
  fi
  # The run: 5 s of arrivals, then the players stay. Every player must be
  # in within CONNECT_MAX s of its start; the run lasts 5 s longer than the
  # window can then end, and ends on its own (stopping it would count the
  # requests in flight as lost), so that its thresholds judge the whole run.
  dur=$((CONNECT_MAX + WARMUP + WINDOW + 5))
  gen_load_args "$GEN_DIR/$mix.yaml" "$players" "$dur"
  start loadtest "$BIN/loadtest" "${GEN_CMD[@]}" "${TARGET[@]}" -out "$RUN/run.ndjson" -label "$LABEL $mix round $r" "${EXTRA[@]}"
  lt=$PID
  local deadline=$((SECONDS + CONNECT_MAX)) conns=0
  while :; do
    conns=$(scrape "$OPS_gate" "$GEN_CONNS" | sum_of /dev/stdin)
    [ "$conns" -ge "$players" ] && break
    alive "$lt" || fail "the load tool exited before its players were in (log: $RUN/loadtest.log)"
    [ $SECONDS -lt $deadline ] || fail "only $conns of $players players connected within $CONNECT_MAX s (log: $RUN/loadtest.log)"
    sleep 0.5
  done
  nap "$WARMUP"
  # Counters first, then CPU at the start; CPU first, then counters at the
  # end: the scrapes' own CPU stays outside the window.
  counters before
  for tier in gate logic battle; do eval "c0_$tier=\$(ticks \$PID_$tier)"; done
  c0_load=$(ticks "$lt")
  t0=$(date +%s%N)
  nap "$WINDOW"
  for tier in gate logic battle; do eval "c1_$tier=\$(ticks \$PID_$tier)"; done
  c1_load=$(ticks "$lt")
  t1=$(date +%s%N)
  counters after
  alive "$lt" || fail "the load tool ended inside the window (log: $RUN/loadtest.log)"
  for tier in gate logic battle; do
    alive "$(eval echo "\$PID_$tier")" || fail "$tier exited inside the window (log: $RUN/$tier.log)"
  done
  # Its exit code says whether the thresholds held (0) or one failed (99).
  deadline=$((SECONDS + CONNECT_MAX + 5 + 60))
  while alive "$lt"; do
    [ $SECONDS -lt $deadline ] || fail "the load tool did not end (log: $RUN/loadtest.log)"
    sleep 0.5
  done
  rc=0
  wait "$lt" || rc=$?
  stop_all
  case $rc in
  0) load_verdict=clean ;;
  99)
    # The run's whole life counts, not only the window: the criteria
    # that failed, from its table.
    load_verdict="THRESHOLD FAILED: $(grep '✗' "$RUN/loadtest.log" | sed 's/^ *✗ *//' | paste -sd ';' -)"
    UNCLEAN=1
    ;;
  *) fail "the load tool exited with $rc (log: $RUN/loadtest.log)" ;;
  esac
  window=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
  local gate_n
  gate_n=$(($(sum_of "$RUN/gate.after") - $(sum_of "$RUN/gate.before")))
  rate=$(awk -v n="$gate_n" -v w="$window" 'BEGIN { printf "%.1f", n / w }')
  for tier in gate logic battle; do
    n=$(($(sum_of "$RUN/$tier.after") - $(sum_of "$RUN/$tier.before")))
    eval "c0=\$c0_$tier c1=\$c1_$tier"
    if [ "$n" -gt 0 ]; then
      us=$(awk -v t=$((c1 - c0)) -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')
    else
      us=-
    fi
    notok=$(not_ok "$RUN/$tier.before" "$RUN/$tier.after")
    idle=-
    if [ "$IDLE" -gt 0 ]; then
      eval "i0=\$i0_$tier i1=\$i1_$tier"
      idle=$(awk -v t=$((i1 - i0)) -v hz="$HZ" -v a="$ti0" -v b="$ti1" 'BEGIN { printf "%.4f", t / hz / ((b - a) / 1e9) }')
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$LABEL" "$mix" "$r" "$tier" "$us" "$n" "$window" "$rate" \
      "$(awk -v t=$((c1 - c0)) -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }')" "$idle" "${notok:--}" "$calib" "$load" >>"$RESULTS"
  done
  us=$(awk -v t=$((c1_load - c0_load)) -v hz="$HZ" -v n="$gate_n" 'BEGIN { if (n > 0) printf "%.1f", t * 1e6 / hz / n; else print "-" }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$LABEL" "$mix" "$r" "(loadtest)" "$us" "$gate_n" "$window" "$rate" \
    "$(awk -v t=$((c1_load - c0_load)) -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }')" - "$load_verdict" "$calib" "$load" >>"$RESULTS"
  echo "cpu-per-request: round $r, $mix, $LABEL: $gate_n requests at the gate in ${window} s (${rate}/s), load $load_verdict; data on $DATA_KIND" >&2
}

capacity_run() { # tree index, mix
  setup_tree "$1"
  RUN=$WORK/capacity-$2-$1
  mkdir -p "$RUN"
  lock
  cluster
  gen_capacity_args "$GEN_DIR/$2.yaml"
  echo "cpu-per-request: capacity of $LABEL for the $2 mix (generation $GEN, data on $DATA_KIND):"
  local rc=0
  "$BIN/loadtest" "${GEN_CMD[@]}" "${TARGET[@]}" -value-out "$RUN/capacity" "${EXTRA[@]}" 9>&- || rc=$?
  stop_all
  [ "$rc" = 0 ] || fail "loadtest capacity exited with $rc"
  local c
  c=$(cat "$RUN/capacity")
  echo "cpu-per-request: $LABEL $2: capacity $c requests/s; 30 % of it: $((c * 30 / 100)) requests/s"
}

echo "cpu-per-request: $0 ${ARGS[*]}"
echo "cpu-per-request: $(nproc) cores, $(uname -sr), $(go version | cut -d' ' -f3-), CLK_TCK $HZ; the load tool shares the cores with the cluster"
LABELS=()
edge_cert "$WORK/certs"
for i in "${!TREES[@]}"; do
  LABELS[i]=$(label "${TREES[i]}")
  if [ "${TLS_OF[i]}" = 1 ]; then LABELS[i]+=+tls; fi
  for ((j = 0; j < i; j++)); do [ "${LABELS[j]}" != "${LABELS[i]}" ] || LABELS[i]+="#$((i + 1))"; done
  setup_tree "$i"
  echo "cpu-per-request: building $LABEL ($TREE, generation $GEN)"
  lock
  (cd "$TREE" && CGO_ENABLED=0 go build -trimpath -o "$BIN/" "${GEN_PKGS[@]}") 9>&- || fail "the build of $TREE failed"
  unlock
  if [ "${TLS_OF[i]}" = 1 ]; then
    gate_has_tls "$BIN/gate" || fail "-tree ${TREES[i]}:tls: its gate has no -tls-cert"
  fi
done

if [ "$CAPACITY" = 1 ]; then
  for m in "${MIXES[@]}"; do
    for i in "${!TREES[@]}"; do capacity_run "$i" "$m"; done
  done
  exit 0
fi

RESULTS=$WORK/results.tsv
: >"$RESULTS"
echo "cpu-per-request: ${#TREES[@]} tree(s) x ${MIXES[*]} x $ROUNDS round(s) at $RATE requests/s: warm-up ${WARMUP} s, window ${WINDOW} s; about $(((IDLE + WARMUP + WINDOW + 45) * ROUNDS * ${#MIXES[@]} * ${#TREES[@]} / 60 + 1)) min"
for ((r = 1; r <= ROUNDS; r++)); do
  order=("${!TREES[@]}")
  if [ $((r % 2)) = 0 ]; then
    order=()
    for ((i = ${#TREES[@]} - 1; i >= 0; i--)); do order+=("$i"); done
  fi
  for m in "${MIXES[@]}"; do
    for i in "${order[@]}"; do round "$i" "$m" "$r"; done
  done
done

echo
echo "Per round: µs of CPU (utime+stime, /proc/PID/stat) per request the tier answered (its /metrics counter, every outcome) over the window"
{
  printf 'tree\tmix\tround\ttier\tµs CPU/request\trequests counted\twindow s\trate/s (gate)\tCPU s\tidle cores\tnot ok (outcome=count)\tcalibration ms\tload average before\n'
  cat "$RESULTS"
} | column -t -s $'\t'
echo
echo "Over the rounds: median µs CPU/request (min-max, spread = (max-min)/median)"
awk -F'\t' '
  $5 != "-" { k = $1 SUBSEP $2 SUBSEP $4; v[k, ++n[k]] = $5 + 0; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
  $5 == "-" { k = $1 SUBSEP $2 SUBSEP $4; if (!(k in seen)) { seen[k] = 1; order[++m] = k; dash[k] = 1 } }
  END {
    printf "tree\tmix\ttier\tmedian µs/request\tmin-max\tspread\trounds\n"
    for (i = 1; i <= m; i++) {
      k = order[i]; split(k, p, SUBSEP)
      if (dash[k]) { printf "%s\t%s\t%s\t-\t-\t-\t-\n", p[1], p[2], p[3]; continue }
      c = n[k]
      for (a = 1; a <= c; a++) s[a] = v[k, a]
      for (a = 1; a <= c; a++) for (b = a + 1; b <= c; b++) if (s[b] < s[a]) { t = s[a]; s[a] = s[b]; s[b] = t }
      med = (c % 2) ? s[(c + 1) / 2] : (s[c / 2] + s[c / 2 + 1]) / 2
      printf "%s\t%s\t%s\t%.1f\t%.1f-%.1f\t%.1f %%\t%d\n", p[1], p[2], p[3], med, s[1], s[c], (s[c] - s[1]) / med * 100, c
    }
  }' "$RESULTS" | column -t -s $'\t'
if [ ${#TREES[@]} -gt 1 ]; then
  echo
  echo "Against the first tree (${LABELS[0]}): each round's µs/request over the first tree's in the same round, minus 1; the median and range over the rounds"
  awk -F'\t' -v first="${LABELS[0]}" '
    $5 == "-" { next }
    $1 == first { base[$2 SUBSEP $3 SUBSEP $4] = $5; next }
    {
      k = $1 SUBSEP $2 SUBSEP $4
      if (!(k in n)) order[++m] = k
      n[k]++; v[k, n[k]] = $5; rnd[k, n[k]] = $3
    }
    END {
      printf "tree\tmix\ttier\tmedian change\tmin..max\trounds\n"
      for (i = 1; i <= m; i++) {
        k = order[i]; split(k, p, SUBSEP); c = 0
        for (a = 1; a <= n[k]; a++) {
          bk = p[2] SUBSEP rnd[k, a] SUBSEP p[3]
          if (base[bk] > 0) s[++c] = v[k, a] / base[bk] - 1
        }
        if (c == 0) continue
        for (a = 1; a <= c; a++) for (b = a + 1; b <= c; b++) if (s[b] < s[a]) { t = s[a]; s[a] = s[b]; s[b] = t }
        med = (c % 2) ? s[(c + 1) / 2] : (s[c / 2] + s[c / 2 + 1]) / 2
        printf "%s\t%s\t%s\t%+.1f %%\t%+.1f..%+.1f %%\t%d\n", p[1], p[2], p[3], med * 100, s[1] * 100, s[c] * 100, c
      }
    }' "$RESULTS" | column -t -s $'\t'
fi
if [ "$UNCLEAN" = 1 ]; then
  echo
  echo "cpu-per-request: in some rounds a threshold of the load failed (refusals, failures or lost replies somewhere in the run: the \"not ok\" column says whether inside the window); their loadtest.log has the table"
fi
