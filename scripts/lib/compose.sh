# shellcheck shell=bash
# The compose tool, whichever is installed: `docker compose` (v2) or
# `docker-compose` (v1.29+), and the cluster's certificates. Sourced by scripts/compose.sh,
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

# compose_certs DIR ENVFILE [EDGE_NAMES]
#   The compose cluster's certificates (make up, compose-test, drills):
#   when DIR has no ca.crt (or COMPOSE_CERTS_RENEW=1), `levee-certs -out
#   DIR -group-readable -edge-names gate,EDGE_NAMES` mints the role pairs
#   and the edge pair, and the CA when there is none (an existing CA is
#   kept: see docs/deploying.md). Then each
#   container's directory DIR/mount/<service>/ gets only the files it needs
#   (docker-compose.yml mounts the directory read-only at /certs, so that a
#   file replaced in it is seen in the container; a bind mount of a single
#   file keeps the old inode):
#     gate    ca.crt gate.* edge.* ops.*  (ops.*: the healthcheck's identity)
#     logic   ca.crt logic.* ops.*
#     battle  ca.crt battle.* ops.*
#     client  ca.crt                      (the loadtest service)
#   Keys are 0640 with the caller's group, which the containers (uid 65532)
#   get through group_add: LEVEE_CERTS_DIR and LEVEE_CERTS_GID are appended
#   to ENVFILE when it does not set them yet. Re-run it after renewing the
#   files in DIR (scripts/compose.sh certs): the tiers reload them.
compose_certs() {
  local dir=$1 envf=$2 extra=${3:-} svc f
  if [ ! -f "$dir/ca.crt" ] || [ "${COMPOSE_CERTS_RENEW:-0}" = 1 ]; then
    ${GO:-go} run ./cmd/levee-certs -out "$dir" -group-readable -edge-names "gate${extra:+,$extra}"
  fi
  for svc in gate logic battle client; do
    local files=(ca.crt)
    case $svc in
    gate) files+=(gate.crt gate.key edge.crt edge.key ops.crt ops.key) ;;
    logic | battle) files+=("$svc.crt" "$svc.key" ops.crt ops.key) ;;
    esac
    mkdir -p "$dir/mount/$svc"
    chmod 0750 "$dir/mount/$svc"
    for f in "${files[@]}"; do
      # a copy renamed into place: a tier reloading it never reads half a file
      cp -p "$dir/$f" "$dir/mount/$svc/.$f.tmp"
      mv -f "$dir/mount/$svc/.$f.tmp" "$dir/mount/$svc/$f"
    done
  done
  chmod 0750 "$dir" "$dir/mount"
  local abs
  abs=$(cd "$dir" && pwd)
  grep -q '^LEVEE_CERTS_DIR=' "$envf" || echo "LEVEE_CERTS_DIR=$abs/mount" >>"$envf"
  grep -q '^LEVEE_CERTS_GID=' "$envf" || echo "LEVEE_CERTS_GID=$(id -g)" >>"$envf"
}
