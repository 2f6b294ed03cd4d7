# shellcheck shell=bash
# The compose tool, whichever is installed: `docker compose` (v2) or
# `docker-compose` (v1.29+). Sourced by scripts/compose.sh,
# scripts/compose-test.sh and scripts/drills.sh; it only defines things.
#
#   compose_tool ARGS...   run it with ARGS (exit 1 with a message when
#                          neither is installed)

compose_tool() {
  if docker compose version >/dev/null 2>&1; then
    docker compose "$@"
  elif command -v docker-compose >/dev/null 2>&1; then
    docker-compose "$@"
  else
    echo "compose: neither 'docker compose' nor 'docker-compose' is installed" >&2
    exit 1
  fi
}
