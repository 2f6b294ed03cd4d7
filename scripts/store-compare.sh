#!/usr/bin/env bash
# Logic's two stores side by side in one session on this machine (issue 23,
# "Figures"): starts a throwaway PostgreSQL from the Debian binaries (initdb
# in a new directory, durable: fsync, synchronous_commit and
# full_page_writes on, as in production), and for each medium (disk: the
# data directory on the VM's disk; tmpfs: on /dev/shm) runs
#
#   load      for each of bolt-1, bolt-3 (static -instance/-instances),
#             postgres-1 and postgres-3 (shard leases): one battle, the
#             logic processes and one gate on loopback; `loadtest capacity`
#             of a purchase-only mix (scripts/store-compare/purchase.yaml,
#             2,000 connections, p99 <= 250 ms and 95 % served) gives C;
#             then 0.7 x C offered open loop for 20 s, over which it reads
#             logic's commit p99 (logic_commit_duration_seconds, summed
#             over the logic processes), the mean group-commit size, and
#             the CPU (utime+stime from /proc/PID/stat) of logic and of
#             PostgreSQL (the postmaster, its children and its reaped
#             children) per purchase logic answered ok;
#   failover  3 logic on PostgreSQL (-lease-ttl 5s -lease-renew 1s, no
#             load), SIGKILL one, poll shard_leases every 100 ms until
#             every shard the killed process held has a live lease of
#             another; a shard's time without an owner = the new lease's
#             acquisition (its expires_at - TTL, as first seen) - the kill;
#             the killed process is restarted and the shards rebalanced
#             between rounds (STORE_COMPARE_KILLS rounds);
#   launch    the launch day (`launch -scale 0.1 -speed 5`, as make demo)
#             through scripts/launch.sh on bbolt and then on PostgreSQL
#             (LAUNCH_STORE=postgres), with the same medium for both;
#             PostgreSQL's CPU over the run is added to the table.
#
# Everything it starts it stops and removes at the end, also on failure or
# Ctrl-C (trap). Ports are outside the kernel's ephemeral range. The load
# tool shares the machine's cores with the cluster and PostgreSQL: every
# figure it prints is "shared". It takes the heavy-command lock
# (/tmp/levee-heavy.lock) for the whole session unless
# STORE_COMPARE_LOCK=none.
#
# Environment:
#   STORE_COMPARE_MEDIA   "disk tmpfs" (default) or one of them
#   STORE_COMPARE_PHASES  "load failover launch" (default) or a subset
#   STORE_COMPARE_LAUNCH_MEDIA  media the launch phase runs on ("disk")
#   STORE_COMPARE_CONFIGS the load phase's clusters ("bolt-1 bolt-3
#                         postgres-1 postgres-3")
#   STORE_COMPARE_SHARDS  shards of every cluster (24: 8 per logic of 3)
#   STORE_COMPARE_KILLS   failover rounds (3)
#   STORE_COMPARE_LAUNCH  the launch phase's loadtest arguments
#                         ("launch -scale 0.1 -speed 5")
#   STORE_COMPARE_DIR     work directory, kept (a new temp dir, removed
#                         unless STORE_COMPARE_KEEP=1)
#   STORE_COMPARE_BUILD   1 (default) builds bin/ first; 0 uses it
#   STORE_COMPARE_LOCK    the lock file, or none
#
# Exit 0: every figure measured; 1: a step failed (its log is named).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CLUSTER_NAME=store-compare
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh # free_port, wait_healthy, LEVEE_INSECURE

MEDIA=${STORE_COMPARE_MEDIA:-disk tmpfs}
PHASES=${STORE_COMPARE_PHASES:-load failover launch}
LAUNCH_MEDIA=${STORE_COMPARE_LAUNCH_MEDIA:-disk}
CONFIGS=${STORE_COMPARE_CONFIGS:-bolt-1 bolt-3 postgres-1 postgres-3}
SHARDS=${STORE_COMPARE_SHARDS:-24}
KILLS=${STORE_COMPARE_KILLS:-3}
read -r -a LAUNCH_ARGS <<<"${STORE_COMPARE_LAUNCH:-launch -scale 0.1 -speed 5}"
LOCK=${STORE_COMPARE_LOCK:-/tmp/levee-heavy.lock}
TTL_S=5 RENEW_S=1
SCENARIO=$ROOT/scripts/store-compare/purchase.yaml

