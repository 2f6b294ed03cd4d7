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
# Usage: scripts/drills.sh [DRILL...]   (default: every drill, in order)
# Environment: DRILLS_PORT (29080: the gate's player port; +2 its ops port,
#   +3 logic's, +4 and +5 the battles'), DRILLS_OUT (the run files and HTML
#   reports; default a new directory under /tmp), DRILLS_CAPACITY (skip the
#   measurement and use this many requests/s), DRILLS_WRITE (1: write
#   RELIABILITY.md; default 1 when every drill ran), GO.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${DRILLS_PORT:-29080}
OUT=${DRILLS_OUT:-$(mktemp -d -t levee-drills.XXXXXX)}
mkdir -p "$OUT"
SCEN=loadtest/scenarios/drills
ALL=(battle-killed battle-frozen logic-killed gate-restarted cpu-squeeze cpu-squeeze-naive logic-outage logic-outage-naive disk-full rolling-restart)
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
# shellcheck source=scripts/lib/compose.sh
. scripts/lib/compose.sh
CLUSTER_NAME=drills
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
compose() {
  local files=(-f docker-compose.yml -f "$SCEN/compose.yml")
  [ -z "${OVERRIDE:-}" ] || files+=(-f "$OVERRIDE")
  compose_tool --env-file "$ENVF" -p "$PROJECT" "${files[@]}" "$@"
}
down() {
  [ -n "$PROJECT" ] || return 0
  compose down -v --remove-orphans >/dev/null 2>&1 || true
  PROJECT=
}
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

ports_free -h "set DRILLS_PORT" "$PORT" $((PORT + 2)) $((PORT + 3)) $((PORT + 4)) $((PORT + 5))
echo "drills: building the images and the load tool"
GO=${GO:-go} ./scripts/compose.sh images
mkdir -p bin
CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/loadtest

health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$1" 2>/dev/null || echo missing; }

# up NAME: a fresh project for drill NAME, every service healthy.
up() {
  local name=$1
  PROJECT=levee-drill-$name-$$
  ENVF=$OUT/$name.env
  OVERRIDE=
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
  ) >"$ENVF"
  compose_certs "$OUT/certs" "$ENVF" >/dev/null
  compose up -d >/dev/null 2>"$OUT/$name.up.log" || die "$name: compose up failed (see $OUT/$name.up.log)"
  local deadline=$((SECONDS + 90)) c
  for s in battle-1 battle-2 logic gate; do
    c=$(compose ps -q "$s")
    until [ "$(health "$c")" = healthy ]; do
      [ $SECONDS -lt $deadline ] || die "$name: $s did not become healthy in 90 s"
      sleep 0.5
    done
  done
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
    -metrics "gate=https://localhost:$((PORT + 2))/metrics,logic=http://127.0.0.1:$((PORT + 3))/metrics,battle=http://127.0.0.1:$((PORT + 4))/metrics,battle=http://127.0.0.1:$((PORT + 5))/metrics" \
    -faults "docker:$PROJECT" -label "$name" -progress off \
    -out "$OUT/$name.ndjson" -html "$OUT/$name.html"
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
  rc=0
  load "$d" --set "capacity=$CAP" >"$OUT/$d.txt" 2>&1 || rc=$?
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
  echo "drills: wrote RELIABILITY.md"
fi
[ ${#failed[@]} -eq 0 ] || die "drills failed: ${failed[*]}"
echo "drills: PASS: ${DRILLS[*]}"
