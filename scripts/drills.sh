#!/usr/bin/env bash
# The failure drills (`make drills`, issue 13): each scenario of
# loadtest/scenarios/drills/ against a compose cluster of its own.
#
# First the cluster's capacity is measured (drills/capacity.yaml: the
# drills' request mix offered at several times what the cluster serves; the
# capacity of the mix is the median of its mix_served series over seconds
# 10-25, read by `loadtest figure`). Then every drill runs on a fresh
# project (its own network, volume and ports, with the drill's compose
# override loadtest/scenarios/drills/NAME.compose.yml when there is one)
# with --set capacity=C: the drill's `offered: X` field makes its peak
# load X x C (the load tool sizes the players), the load tool injecting
# the drill's faults into the containers (-faults docker:PROJECT).
# Each project is brought down and its volumes removed after its drill,
# also when it fails or is interrupted. At the end RELIABILITY.md gets the
# table of drill, thresholds, figures and pass/fail, with the command and
# the machine (loadtest reliability).
#
# The drills on logic on PostgreSQL (logic-pg-*, postgres-*: issue 23) run
# the compose profile postgres instead of the default cluster: battle-1,
# battle-2, postgres, logic-pg-1..3 (256 shards held by leases) and
# gate-pg, started in that order with --no-deps, each group healthy before
# the next; gate-pg on the drills' ports, each logic's metrics on PORT+6..8.
# logic-pg-scale-out leaves logic-pg-3 created but not started (compose up
# --no-start), for its start fault. Their load is the same multiple of the
# same capacity, the one measured on the default cluster (battle bounds
# both: the same two battle containers).
#
# Usage: scripts/drills.sh [DRILL...]   (default: every drill, in order)
# Environment: DRILLS_PORT (29080: the gate's player port; +2 its ops port,
#   +3 logic's, +4 and +5 the battles', +6..+8 logic-pg-1..3's), DRILLS_OUT (the run files and HTML
#   reports; default a new directory under /tmp), DRILLS_CAPACITY (skip the
#   measurement and use this many requests/s), DRILLS_WRITE (1: write
#   RELIABILITY.md; default 1 when every drill ran), GO.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${DRILLS_PORT:-29080}
OUT=${DRILLS_OUT:-$(mktemp -d -t levee-drills.XXXXXX)}
mkdir -p "$OUT"
rm -f "$OUT/logic-pg-killed.ownerless" # RELIABILITY.md's lease-watch line: this run's only
SCEN=loadtest/scenarios/drills
ALL=(battle-killed battle-frozen logic-killed gate-restarted cpu-squeeze cpu-squeeze-naive logic-outage logic-outage-naive disk-full rolling-restart
  logic-pg-killed logic-pg-frozen postgres-restarted logic-pg-scale-out)
