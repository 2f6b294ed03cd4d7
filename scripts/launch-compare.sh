#!/usr/bin/env bash
# Before and after, sized to the machine: measures the local cluster's
# capacity first (`loadtest capacity` on the scenario's action mix, with
# protection on: scripts/launch.sh LAUNCH_COMMAND=capacity), then replays
# the same launch day twice against a cluster started for each run
# (scripts/launch.sh), scaled so that its peak offered load is a stated
# multiple of that capacity (`--set capacity=C --set offered=X`: the load
# tool sizes the players), first with every tier's protection off and the
# gates' line open (no operator timeline), then with protection on and the
# seed's timeline, and writes one report that sets them side by side, with
# both runs' curves on the same plots and the capacity and the multiple in
# its header. A quiet machine and a busy one then get the same test: X
# times what that machine's cluster serves.
#
# Arguments go to both runs after the sizing (e.g. --set players.json=0).
# Environment: COMPARE_SCENARIO (launch: a preset or a file), COMPARE_OFFERED
# (3: the peak offered load as a multiple of the capacity), COMPARE_SPEED
# (10), COMPARE_CAPACITY (skip the measurement and use this many
# requests/s), COMPARE_DIR (a new temp dir), BASE_PORT, LAUNCH_GATES (2:
# 16,000 players per gate, so up to about 32,000 players: a capacity of
# 2,300 requests/s at 3 x and speed 10), LAUNCH_DATA (tmpfs when /dev/shm
# is writable, else disk).
# It exits 0 when the comparison shows what it is for: the protected run
# passed its thresholds and the unprotected one failed them; 99 when it
# does not (either way round), 1 when the capacity could not be measured.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${COMPARE_DIR:-$(mktemp -d -t levee-compare.XXXXXX)}
SCENARIO=${COMPARE_SCENARIO:-launch}
OFFERED=${COMPARE_OFFERED:-3}
SPEED=${COMPARE_SPEED:-10}
export LAUNCH_GATES=${LAUNCH_GATES:-2}
mkdir -p "$DIR"
# Logic's data on tmpfs in every run when there is one (see LAUNCH_DATA in
# launch.sh), so the disk's stalls do not decide the comparison.
if [ -z "${LAUNCH_DATA:-}" ]; then
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then export LAUNCH_DATA=tmpfs; else export LAUNCH_DATA=disk; fi
fi
if [ "${LAUNCH_BUILD:-1}" != 0 ]; then
  echo "compare: building bin/"
  CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/gate ./cmd/logic ./cmd/battle ./cmd/loadtest
fi
if [ -n "${COMPARE_CAPACITY:-}" ]; then
  CAP=$COMPARE_CAPACITY
  echo "compare: capacity $CAP requests/s (COMPARE_CAPACITY)"
else
  echo "compare: measuring the capacity of $SCENARIO's mix (protection on)"
  LAUNCH_BUILD=0 LAUNCH_COMMAND=capacity LAUNCH_PROTECTION=on LAUNCH_DIR=$DIR/capacity ./scripts/launch.sh "$SCENARIO" ||
    { echo "compare: the capacity could not be measured (see $DIR/capacity)" >&2; exit 1; }
  CAP=$(<"$DIR/capacity/capacity")
  echo "compare: capacity $CAP requests/s (measured)"
fi
args=("$SCENARIO" -speed "$SPEED" --set "capacity=$CAP" --set "offered=$OFFERED" "$@")
echo "compare: both runs offer $OFFERED x $CAP requests/s at the peak: loadtest run ${args[*]}"
set +e
LAUNCH_BUILD=0 LAUNCH_PROTECTION=off LAUNCH_DIR=$DIR/unprotected ./scripts/launch.sh "${args[@]}"
off=$?
LAUNCH_BUILD=0 LAUNCH_PROTECTION=on LAUNCH_DIR=$DIR/protected ./scripts/launch.sh "${args[@]}"
on=$?
set -e
echo
bin/loadtest compare -html "$DIR/compare.html" "$DIR/unprotected/run.ndjson" "$DIR/protected/run.ndjson" | tee "$DIR/compare.txt"
echo "compare: side by side in $DIR/compare.txt and $DIR/compare.html"
echo "compare: capacity $CAP requests/s, peak offered $OFFERED x capacity; unprotected exited $off, protected exited $on (0 passed, 99 a threshold failed)"
if [ "$on" = 0 ] && [ "$off" = 99 ]; then
  echo "compare: PASS: the unprotected run failed its thresholds, the protected one passed"
else
  echo "compare: FAIL: the comparison wants the unprotected run failing its thresholds (exit 99) and the protected one passing (exit 0)" >&2
  exit 99
fi