die() {
  echo "store-compare: $*" >&2
  exit 1
}
for m in $MEDIA $LAUNCH_MEDIA; do
  case $m in disk | tmpfs) ;; *) die "media are disk or tmpfs, got $m" ;; esac
done
for c in $CONFIGS; do
  case $c in bolt-1 | bolt-3 | postgres-1 | postgres-3) ;; *) die "configs are bolt-1, bolt-3, postgres-1, postgres-3; got $c" ;; esac
done
for p in $PHASES; do
  case $p in load | failover | launch) ;; *) die "phases are load, failover, launch; got $p" ;; esac
done
[[ $SHARDS =~ ^[1-9][0-9]*$ ]] && [ "$SHARDS" -ge 3 ] && [ "$SHARDS" -le 1024 ] || die "STORE_COMPARE_SHARDS must be 3..1024"
[[ $KILLS =~ ^[1-9][0-9]?$ ]] || die "STORE_COMPARE_KILLS must be 1..99"
has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; }
if has "$MEDIA" tmpfs || has "$LAUNCH_MEDIA" tmpfs; then
  [ -d /dev/shm ] && [ -w /dev/shm ] || die "the tmpfs medium needs a writable /dev/shm"
fi

PG_BIN=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
[ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ] || die "no PostgreSQL server binaries under /usr/lib/postgresql (run scripts/ensure-postgres.sh)"
PSQL=$PG_BIN/psql

DIR=${STORE_COMPARE_DIR:-$(mktemp -d -t levee-store-compare.XXXXXX)}
mkdir -p "$DIR"
RESULTS=$DIR/results.tsv FAILOVER=$DIR/failover.tsv LAUNCHES=$DIR/launch.tsv
: >"$RESULTS"
: >"$FAILOVER"
: >"$LAUNCHES"
HZ=$(getconf CLK_TCK)
# The gate and the load tool hold 2,000 sockets each.
if [ "$(ulimit -n)" -lt 8192 ]; then ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)"; fi