if [ $# -gt 0 ]; then
  DRILLS=("$@")
  WRITE=${DRILLS_WRITE:-0}
else
  DRILLS=("${ALL[@]}")
  WRITE=${DRILLS_WRITE:-1}
fi
for d in "${DRILLS[@]}"; do
  [ -f "$SCEN/$d.yaml" ] || {
    echo "drills: no drill $d (the drills: ${ALL[*]})" >&2
    exit 2
  }
done

PROJECT=
ENVF=
PG=
# shellcheck source=scripts/lib/compose.sh
. scripts/lib/compose.sh
CLUSTER_NAME=drills
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
compose() {
  local files=(-f docker-compose.yml -f "$SCEN/compose.yml")
  [ -z "${OVERRIDE:-}" ] || files+=(-f "$OVERRIDE")
  [ -z "$PG" ] || files+=(--profile postgres)
  compose_tool --env-file "$ENVF" -p "$PROJECT" "${files[@]}" "$@"
}
down() {
  [ -n "$PROJECT" ] || return 0
  PG=1 compose down -v --remove-orphans >/dev/null 2>&1 || true # the profile's containers too
  PROJECT=
}
# pg_drill NAME: whether drill NAME runs on logic on PostgreSQL.
pg_drill() { case $1 in logic-pg-* | postgres-*) return 0 ;; esac; return 1; }
# absent_of NAME: the service drill NAME's fault starts (created, not started).
absent_of() { case $1 in logic-pg-scale-out) echo logic-pg-3 ;; esac; }
die() {
  echo "drills: FAIL: $*" >&2
  exit 1
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$PROJECT" ]; then
    compose logs --no-color --tail 40 >"$OUT/$PROJECT.log" 2>&1 || true
    down
  fi
  echo "drills: run files and reports in $OUT"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ports_free -h "set DRILLS_PORT" "$PORT" $((PORT + 2)) $((PORT + 3)) $((PORT + 4)) $((PORT + 5)) $((PORT + 6)) $((PORT + 7)) $((PORT + 8))
echo "drills: building the images and the load tool"
GO=${GO:-go} ./scripts/compose.sh images
for d in "${DRILLS[@]}"; do
  if pg_drill "$d" && [ -z "${LEVEE_POSTGRES_IMAGE:-}" ]; then
    docker image inspect levee/postgres:dev >/dev/null 2>&1 ||
      die "no image levee/postgres:dev for the PostgreSQL drills (scripts/postgres-image.sh builds it; or set LEVEE_POSTGRES_IMAGE)"
    break
  fi
done
mkdir -p bin
CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/loadtest

health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$1" 2>/dev/null || echo missing; }

# healthy NAME DEADLINE SERVICE...: wait until each service's container is
# healthy, until SECONDS reaches DEADLINE.
healthy() {
  local name=$1 deadline=$2 s c
  shift 2
  for s in "$@"; do
    c=$(compose ps -q "$s")
    until [ "$(health "$c")" = healthy ]; do
      [ $SECONDS -lt "$deadline" ] || die "$name: $s did not become healthy in time"
      sleep 0.5
    done
  done
}

# up NAME: a fresh project for drill NAME, every service healthy.
up() {
  local name=$1
  PROJECT=levee-drill-$name-$$
  ENVF=$OUT/$name.env
  OVERRIDE=
  PG=
  ! pg_drill "$name" || PG=1
  [ ! -f "$SCEN/$name.compose.yml" ] || OVERRIDE=$SCEN/$name.compose.yml
  (
    umask 077
    echo "LEVEE_TOKEN_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    echo "LEVEE_ADMIN_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    echo "LEVEE_GATE_PORT=$PORT"
    echo "LEVEE_OPS_PORT=$((PORT + 2))"
    echo "LEVEE_LOGIC_OPS_PORT=$((PORT + 3))"
    echo "LEVEE_BATTLE1_OPS_PORT=$((PORT + 4))"
    echo "LEVEE_BATTLE2_OPS_PORT=$((PORT + 5))"
    echo "LEVEE_POSTGRES_PASSWORD=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    echo "LEVEE_PG_GATE_PORT=$PORT"
    echo "LEVEE_PG_OPS_PORT=$((PORT + 2))"
    echo "LEVEE_LOGIC_PG1_OPS_PORT=$((PORT + 6))"
    echo "LEVEE_LOGIC_PG2_OPS_PORT=$((PORT + 7))"
    echo "LEVEE_LOGIC_PG3_OPS_PORT=$((PORT + 8))"
  ) >"$ENVF"
  compose_certs "$OUT/certs" "$ENVF" >/dev/null
  local deadline=$((SECONDS + 120))
  if [ -z "$PG" ]; then
    compose up -d >/dev/null 2>"$OUT/$name.up.log" || die "$name: compose up failed (see $OUT/$name.up.log)"
    healthy "$name" $deadline battle-1 battle-2 logic gate
    return
  fi
  # The profile postgres, group by group: --no-deps, so that gate-pg's
  # dependence on all three logic does not start an absent one.
  local absent logics=() s
  absent=$(absent_of "$name")
  for s in logic-pg-1 logic-pg-2 logic-pg-3; do
    [ "$s" = "$absent" ] || logics+=("$s")
  done
  for group in "battle-1 battle-2 postgres" "${logics[*]}" gate-pg; do
    # shellcheck disable=SC2086 # a group is a list of service names
    compose up -d --no-deps $group >/dev/null 2>>"$OUT/$name.up.log" || die "$name: compose up $group failed (see $OUT/$name.up.log)"
    # shellcheck disable=SC2086
    healthy "$name" $deadline $group
  done
  if [ -n "$absent" ]; then
    compose up --no-start --no-deps "$absent" >/dev/null 2>>"$OUT/$name.up.log" ||
      die "$name: compose up --no-start $absent failed (see $OUT/$name.up.log)"
  fi
}

# logic_metrics: the load tool's -metrics entries of the project's logic.
logic_metrics() {
  if [ -z "$PG" ]; then
    echo "logic=http://127.0.0.1:$((PORT + 3))/metrics"
  else
    echo "logic=http://127.0.0.1:$((PORT + 6))/metrics,logic=http://127.0.0.1:$((PORT + 7))/metrics,logic=http://127.0.0.1:$((PORT + 8))/metrics"
  fi
}

# load NAME [ARGS...]: run drill scenario NAME through the published ports.
load() {
  local name=$1
  shift
  local secret admin
  secret=$(grep '^LEVEE_TOKEN_SECRET=' "$ENVF" | cut -d= -f2)
  admin=$(grep '^LEVEE_ADMIN_TOKEN=' "$ENVF" | cut -d= -f2)
  GATE_ADMIN_TOKEN=$admin bin/loadtest run "$SCEN/$name.yaml" "$@" \
    -gate-urls "wss://localhost:$PORT/ws" -ca-file "$OUT/certs/ca.crt" -token-secret "$secret" \
    -admin-urls "https://localhost:$((PORT + 2))/admin/line" \
    -metrics "gate=https://localhost:$((PORT + 2))/metrics,$(logic_metrics),battle=http://127.0.0.1:$((PORT + 4))/metrics,battle=http://127.0.0.1:$((PORT + 5))/metrics" \
    -faults "docker:$PROJECT" -label "$name" -progress off \
    -out "$OUT/$name.ndjson" -html "$OUT/$name.html"
}

# The lease watch of logic-pg-killed: how long each shard of the killed
# process is without an owner, under the drill's load. While the load runs,
# shard_leases is read every 200 ms (at most 200 s: the loop stops by
# itself) through psql in the postgres container, in the database's clock
# (the host's: the containers share its kernel). After it, each shard
# logic-pg-2 held under a live lease when it was killed (the kill's time:
# the run's start plus its fault event's) gets its time without an owner:
# its new lease's acquisition, expires_at - TTL at its first sighting under
# another owner (exact unless a renewal came first; never after the
# sighting), less the kill. $OUT/NAME.ownerless.tsv holds them, and a line
# the p50, max and min.
LEASE_TTL_MS=5000 # logic's -lease-ttl default: the compose profile sets none
lease_watch_start() { # NAME
  rm -f "$OUT/$1.leases.stop"
  (
    for ((i = 0; i < 1000; i++)); do
      [ ! -e "$OUT/$1.leases.stop" ] || break
      echo "SELECT shard, coalesce(nullif(owner, ''), '-'), epoch, coalesce(nullif(addr, ''), '-'), (extract(epoch FROM expires_at) * 1000)::bigint, (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM shard_leases;"
      sleep 0.2
    done | compose exec -T postgres psql -U levee -d levee -q -AtF ' ' >"$OUT/$1.leases" 2>"$OUT/$1.leases.err"
  ) &
  WATCH_PID=$!
}
lease_watch_stop() { # NAME
  touch "$OUT/$1.leases.stop"
  wait "$WATCH_PID" || echo "drills: $1: the lease watch ended with an error (see $OUT/$1.leases.err)"
  WATCH_PID=
}
ownerless() { # NAME VICTIM: the figures of the killed VICTIM's shards
  local name=$1 victim=$2 started t kill
  started=$(sed -n '1s/.*"started":"\([^"]*\)".*/\1/p' "$OUT/$name.ndjson")
  t=$(grep '"kind":"fault"' "$OUT/$name.ndjson" | grep -F "$victim killed" | sed -n 's/.*"t":\([0-9.]*\).*/\1/p' | head -n 1)
  if [ -z "$started" ] || [ -z "$t" ]; then
    echo "drills: $name: no kill of $victim in $OUT/$name.ndjson: no time without an owner"
    return 0
  fi
  kill=$(awk -v s="$(date -d "$started" +%s%N)" -v t="$t" 'BEGIN { printf "%.0f", s / 1e6 + t * 1000 }')
  awk -v kill="$kill" -v ttl="$LEASE_TTL_MS" -v addr="$victim:9000" '
    # fields: shard owner epoch addr expires_ms seen_ms
    $6 < kill { own[$1] = $2; live[$1] = ($4 == addr && $5 > kill); next }
    !started { started = 1; for (s in own) if (live[s]) { gone[s] = own[s]; n++ } }
    ($1 in gone) && !($1 in back) && $2 != "-" && $2 != gone[$1] && $5 > $6 {
      acq = $5 - ttl; if (acq > $6) acq = $6
      back[$1] = acq - kill; printf "%d\t%s\t%s\t%.0f\n", $1, gone[$1], $2, back[$1]
    }
    END { for (s in gone) if (!(s in back)) printf "%d\t%s\t-\t-\n", s, gone[s] }' "$OUT/$name.leases" | sort -n >"$OUT/$name.ownerless.tsv"
  # the times sorted (mawk has no asort); "-" (never owned again) counted apart
  sort -t "$(printf '\t')" -k4,4n "$OUT/$name.ownerless.tsv" | awk -F '\t' -v name="$name" -v victim="$victim" -v f="$OUT/$name.ownerless.tsv" '
    $4 == "-" { left++; next }
    { v[++n] = $4 }
    END {
      if (n + left == 0) { printf "drills: %s: %s held no shard under a live lease at its kill (see %s)\n", name, victim, f; exit }
      if (n == 0) { printf "drills: %s: none of the %d shards of %s owned again while watched\n", name, left, victim; exit }
      printf "drills: %s: %d shards of %s without an owner after its SIGKILL: p50 %.2f s, max %.2f s, min %.2f s", name, n + left, victim, v[int((n + 1) / 2)] / 1000, v[n] / 1000, v[1] / 1000
      if (left) printf "; %d never owned again while watched", left
      printf "\n"
    }' | tee "$OUT/$name.ownerless"
}

# ownerless_section FILE: RELIABILITY.md's section of logic-pg-killed's
# lease watch (ownerless's line in FILE), if it ran.
ownerless_section() {
  [ -s "$1" ] || return 0
  printf '\n## A killed logic'"'"'s shards without an owner (logic-pg-killed)\n\n'
  printf 'scripts/drills.sh read shard_leases every 200 ms while the drill ran. For each shard\n'
  printf 'logic-pg-2 held under a live lease when it was SIGKILLed: the kill to its new lease'"'"'s\n'
  printf 'acquisition by another process (expires_at - TTL at its first sighting), in the\n'
  printf 'database'"'"'s clock. The bound is the lease TTL (5 s) plus one renew period (1 s).\n\n'
  sed 's/^drills: logic-pg-killed: /- /' "$1"
}

# The capacity of the drills' mix: the requests/s of the mix served in full
# (its scarcest part, battle, bounds it: the mix_served series) at
# overload, the median over seconds 10..24 of the capacity run.
if [ -n "${DRILLS_CAPACITY:-}" ]; then
  CAP=$DRILLS_CAPACITY
  echo "drills: capacity $CAP requests/s (DRILLS_CAPACITY)"
else
  echo "drills: measuring the capacity (drills/capacity.yaml, about 40 s)"
  up capacity
  load capacity >"$OUT/capacity.txt" 2>&1 || true
  down
  CAP=$(bin/loadtest figure "$OUT/capacity.ndjson" "median(mix_served)[10s:25s]") ||
    die "could not read the capacity from $OUT/capacity.ndjson (see $OUT/capacity.txt)"
  echo "drills: capacity $CAP requests/s of the mix (served at overload)"
fi
echo "$CAP" >"$OUT/capacity"

failed=()
runs=()
for d in "${DRILLS[@]}"; do
  echo "drills: $d: up, then its load (an offered: X field: X x $CAP requests/s)"
  up "$d"
  [ "$d" != logic-pg-killed ] || lease_watch_start "$d"
  rc=0
  load "$d" --set "capacity=$CAP" >"$OUT/$d.txt" 2>&1 || rc=$?
  if [ "$d" = logic-pg-killed ]; then
    lease_watch_stop "$d"
    ownerless "$d" logic-pg-2
  fi
  down
  runs+=("$OUT/$d.ndjson")
  if [ "$rc" = 0 ]; then
    echo "drills: $d: PASS"
  else
    echo "drills: $d: FAIL (exit $rc)"
    tail -n 40 "$OUT/$d.txt"
    failed+=("$d")
  fi
done

if [ "$WRITE" = 1 ]; then
  bin/loadtest reliability -out RELIABILITY.md -capacity "$CAP" -command "make drills" "${runs[@]}"
  ownerless_section "$OUT/logic-pg-killed.ownerless" >>RELIABILITY.md
  echo "drills: wrote RELIABILITY.md"
fi
[ ${#failed[@]} -eq 0 ] || die "drills failed: ${failed[*]}"
echo "drills: PASS: ${DRILLS[*]}"
