#!/usr/bin/env bash
# The compose test (`make compose-test`, run by CI after `make test`):
# builds the images, brings the cluster of docker-compose.yml up under a
# project name of its own (its own network, volume and ports), and runs
# one load test through the gate's published port, over wss with the
# tiers on mutual TLS (certificates from levee-certs in the run's temp
# directory, removed at the end): scripts/compose-test.yaml,
# whose timeline SIGKILLs battle-1's process in the middle (injected by
# `loadtest run -faults docker:PROJECT`) and whose thresholds say what must
# hold (every request exactly one reply, serving resumed within 5 s of the
# kill, battle-1 back and goodput recovered). It brings the project down
# and removes what it created, also when it fails. Then
# scripts/compose-test-postgres.sh tests the profile postgres on a project
# of its own: PostgreSQL healthy and taking the generated password, and a
# load through three logic on it with one of them SIGKILLed.
#
# Environment: COMPOSE_TEST_PORT (28080: the gate's player port; +2 its
# ops port), COMPOSE_TEST_POSTGRES (1; 0: PostgreSQL alone, no
# load through logic on it), COMPOSE_TEST_PG_PORT (28090), GO.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${COMPOSE_TEST_PORT:-28080}
PROJECT=levee-test-$$
DIR=$(mktemp -d -t levee-compose-test.XXXXXX)
ENVF=$DIR/env
umask 077
{
  echo "COMPOSE_PROJECT_NAME=$PROJECT"
  echo "LEVEE_TOKEN_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  echo "LEVEE_ADMIN_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  echo "LEVEE_GATE_PORT=$PORT"
  echo "LEVEE_OPS_PORT=$((PORT + 2))"
} >"$ENVF"
umask 022

# shellcheck source=scripts/lib/compose.sh
. scripts/lib/compose.sh
compose_certs "$DIR/certs" "$ENVF" >/dev/null
CLUSTER_NAME=compose-test
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
compose() { compose_tool --env-file "$ENVF" -p "$PROJECT" "$@"; }
die() {
  echo "compose-test: FAIL: $*" >&2
  exit 1
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ $rc -ne 0 ]; then
    compose logs --no-color --tail 30 >"$DIR/compose.log" 2>&1 || true
    echo "compose-test: logs in $DIR/compose.log" >&2
  fi
  compose down -v --remove-orphans >/dev/null 2>&1 || true
  rm -rf "$DIR/certs"
  echo "compose-test: project $PROJECT removed; run file and report in $DIR"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ports_free -h "set COMPOSE_TEST_PORT" "$PORT" $((PORT + 2))
echo "compose-test: building the images"
GO=${GO:-go} ./scripts/compose.sh images
mkdir -p bin
CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/loadtest

echo "compose-test: up as $PROJECT"
compose up -d >/dev/null
gate=$(compose ps -q gate)
health() { docker inspect -f '{{.State.Health.Status}}' "$1" 2>/dev/null || echo missing; }
deadline=$((SECONDS + 60))
until [ "$(health "$gate")" = healthy ]; do
  [ $SECONDS -lt $deadline ] || die "the gate did not become healthy in 60 s"
  sleep 0.5
done
echo "compose-test: healthy; scripts/compose-test.yaml through wss://localhost:$PORT (battle-1 killed at 15 s)"

secret=$(grep '^LEVEE_TOKEN_SECRET=' "$ENVF" | cut -d= -f2)
rc=0
bin/loadtest run scripts/compose-test.yaml -gate-urls "wss://localhost:$PORT/ws" -ca-file "$DIR/certs/ca.crt" \
  -token-secret "$secret" -metrics "gate=https://localhost:$((PORT + 2))/metrics" -faults "docker:$PROJECT" -progress off \
  -out "$DIR/run.ndjson" -html "$DIR/report.html" || rc=$?
case $rc in
0) echo "compose-test: PASS" ;;
99) die "a threshold failed (above)" ;;
*) die "the load test could not run (exit $rc)" ;;
esac
compose down -v --remove-orphans >/dev/null 2>&1 || true
COMPOSE_TEST_IMAGES_BUILT=1 GO=${GO:-go} ./scripts/compose-test-postgres.sh
