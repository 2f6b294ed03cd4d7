#!/usr/bin/env bash
# Helpers for docker-compose.yml (`make images`, `make up`, `make down`):
#   scripts/compose.sh env      write .env with random secrets when it is missing
#   scripts/compose.sh certs    write .certs/ (a local CA and each service's
#                               certificate, cmd/levee-certs) when it is
#                               missing, and each container's .certs/mount/
#   scripts/compose.sh renew    new role and edge certificates from the same
#                               CA, copied into .certs/mount/: the running
#                               tiers pick them up without a restart
#   scripts/compose.sh images   build the static binaries and the images
#                               FROM scratch with the classic builder (nothing
#                               is pulled; no buildx needed)
#   scripts/compose.sh up|down  `docker compose` (v2) or `docker-compose`
#                               (v1.29+), whichever is installed; up writes
#                               .env and .certs/ first when missing; down
#                               also removes the volume (logic's data), and
#                               keeps .env and .certs/
# Environment: COMPOSE_PROJECT_NAME (levee), TAG (dev), GO (go),
# LEVEE_EDGE_NAMES (extra names of the gate's wss certificate, comma-separated).
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${TAG:-dev}
BINS=(gate logic battle loadtest)
# The project name is in .env too, so that plain `docker compose` agrees.
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-levee}

# shellcheck source=scripts/lib/compose.sh
. scripts/lib/compose.sh
compose() { compose_tool "$@"; }

write_env() {
  if [ -f .env ]; then
    return
  fi
  local old
  old=$(umask)
  umask 077
  {
    echo "# Secrets of the compose cluster, made by scripts/compose.sh (never committed)."
    echo "COMPOSE_PROJECT_NAME=levee"
    echo "LEVEE_TOKEN_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    echo "LEVEE_ADMIN_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  } >.env
  umask "$old"
  echo "compose: wrote .env with random secrets"
}

build_images() {
  write_env
  rm -rf .images
  for b in "${BINS[@]}"; do
    mkdir -p ".images/$b/data"
    CGO_ENABLED=0 ${GO:-go} build -trimpath -ldflags='-s -w' -o ".images/$b/$b" "./cmd/$b"
    local out
    if ! out=$(DOCKER_BUILDKIT=0 docker build -q -t "levee/$b:$TAG" --build-arg "BIN=$b" -f deploy/docker/Dockerfile ".images/$b" 2>&1); then
      echo "$out" >&2
      exit 1
    fi
    echo "compose: built levee/$b:$TAG ($(docker image inspect -f '{{.Size}}' "levee/$b:$TAG") bytes)"
  done
  rm -rf .images
}

certs() {
  write_env
  compose_certs .certs .env "${LEVEE_EDGE_NAMES:-}"
}

case ${1:-} in
env) write_env ;;
certs) certs ;;
renew) COMPOSE_CERTS_RENEW=1 certs ;;
images) build_images ;;
up)
  certs
  for b in "${BINS[@]}"; do
    docker image inspect "levee/$b:$TAG" >/dev/null 2>&1 || build_images
  done
  compose up -d
  compose ps
  ;;
down) compose down -v --remove-orphans ;;
*)
  echo "usage: scripts/compose.sh env|certs|renew|images|up|down" >&2
  exit 2
  ;;
esac
