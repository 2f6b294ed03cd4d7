#!/usr/bin/env bash
# `make demo`: replays the seed's launch day (the `launch` preset: 200 ->
# 5,000 -> 30,000 -> 80,000 players over 10 minutes, the line queueing at
# T-5, 1,000 per 10 s at T-0, faster at T+5 if healthy, open at T+15) at a
# tenth of its size (8,000 players) and five times its speed against a
# local cluster (1 gate, 1 logic with 8 shards, 2 battle, processes on
# loopback), prints the per-minute table and the thresholds, writes the
# HTML report and says where it is, and stops everything it started (also
# on Ctrl-C). About 5 minutes on 2 cores.
#
# Environment: DEMO_SCALE (0.1), DEMO_SPEED (5), DEMO_DIR (a new temp dir),
# LAUNCH_DATA (tmpfs when /dev/shm is writable, else disk),
# BASE_PORT (8080), DEMO_SCENARIO (launch: a preset or a file), and
# DEMO_SET (space-separated PATH=VALUE scenario overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
args=("${DEMO_SCENARIO:-launch}" -scale "${DEMO_SCALE:-0.1}" -speed "${DEMO_SPEED:-5}")
for kv in ${DEMO_SET:-}; do args+=(-set "$kv"); done
export LAUNCH_DIR=${DEMO_DIR:-$(mktemp -d -t levee-demo.XXXXXX)}
export LAUNCH_BUILD=${LAUNCH_BUILD:-0} # make demo has built bin/
# Logic's data on tmpfs when there is one: see LAUNCH_DATA in launch.sh.
if [ -z "${LAUNCH_DATA:-}" ]; then
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then export LAUNCH_DATA=tmpfs; else export LAUNCH_DATA=disk; fi
fi
exec ./scripts/launch.sh "${args[@]}"
