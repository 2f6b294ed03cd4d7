#!/usr/bin/env bash
# The compose test's profile postgres (run by scripts/compose-test.sh after
# its own load test, or alone: make compose-test-postgres), under a project
# name of its own (its own network, volumes and ports):
#
#   1. always: `up -d postgres` with a random password in the run's env
#      file (as scripts/compose.sh writes LEVEE_POSTGRES_PASSWORD into
#      .env). The container must become healthy (pg_isready over TCP);
#      psql from another container of the project's network must connect as
#      levee with that password (scram-sha-256, the pg_hba line every
#      address takes) and be refused with a wrong one; a row written before
#      a restart of the container must be read after it (the named volume
#      keeps PGDATA, and the image's second start finds its cluster).
#   2. unless COMPOSE_TEST_POSTGRES=0: the rest of the profile,
#      logic-pg-1..3 and gate-pg, and scripts/compose-test-postgres.yaml through gate-pg's published port:
#      load over wss with logic-pg-2 SIGKILLed in the middle; every request
#      exactly one reply (0 lost), serving resumed, logic-pg-2 back.
#
# It brings the project down and removes its containers, network and
# volumes, also when it fails.
#
# Environment: COMPOSE_TEST_POSTGRES (1; 0: PostgreSQL alone, no load),
# COMPOSE_TEST_PG_PORT (28090: gate-pg's player port; +2 its ops port), COMPOSE_TEST_IMAGES_BUILT=1
# (skip building the images: compose-test.sh has), LEVEE_POSTGRES_IMAGE
# (levee/postgres:dev; postgres:15 with a registry), GO.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${COMPOSE_TEST_PG_PORT:-28090}
PROJECT=levee-pgtest-$$
DIR=$(mktemp -d -t levee-compose-test-pg.XXXXXX)
ENVF=$DIR/env
PASSWORD=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
umask 077
{
  echo "COMPOSE_PROJECT_NAME=$PROJECT"
  echo "LEVEE_TOKEN_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  echo "LEVEE_ADMIN_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  echo "LEVEE_POSTGRES_PASSWORD=$PASSWORD"
  # The default gate is never started here; its ports moved all the same.
  echo "LEVEE_GATE_PORT=$((PORT + 4))"
  echo "LEVEE_OPS_PORT=$((PORT + 6))"
  echo "LEVEE_PG_GATE_PORT=$PORT"
  echo "LEVEE_PG_OPS_PORT=$((PORT + 2))"
} >"$ENVF"
umask 022

# shellcheck source=scripts/lib/compose.sh
. scripts/lib/compose.sh
compose_certs "$DIR/certs" "$ENVF" >/dev/null
CLUSTER_NAME=compose-test-postgres
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
compose() { compose_tool --env-file "$ENVF" -p "$PROJECT" --profile postgres "$@"; }
log() { echo "compose-test-postgres: $*"; }
die() {
  echo "compose-test-postgres: FAIL: $*" >&2
  exit 1
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ $rc -ne 0 ]; then
    compose logs --no-color --tail 40 >"$DIR/compose.log" 2>&1 || true
    echo "compose-test-postgres: logs in $DIR/compose.log" >&2
  fi
  compose down -v --remove-orphans >/dev/null 2>&1 || true
  rm -rf "$DIR/certs"
  log "project $PROJECT removed; run files in $DIR"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

health() { docker inspect -f '{{.State.Health.Status}}' "$1" 2>/dev/null || echo missing; }
# wait_healthy SERVICE SECONDS
wait_healthy() {
  local id deadline=$((SECONDS + $2))
  id=$(compose ps -q "$1")
  [ -n "$id" ] || die "no container for $1"
  until [ "$(health "$id")" = healthy ]; do
    [ $SECONDS -lt $deadline ] || die "$1 did not become healthy in $2 s (health: $(health "$id"))"
    sleep 0.5
  done
}
# psql_as PASSWORD SQL: psql in a one-off container of the postgres service
# on the project's network, over TCP to the service's name.
psql_as() {
  compose run --rm --no-deps -T -e "PGPASSWORD=$1" --entrypoint psql postgres \
    -h postgres -p 5432 -U levee -d levee -v ON_ERROR_STOP=1 -Atc "$2"
}

if [ "${COMPOSE_TEST_POSTGRES:-1}" = 1 ]; then
  ports_free -h "set COMPOSE_TEST_PG_PORT" "$PORT" $((PORT + 2))
fi
if [ "${COMPOSE_TEST_IMAGES_BUILT:-0}" != 1 ]; then
  log "building the images"
  GO=${GO:-go} ./scripts/compose.sh images
fi

log "postgres up as $PROJECT ($(compose config | sed -n 's/^ *image: \(.*postgres.*\)$/\1/p' | head -1))"
compose up -d postgres >/dev/null 2>&1 || die "compose up postgres"
wait_healthy postgres 60
out=$(psql_as "$PASSWORD" "select current_user || ' ' || current_database()" 2>&1) || die "psql with the generated password: $out"
[ "$(echo "$out" | tail -n 1)" = "levee levee" ] || die "psql answered $out, want 'levee levee'"
log "healthy; psql from the project network as levee with the generated password: ok"
if out=$(psql_as "not-$PASSWORD" "select 1" 2>&1); then
  die "psql with a wrong password connected: $out"
fi
echo "$out" | grep -q 'password authentication failed' || die "a wrong password failed, but not as a refused password: $out"
log "a wrong password: refused (password authentication failed)"
psql_as "$PASSWORD" "create table compose_test (v text); insert into compose_test values ('$PROJECT')" >/dev/null 2>&1 ||
  die "writing a row"
compose restart postgres >/dev/null 2>&1 || die "compose restart postgres"
wait_healthy postgres 60
out=$(psql_as "$PASSWORD" "select v from compose_test" 2>&1) || die "reading the row after the restart: $out"
[ "$(echo "$out" | tail -n 1)" = "$PROJECT" ] || die "after the restart the row reads $out, want $PROJECT"
log "restarted: the row written before it is still there (volume ${PROJECT}_postgres-data)"

if [ "${COMPOSE_TEST_POSTGRES:-1}" != 1 ]; then
  log "PASS (postgres only: COMPOSE_TEST_POSTGRES=0; unset, it runs the load through 3 logic on it)"
  exit 0
fi

mkdir -p bin
CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/loadtest
log "logic-pg-1..3 and gate-pg up"
compose up -d logic-pg-1 logic-pg-2 logic-pg-3 gate-pg >/dev/null 2>&1 || die "compose up of the profile's logic and gate"
wait_healthy gate-pg 90
log "healthy; scripts/compose-test-postgres.yaml through wss://localhost:$PORT (logic-pg-2 killed at 15 s)"
secret=$(grep '^LEVEE_TOKEN_SECRET=' "$ENVF" | cut -d= -f2)
rc=0
bin/loadtest run scripts/compose-test-postgres.yaml -gate-urls "wss://localhost:$PORT/ws" -ca-file "$DIR/certs/ca.crt" \
  -token-secret "$secret" -metrics "gate=https://localhost:$((PORT + 2))/metrics" -faults "docker:$PROJECT" -progress off \
  -out "$DIR/run.ndjson" -html "$DIR/report.html" || rc=$?
case $rc in
0) log "PASS (postgres, and the load through 3 logic on it)" ;;
99) die "a threshold failed (above)" ;;
*) die "the load test could not run (exit $rc)" ;;
esac
