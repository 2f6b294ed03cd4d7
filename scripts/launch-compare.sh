#!/usr/bin/env bash
# Before and after: replays the same launch-day scenario twice against a
# local cluster started for each run (scripts/launch.sh), first with every
# tier's protection off and the gates' line open (no operator timeline),
# then with protection on and the seed's timeline, and writes one report
# that sets them side by side, with both runs' curves on the same plots.
#
# Arguments go to both runs (default: launch -scale 0.1 -speed 5).
# Environment: COMPARE_DIR (a new temp dir), BASE_PORT, LAUNCH_GATES,
# LAUNCH_DATA (tmpfs when /dev/shm is writable, else disk).
# It exits 0 when the protected run passed its thresholds (whatever the
# unprotected one did: it is expected to fail), 99 when it did not.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${COMPARE_DIR:-$(mktemp -d -t levee-compare.XXXXXX)}
[ $# -gt 0 ] || set -- launch -scale 0.1 -speed 5
mkdir -p "$DIR"
# Logic's data on tmpfs in both runs when there is one (see LAUNCH_DATA in
# launch.sh), so the disk's stalls do not decide the comparison.
if [ -z "${LAUNCH_DATA:-}" ]; then
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then export LAUNCH_DATA=tmpfs; else export LAUNCH_DATA=disk; fi
fi
if [ "${LAUNCH_BUILD:-1}" != 0 ]; then
  echo "compare: building bin/"
  CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/gate ./cmd/logic ./cmd/battle ./cmd/loadtest
fi
set +e
LAUNCH_BUILD=0 LAUNCH_PROTECTION=off LAUNCH_DIR=$DIR/unprotected ./scripts/launch.sh "$@"
off=$?
LAUNCH_BUILD=0 LAUNCH_PROTECTION=on LAUNCH_DIR=$DIR/protected ./scripts/launch.sh "$@"
on=$?
set -e
echo
echo "compare: unprotected exited $off, protected exited $on"
bin/loadtest compare -html "$DIR/compare.html" "$DIR/unprotected/run.ndjson" "$DIR/protected/run.ndjson" | tee "$DIR/compare.txt"
echo "compare: side by side in $DIR/compare.txt and $DIR/compare.html"
[ "$on" = 0 ] || exit 99
