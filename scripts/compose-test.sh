#!/usr/bin/env bash
# The compose test (`make compose-test`, run by CI after `make test`):
# builds the images, brings the cluster of docker-compose.yml up under a
# project name of its own (its own network, volume and ports), drives a
# short load through the gate's published port (scripts/compose-test.yaml),
# SIGKILLs one battle container in the middle, and checks that every
# request got exactly one reply, that the cluster served requests in every
# second from 5 s after the kill (it reports the seconds that served none),
# and that the killed container came back healthy. It
# brings the project down and removes what it created, also when it fails.
#
# Environment: COMPOSE_TEST_PORT (28080: the gate's player port; +2 its
# ops port), KILL_AFTER (15: seconds into the load), GO.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${COMPOSE_TEST_PORT:-28080}
KILL_AFTER=${KILL_AFTER:-15}
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
  echo "compose-test: project $PROJECT removed"
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
battle=$(compose ps -q battle-1)
health() { docker inspect -f '{{.State.Health.Status}}' "$1" 2>/dev/null || echo missing; }
deadline=$((SECONDS + 60))
until [ "$(health "$gate")" = healthy ]; do
  [ $SECONDS -lt $deadline ] || die "the gate did not become healthy in 60 s"
  sleep 0.5
done
echo "compose-test: healthy; load through 127.0.0.1:$PORT for 40 s, battle-1 killed after ${KILL_AFTER} s"

secret=$(grep '^LEVEE_TOKEN_SECRET=' "$ENVF" | cut -d= -f2)
bin/loadtest run scripts/compose-test.yaml -gate-urls "ws://127.0.0.1:$PORT/ws" -token-secret "$secret" \
  -metrics "gate=http://127.0.0.1:$((PORT + 2))/metrics" -out "$DIR/run.ndjson" -progress off >"$DIR/load.txt" 2>&1 &
load=$!
sleep "$KILL_AFTER"
# SIGKILL its process from the host, as a crash would: `docker kill` counts
# as stopping it by hand, and Docker's restart policy skips those.
pid=$(docker inspect -f '{{.State.Pid}}' "$battle")
restarts0=$(docker inspect -f '{{.RestartCount}}' "$battle")
[ "$pid" -gt 0 ] || die "battle-1 has no process"
kill -KILL "$pid" 2>/dev/null || sudo -n kill -KILL "$pid" || die "cannot signal battle-1's process $pid"
killed_at=$SECONDS
echo "compose-test: killed battle-1"
back=
deadline=$((SECONDS + 60))
while [ $SECONDS -lt $deadline ]; do
  # Back means restarted by Docker (its restart policy) and healthy again.
  if [ "$(docker inspect -f '{{.RestartCount}}' "$battle")" -gt "$restarts0" ] && [ "$(health "$battle")" = healthy ]; then
    back=$((SECONDS - killed_at))
    break
  fi
  sleep 0.5
done
rc=0
wait "$load" || rc=$?
cat "$DIR/load.txt"
[ -n "$back" ] || die "battle-1 did not come back healthy within 60 s of the kill"
restarts=$(docker inspect -f '{{.RestartCount}}' "$battle")
echo "compose-test: battle-1 back healthy ${back} s after the kill (restarts: $restarts)"
[ "$rc" = 0 ] || die "the load test's thresholds failed (exit $rc): a reply was lost or a player not admitted"

# The cluster kept serving: after the kill, requests in flight on the dead
# container wait until its connections are found dead, so a second or two
# may serve nothing; from 5 s after the kill to the end of the load, every
# second must have served requests. The seconds without any are reported.
gaps=$(grep '"type":"point"' "$DIR/run.ndjson" |
  awk -v from="$KILL_AFTER" -v to=39 -F'"t":' '{split($2, a, ","); t = a[1] + 0; ok = 0
    if (match($0, /"ok":[0-9]+/)) ok = substr($0, RSTART + 5, RLENGTH - 5) + 0
    if (t >= from && t <= to && ok == 0) print t}')
late=$(for t in $gaps; do [ "$t" -gt $((KILL_AFTER + 5)) ] && echo "$t"; done || true)
echo "compose-test: seconds after the kill that served nothing: ${gaps:-none} (the kill was in second $KILL_AFTER)"
[ -z "$late" ] || die "no request was served in second(s) $(echo $late), more than 5 s after the kill"
echo "compose-test: PASS: every request got one reply, serving resumed within 5 s of the kill, battle-1 came back"