# --- processes -------------------------------------------------------------
# Every process this script starts is in PIDS (and its name in NAMES); stop
# ends them by pid: SIGTERM, then SIGKILL after 20 s.
declare -A NAMES=()
PIDS=()
start() { # name, log, command...
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  NAMES[$PID]=$name
}
alive() { [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
stop_pids() { # pid...
  local p deadline
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  deadline=$((SECONDS + 20))
  for p in "$@"; do
    while alive "$p" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    alive "$p" && kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}
stop_all() {
  stop_pids "${PIDS[@]}"
  PIDS=()
}

# --- PostgreSQL ------------------------------------------------------------
PG_ROOT= PG_PID= PG_WRAP= PG_PORT=
as_pg() { # PostgreSQL refuses to run as root: then as the user postgres
  if [ "$(id -u)" = 0 ]; then setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else "$@"; fi
}
pg_start() { # medium
  case $1 in
  disk) PG_ROOT=$(mktemp -d /var/tmp/levee-pg.XXXXXX) ;;
  tmpfs) PG_ROOT=$(mktemp -d /dev/shm/levee-pg.XXXXXX) ;;
  esac
  [ "$(id -u)" != 0 ] || chown postgres: "$PG_ROOT"
  as_pg "$PG_BIN/initdb" -D "$PG_ROOT/data" -U postgres --auth=trust -E UTF8 --locale=C >"$DIR/initdb-$1.log" 2>&1 ||
    { tail -n 20 "$DIR/initdb-$1.log" >&2; die "initdb failed"; }
  free_port PG_PORT
  # Durable: fsync, synchronous_commit and full_page_writes at their
  # defaults (on); the rest sized for a few logic processes' pools.
  as_pg "$PG_BIN/postgres" -D "$PG_ROOT/data" -p "$PG_PORT" -k "$PG_ROOT" -c listen_addresses=127.0.0.1 \
    -c max_connections=200 -c shared_buffers=256MB -c log_min_messages=warning \
    -c fsync=on -c synchronous_commit=on -c full_page_writes=on >"$DIR/postgres-$1.log" 2>&1 &
  PG_WRAP=$! # the subshell of as_pg; the postmaster is its child
  local deadline=$((SECONDS + 30))
  until "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; do
    alive "$PG_WRAP" || { tail -n 20 "$DIR/postgres-$1.log" >&2; die "postgres exited"; }
    [ $SECONDS -lt $deadline ] || die "postgres not ready within 30 s"
    sleep 0.2
  done
  PG_PID=$(head -n 1 "$PG_ROOT/data/postmaster.pid")
  [[ $PG_PID =~ ^[0-9]+$ ]] && alive "$PG_PID" || die "no postmaster pid in $PG_ROOT/data/postmaster.pid"
  echo "store-compare: PostgreSQL $("$PG_BIN/postgres" -V | awk '{print $3}') on $1 ($PG_ROOT, port $PG_PORT, pid $PG_PID; fsync $(pg -Atc 'show fsync'), synchronous_commit $(pg -Atc 'show synchronous_commit'))"
}
pg() { "$PSQL" -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }
pg_url() { echo "postgres://postgres@127.0.0.1:$PG_PORT/$1?sslmode=disable"; }
pg_newdb() { pg -c "CREATE DATABASE $1" >/dev/null; }
pg_stop() {
  [ -n "$PG_WRAP" ] || return 0
  [ -z "$PG_PID" ] || kill -INT "$PG_PID" 2>/dev/null || true # fast shutdown
  local deadline=$((SECONDS + 30))
  while alive "$PG_WRAP" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  if [ -n "$PG_PID" ] && alive "$PG_PID"; then kill -KILL "$PG_PID" 2>/dev/null || true; fi
  wait "$PG_WRAP" 2>/dev/null || true
  # The postmaster's children outlive it for a moment: wait for the data
  # directory to be free before removing it (bounded).
  deadline=$((SECONDS + 10))
  while [ $SECONDS -lt $deadline ] && pgrep -f -- "-D $PG_ROOT/data" >/dev/null 2>&1; do sleep 0.1; done
  rm -rf "$PG_ROOT"
  PG_PID= PG_WRAP= PG_ROOT=
}
# pg_ticks: CPU ticks of the postmaster, its live children and the children
# it has reaped (cutime+cstime): every PostgreSQL process's CPU.
pg_ticks() {
  local p kids t=0 s
  kids=$(pgrep -P "$PG_PID" || true)
  for p in $PG_PID $kids; do
    s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    if [ "$p" = "$PG_PID" ]; then t=$((t + ${12} + ${13} + ${14} + ${15})); else t=$((t + ${12} + ${13})); fi
  done
  echo "$t"
}
ticks() { # pid...: utime+stime summed
  local p s t=0
  for p; do
    s=$(cat "/proc/$p/stat") || return 1
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    t=$((t + ${12} + ${13}))
  done
  echo "$t"
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_all
  pg_stop
  rm -rf "${DATA_TMPFS:-}"
  if [ "${STORE_COMPARE_KEEP:-0}" = 1 ] || [ $rc != 0 ]; then
    echo "store-compare: logs and results in $DIR" >&2
  else
    rm -rf "$DIR"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$LOCK" != none ]; then
  exec 9>"$LOCK"
  echo "store-compare: waiting for $LOCK"
  flock 9
fi
if [ "${STORE_COMPARE_BUILD:-1}" != 0 ]; then
  echo "store-compare: building bin/"
  mkdir -p bin
  CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/gate ./cmd/logic ./cmd/battle ./cmd/loadtest
fi

# --- metrics -----------------------------------------------------------------
# scrape NAME URL...: "labels value" lines of metric NAME, summed over the URLs
# by label set.
scrape() {
  local n=$1 u
  shift
  for u; do curl -sf --max-time 5 "$u" || return 1; done | awk -v n="$n" '
    index($0, n "{") == 1 || index($0, n " ") == 1 { lab = $1; sub("^" n, "", lab); s[lab == "" ? "{}" : lab] += $NF }
    END { for (l in s) printf "%s %.0f\n", l, s[l] }'
}
# quantile Q BEFORE AFTER: from two scrapes of a histogram's _bucket
# series, the Q quantile of what was observed between them (linear within
# the bucket, as Prometheus's histogram_quantile), in ms.
quantile() {
  awk -v q="$1" 'NR == FNR { a[$1] = $2; next }
    { match($1, /le="[^"]*"/); le = substr($1, RSTART + 4, RLENGTH - 5); d[le] = $2 - a[$1] }
    END {
      n = 0
      for (le in d) { if (le != "+Inf") { b[++n] = le + 0 } }
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (b[j] < b[i]) { t = b[i]; b[i] = b[j]; b[j] = t }
      tot = d["+Inf"]; if (tot <= 0) { print "-"; exit }
      rank = q * tot; prev = 0; lo = 0
      for (i = 1; i <= n; i++) {
        for (le in d) if (le != "+Inf" && le + 0 == b[i]) c = d[le]
        if (c >= rank) { printf "%.2f\n", (lo + (b[i] - lo) * (rank - prev) / (c - prev > 0 ? c - prev : 1)) * 1000; exit }
        prev = c; lo = b[i]
      }
      printf ">%.0f\n", b[n] * 1000
    }' "$2" "$3"
}
sum_of() { awk '{ s += $2 } END { printf "%.0f\n", s }' "$1"; }
# delta FILTER BEFORE AFTER: the growth of the series whose labels match FILTER.
delta() { awk -v f="$1" 'NR == FNR { a[$1] = $2; next } $1 ~ f { s += $2 - a[$1] } END { printf "%.0f\n", s }' "$2" "$3"; }

# --- clusters ------------------------------------------------------------
BATTLE_PID= BATTLE_ADDR=
battle_start() {
  local g o
  free_port g
  free_port o
  start battle "$DIR/battle.log" bin/battle -grpc-addr "127.0.0.1:$g" -ops-addr "127.0.0.1:$o" -log-level warn
  BATTLE_PID=$PID BATTLE_ADDR=127.0.0.1:$g
  wait_healthy battle battle "$BATTLE_ADDR"
}

# logic_start RUN NAME STORE INDEX N DB: one logic process; appends to
# LOGIC_PIDS, LOGIC_ADDRS, LOGIC_OPS, LOGIC_NODES.
LOGIC_PIDS=() LOGIC_ADDRS=() LOGIC_OPS=() LOGIC_NODES=()
logic_start() {
  local run=$1 name=$2 store=$3 i=$4 n=$5 db=$6 g o args
  free_port g
  free_port o
  args=(-grpc-addr "127.0.0.1:$g" -ops-addr "127.0.0.1:$o" -shards "$SHARDS" -battle-addrs "$BATTLE_ADDR" -log-level warn)
  if [ "$store" = bolt ]; then
    args+=(-store bolt -data-dir "$DATA/$run-$i" -instance "$i" -instances "$n")
  else
    args+=(-store postgres -postgres-url "$(pg_url "$db")" -advertise-addr "127.0.0.1:$g" -node-id "$name"
      -lease-ttl "${TTL_S}s" -lease-renew "${RENEW_S}s")
  fi
  start "$name" "$DIR/$name.log" bin/logic "${args[@]}"
  LOGIC_PIDS+=("$PID") LOGIC_ADDRS+=("127.0.0.1:$g") LOGIC_OPS+=("http://127.0.0.1:$o/metrics") LOGIC_NODES+=("$name")
}
# leases_balanced DB N: every shard has a live lease and N processes hold them.
leases_balanced() {
  local r
  r=$(pg -d "$1" -Atc "SELECT count(*), count(DISTINCT owner) FROM shard_leases WHERE owner <> '' AND expires_at > now()" 2>/dev/null) || return 1
  [ "$r" = "$SHARDS|$2" ]
}
wait_balanced() { # db n
  local deadline=$((SECONDS + 60))
  until leases_balanced "$1" "$2"; do
    [ $SECONDS -lt $deadline ] || die "the shards of $1 were not spread over $2 logic processes within 60 s: $(pg -d "$1" -Atc "SELECT owner, count(*) FROM shard_leases WHERE expires_at > now() GROUP BY owner" | paste -sd' ')"
    sleep 0.2
  done
}
# A rebalance hands shards off one tick at a time: balanced = stable for
# two lease periods.
wait_stable() { # db n
  wait_balanced "$1" "$2"
  local a b deadline=$((SECONDS + 60))
  while :; do
    a=$(pg -d "$1" -Atc "SELECT string_agg(shard || ':' || owner || ':' || epoch, ',' ORDER BY shard) FROM shard_leases")
    sleep $((2 * RENEW_S))
    b=$(pg -d "$1" -Atc "SELECT string_agg(shard || ':' || owner || ':' || epoch, ',' ORDER BY shard) FROM shard_leases")
    [ "$a" != "$b" ] || break
    [ $SECONDS -lt $deadline ] || die "the leases of $1 did not settle within 60 s"
  done
  wait_balanced "$1" "$2"
}

GATE_PID= GATE_WS= SECRET=
gate_start() { # name
  local w g o
  free_port w
  free_port g
  free_port o
  SECRET=sc-$RANDOM-$RANDOM-$RANDOM
  local IFS=,
  start "$1" "$DIR/$1.log" bin/gate -addr "127.0.0.1:$w" -grpc-addr "127.0.0.1:$g" -ops-addr "127.0.0.1:$o" \
    -logic-addrs "${LOGIC_ADDRS[*]}" -shards "$SHARDS" -token-secret "$SECRET" -line-mode open -log-level warn
  unset IFS
  GATE_PID=$PID GATE_WS=ws://127.0.0.1:$w/ws
  wait_healthy "$1" gate "127.0.0.1:$g"
}

# --- load ----------------------------------------------------------------
# load_run MEDIUM STORE N: one row of the comparison.
load_run() {
  local medium=$1 store=$2 n=$3 run=$2-$3-$1 db="" i c metrics=() t0 t1 w l0 l1 p0 p1 ok all p99 p50 batch rc=0
  echo "store-compare: $run: $n logic on $store ($medium), $SHARDS shards"
  LOGIC_PIDS=() LOGIC_ADDRS=() LOGIC_OPS=() LOGIC_NODES=()
  if [ "$store" = postgres ]; then
    db=sc_${store}_${n}_$medium
    pg_newdb "$db"
  fi
  for ((i = 0; i < n; i++)); do logic_start "$run" "logic-$run-$i" "$store" "$i" "$n" "$db"; done
  for ((i = 0; i < n; i++)); do wait_healthy "logic-$run-$i" logic "${LOGIC_ADDRS[i]}"; done
  if [ "$store" = postgres ]; then wait_stable "$db" "$n"; fi
  gate_start "gate-$run"
  for c in "${LOGIC_OPS[@]}"; do metrics+=("logic=$c"); done
  local IFS=,
  local target=(-gate-urls "$GATE_WS" -metrics "${metrics[*]}" -token-secret "$SECRET")
  unset IFS
  timeout 300 bin/loadtest capacity "${target[@]}" -conns 2000 -value-out "$DIR/$run.capacity" "$SCENARIO" >"$DIR/$run.capacity.log" 2>&1 ||
    { tail -n 20 "$DIR/$run.capacity.log" >&2; die "$run: loadtest capacity failed (log: $DIR/$run.capacity.log)"; }
  c=$(<"$DIR/$run.capacity")
  scrape logic_requests_total "${LOGIC_OPS[@]}" >"$DIR/$run.req.before"
  scrape logic_commit_duration_seconds_bucket "${LOGIC_OPS[@]}" >"$DIR/$run.commit.before"
  scrape logic_commit_batch_size_sum "${LOGIC_OPS[@]}" >"$DIR/$run.bsum.before"
  scrape logic_commit_batch_size_count "${LOGIC_OPS[@]}" >"$DIR/$run.bcount.before"
  l0=$(ticks "${LOGIC_PIDS[@]}")
  p0=0
  [ "$store" != postgres ] || p0=$(pg_ticks)
  t0=$(date +%s%N)
  timeout 120 bin/loadtest run "${target[@]}" -set "capacity=$c" -out "$DIR/$run.ndjson" "$SCENARIO" >"$DIR/$run.run.log" 2>&1 || rc=$?
  l1=$(ticks "${LOGIC_PIDS[@]}")
  [ "$store" != postgres ] || p1=$(pg_ticks)
  t1=$(date +%s%N)
  [ "$rc" = 0 ] || [ "$rc" = 99 ] || { tail -n 20 "$DIR/$run.run.log" >&2; die "$run: loadtest run exited $rc"; }
  scrape logic_requests_total "${LOGIC_OPS[@]}" >"$DIR/$run.req.after"
  scrape logic_commit_duration_seconds_bucket "${LOGIC_OPS[@]}" >"$DIR/$run.commit.after"
  scrape logic_commit_batch_size_sum "${LOGIC_OPS[@]}" >"$DIR/$run.bsum.after"
  scrape logic_commit_batch_size_count "${LOGIC_OPS[@]}" >"$DIR/$run.bcount.after"
  ok=$(delta 'action="buy_item",outcome="ok"' "$DIR/$run.req.before" "$DIR/$run.req.after")
  all=$(delta . "$DIR/$run.req.before" "$DIR/$run.req.after")
  p50=$(quantile 0.5 "$DIR/$run.commit.before" "$DIR/$run.commit.after")
  p99=$(quantile 0.99 "$DIR/$run.commit.before" "$DIR/$run.commit.after")
  batch=$(awk -v s0="$(sum_of "$DIR/$run.bsum.before")" -v s1="$(sum_of "$DIR/$run.bsum.after")" \
    -v c0="$(sum_of "$DIR/$run.bcount.before")" -v c1="$(sum_of "$DIR/$run.bcount.after")" \
    'BEGIN { if (c1 > c0) printf "%.1f", (s1 - s0) / (c1 - c0); else print "-" }')
  w=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
  local served lus pus pcores verdict
  # served/s over the 20 s phase (the run's dial time before it is idle)
  served=$(awk -v n="$ok" 'BEGIN { printf "%.0f", n / 20 }')
  lus=$(awk -v t=$((l1 - l0)) -v hz="$HZ" -v n="$ok" 'BEGIN { if (n > 0) printf "%.0f", t * 1e6 / hz / n; else print "-" }')
  pus=- pcores=-
  if [ "$store" = postgres ]; then
    pus=$(awk -v t=$((p1 - p0)) -v hz="$HZ" -v n="$ok" 'BEGIN { if (n > 0) printf "%.0f", t * 1e6 / hz / n; else print "-" }')
    pcores=$(awk -v t=$((p1 - p0)) -v hz="$HZ" -v w="$w" 'BEGIN { printf "%.2f", t / hz / w }')
  fi
  verdict=clean
  [ "$rc" = 0 ] || verdict="threshold failed: $(grep '✗' "$DIR/$run.run.log" | sed 's/^ *✗ *//' | paste -sd ';' -)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$medium" "$store" "$n" "$c" "$served" "$p50" "$p99" "$batch" \
    "$lus" "$(awk -v t=$((l1 - l0)) -v hz="$HZ" -v w="$w" 'BEGIN { printf "%.2f", t / hz / w }')" "$pus" "$pcores" "$ok" "$((all - ok))" "$verdict" >>"$RESULTS"
  echo "store-compare: $run: capacity $c purchases/s; at 0.7 x C: $served/s served, commit p50 $p50 ms p99 $p99 ms, $batch mutations/commit, logic $lus µs/purchase, postgres $pus µs/purchase ($verdict)"
  stop_pids "$GATE_PID" "${LOGIC_PIDS[@]}"
  if [ -n "$db" ]; then pg -c "DROP DATABASE $db" >/dev/null || true; fi
  rm -rf "$DATA/$run"-*
}

# --- failover --------------------------------------------------------------
failover_run() { # medium
  local medium=$1 db=sc_failover_$1 k i victim vpid vnode shards t_kill now_ms deadline rows left restarts=0
  echo "store-compare: failover on PostgreSQL ($medium): 3 logic, $SHARDS shards, -lease-ttl ${TTL_S}s -lease-renew ${RENEW_S}s, $KILLS SIGKILL(s), no load"
  pg_newdb "$db"
  LOGIC_PIDS=() LOGIC_ADDRS=() LOGIC_OPS=() LOGIC_NODES=()
  for ((i = 0; i < 3; i++)); do logic_start failover "fo-$i-0" postgres "$i" 3 "$db"; done
  for ((i = 0; i < 3; i++)); do wait_healthy "fo-$i-0" logic "${LOGIC_ADDRS[i]}"; done
  for ((k = 1; k <= KILLS; k++)); do
    wait_stable "$db" 3
    victim=$(((k - 1) % 3))
    vpid=${LOGIC_PIDS[victim]} vnode=${LOGIC_NODES[victim]}
    shards=$(pg -d "$db" -Atc "SELECT string_agg(shard::text, ',' ORDER BY shard) FROM shard_leases WHERE owner = '$vnode' AND expires_at > now()")
    [ -n "$shards" ] || die "failover round $k: $vnode holds no shard"
    # The old leases' expiry, to split the time into the TTL's part and the
    # survivors' detection.
    pg -d "$db" -AtF ' ' -c "SELECT shard, (extract(epoch FROM expires_at) * 1000)::bigint FROM shard_leases WHERE shard IN ($shards)" >"$DIR/failover-$k.old"
    t_kill=$(($(date +%s%N) / 1000000))
    kill -KILL "$vpid"
    wait "$vpid" 2>/dev/null || true
    : >"$DIR/failover-$k.new"
    deadline=$((SECONDS + 30))
    while :; do
      # The first sighting of each shard under a live lease of another.
      pg -d "$db" -AtF ' ' -c "SELECT shard, owner, epoch, (extract(epoch FROM expires_at) * 1000)::bigint, (extract(epoch FROM clock_timestamp()) * 1000)::bigint
        FROM shard_leases WHERE shard IN ($shards) AND owner NOT IN ('', '$vnode') AND expires_at > now()" |
        awk -v seen=",$(cut -d' ' -f1 "$DIR/failover-$k.new" | paste -sd,)," 'index(seen, "," $1 ",") == 0 { print }' >>"$DIR/failover-$k.new"
      left=$(($(tr ',' '\n' <<<"$shards" | wc -l) - $(wc -l <"$DIR/failover-$k.new")))
      [ "$left" -gt 0 ] || break
      [ $SECONDS -lt $deadline ] || die "failover round $k: $left shard(s) of $vnode without an owner 30 s after the kill"
      sleep 0.1
    done
    # acquisition = expires_at - TTL of the first sighting (exact unless a
    # renewal came first), never after the sighting itself
    awk -v kill="$t_kill" -v ttl=$((TTL_S * 1000)) -v k="$k" -v node="$vnode" 'NR == FNR { old[$1] = $2; next }
      { acq = $4 - ttl; if (acq > $5) acq = $5
        printf "%d\t%s\t%d\t%s\t%.0f\t%.0f\t%.0f\n", k, node, $1, $2, acq - kill, old[$1] - kill, acq - old[$1] }' \
      "$DIR/failover-$k.old" "$DIR/failover-$k.new" >>"$FAILOVER"
    echo "store-compare: failover round $k: $vnode SIGKILLed, its $(tr ',' '\n' <<<"$shards" | wc -l) shards ($shards) owned again; ownerless ms: $(awk -v k="$k" '$1 == k { printf "%s ", $5 }' "$FAILOVER")"
    # Back to three: the killed process restarts as a new node.
    restarts=$((restarts + 1))
    logic_start failover "fo-$victim-$restarts" postgres "$victim" 3 "$db"
    LOGIC_PIDS[victim]=${LOGIC_PIDS[-1]} LOGIC_ADDRS[victim]=${LOGIC_ADDRS[-1]} LOGIC_OPS[victim]=${LOGIC_OPS[-1]} LOGIC_NODES[victim]=${LOGIC_NODES[-1]}
    unset 'LOGIC_PIDS[-1]' 'LOGIC_ADDRS[-1]' 'LOGIC_OPS[-1]' 'LOGIC_NODES[-1]'
    wait_healthy "fo-$victim-$restarts" logic "${LOGIC_ADDRS[victim]}"
  done
  stop_pids "${LOGIC_PIDS[@]}"
  pg -c "DROP DATABASE $db" >/dev/null || true
}

# --- launch day ------------------------------------------------------------
launch_run() { # medium store
  local medium=$1 store=$2 run=launch-$2-$1 db=sc_launch_$1 env=() p0 p1 t0 t1 rc=0
  echo "store-compare: $run: scripts/launch.sh ${LAUNCH_ARGS[*]} on $store ($medium)"
  if [ "$store" = postgres ]; then
    pg_newdb "$db"
    env=(LAUNCH_STORE=postgres "LAUNCH_POSTGRES_URL=$(pg_url "$db")")
  fi
  # launch.sh's fixed port scheme from a base whose ports are free.
  # (not "base": free_port has a local of that name)
  local bport
  free_port bport
  bport=$((bport - bport % 10))
  [ $((bport + 1200)) -lt 65535 ] || bport=$((bport - 2000))
  p0=0
  [ "$store" != postgres ] || p0=$(pg_ticks)
  t0=$(date +%s%N)
  env "${env[@]}" LAUNCH_BUILD=0 LAUNCH_DATA="$medium" LAUNCH_DIR="$DIR/$run" BASE_PORT=$bport \
    timeout 900 ./scripts/launch.sh "${LAUNCH_ARGS[@]}" >"$DIR/$run.log" 2>&1 9>&- || rc=$?
  t1=$(date +%s%N)
  [ "$store" != postgres ] || p1=$(pg_ticks)
  [ "$rc" = 0 ] || [ "$rc" = 99 ] || { tail -n 30 "$DIR/$run.log" >&2; die "$run: launch.sh exited $rc"; }
  local lcpu pcpu=-
  # launch.sh's `ps -o comm=,times=`: each process's CPU seconds at the end
  lcpu=$(awk '$1 == "logic" { print $2 }' "$DIR/$run/logs/cpu-seconds.txt" 2>/dev/null || echo -)
  [ "$store" != postgres ] || pcpu=$(awk -v t=$((p1 - p0)) -v hz="$HZ" 'BEGIN { printf "%.1f", t / hz }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$medium" "$store" "$rc" "$lcpu" "$pcpu" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) / 1e9 }')" >>"$LAUNCHES"
  echo "store-compare: $run: exit $rc (0 thresholds held, 99 one failed), logic CPU ${lcpu} s, postgres CPU ${pcpu} s; the summary:"
  sed -n '/^thresholds\|^ *[✓✗]/p' "$DIR/$run.log" | tail -n 12
  if [ "$store" = postgres ]; then pg -c "DROP DATABASE $db" >/dev/null || true; fi
}

# --- the session -------------------------------------------------------------
echo "store-compare: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p' | head -n1)), $(uname -sr), $(${GO:-go} version | cut -d' ' -f3); disk $(df -P /var/tmp | awk 'NR == 2 { print $1 }'); the load tool, the cluster and PostgreSQL share the cores"
echo "store-compare: media: $MEDIA; phases: $PHASES; launch on: $LAUNCH_MEDIA; $SHARDS shards"
battle_start
all_media=$MEDIA
for m in $LAUNCH_MEDIA; do has "$all_media" "$m" || all_media="$all_media $m"; done
for medium in $all_media; do
  if [ "$medium" = tmpfs ]; then
    DATA_TMPFS=$(mktemp -d /dev/shm/levee-sc-bolt.XXXXXX) DATA=$DATA_TMPFS
  else
    DATA=$DIR/bolt
  fi
  mkdir -p "$DATA"
  pg_start "$medium"
  if has "$PHASES" load && has "$MEDIA" "$medium"; then
    for c in $CONFIGS; do load_run "$medium" "${c%-*}" "${c##*-}"; done
  fi
  if has "$PHASES" failover && has "$MEDIA" "$medium"; then failover_run "$medium"; fi
  if has "$PHASES" launch && has "$LAUNCH_MEDIA" "$medium"; then
    launch_run "$medium" bolt
    launch_run "$medium" postgres
  fi
  pg_stop
  rm -rf "${DATA_TMPFS:-}"
  DATA_TMPFS=
done

echo
if [ -s "$RESULTS" ]; then
  echo "Purchases only (scripts/store-compare/purchase.yaml): C = loadtest capacity (p99 <= 250 ms, 95 % served); the rest over 20 s at 0.7 x C; CPU per purchase answered ok; shared cores"
  {
    printf 'medium\tstore\tlogic\tC purchases/s\tserved/s at 0.7 C\tcommit p50 ms\tcommit p99 ms\tmutations/commit\tlogic µs/purchase\tlogic cores\tpostgres µs/purchase\tpostgres cores\tok\tother replies\tload\n'
    cat "$RESULTS"
  } | column -t -s $'\t'
fi
if [ -s "$FAILOVER" ]; then
  echo
  echo "Failover: per shard of the SIGKILLed process, ms from the kill to a live lease of another (the old lease's expiry after the kill, and the new acquisition after that expiry)"
  {
    printf 'round\tkilled\tshard\tnew owner\townerless ms\told lease expired ms after the kill\tacquired ms after the expiry\n'
    cat "$FAILOVER"
  } | column -t -s $'\t'
  sort -t $'\t' -k5,5n "$FAILOVER" | awk -F'\t' '{ v[++n] = $5 } END { printf "ownerless over %d shards: p50 %d ms, max %d ms, min %d ms\n", n, v[int((n + 1) / 2)], v[n], v[1] }'
fi
if [ -s "$LAUNCHES" ]; then
  echo
  echo "Launch day (${LAUNCH_ARGS[*]}): see each run's summary above and its report in $DIR/launch-*/"
  {
    printf 'medium\tstore\texit\tlogic CPU s\tpostgres CPU s\twall s\n'
    cat "$LAUNCHES"
  } | column -t -s $'\t'
fi
