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
#                               is pulled; no buildx needed), levee/postgres
#                               too (scripts/postgres-image.sh, from this
#                               machine's Debian PostgreSQL 15)
#   scripts/compose.sh up|down  `docker compose` (v2) or `docker-compose`
#                               (v1.29+), whichever is installed; up writes
#                               .env and .certs/ first when missing; down
#                               also removes the volumes (logic's data and
#                               PostgreSQL's), and keeps .env and .certs/
#   scripts/compose.sh up-postgres
#                               the profile postgres alone: PostgreSQL, three
#                               logic on it and gate-pg (127.0.0.1:8090), with
#                               battle; not the default gate and logic
# Environment: COMPOSE_PROJECT_NAME (levee), TAG (dev), GO (go),
# LEVEE_EDGE_NAMES (extra names of the gate's wss certificate, comma-separated),
# LEVEE_POSTGRES_IMAGE (levee/postgres:dev; postgres:15 with a registry: then
# up-postgres does not build it).
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${TAG:-dev}
BINS=(gate logic battle loadtest)
# The project name is in .env too, so that plain `docker compose` agrees.
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-levee}

# shellcheck source=scripts/lib/compose.sh
. scripts/lib/compose.sh
compose() { compose_tool "$@"; }

# The profile postgres' services, which up-postgres starts.
PG_SERVICES=(postgres logic-pg-1 logic-pg-2 logic-pg-3 gate-pg)

random_hex() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

write_env() {
  if [ -f .env ]; then
    # A .env from before the profile postgres gets its password added.
    if ! grep -q '^LEVEE_POSTGRES_PASSWORD=' .env; then
      echo "LEVEE_POSTGRES_PASSWORD=$(random_hex)" >>.env
      echo "compose: added LEVEE_POSTGRES_PASSWORD to .env"
    fi
    return
  fi
  local old
  old=$(umask)
  umask 077
  {
    echo "# Secrets of the compose cluster, made by scripts/compose.sh (never committed)."
    echo "COMPOSE_PROJECT_NAME=levee"
    echo "LEVEE_TOKEN_SECRET=$(random_hex)"
    echo "LEVEE_ADMIN_TOKEN=$(random_hex)"
    echo "LEVEE_POSTGRES_PASSWORD=$(random_hex)"
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
  TAG=$TAG GO=${GO:-go} ./scripts/postgres-image.sh
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
up-postgres)
  certs
  for b in "${BINS[@]}" postgres; do
    [ "$b" != postgres ] || [ "${LEVEE_POSTGRES_IMAGE:-levee/postgres:$TAG}" = "levee/postgres:$TAG" ] || continue
    docker image inspect "levee/$b:$TAG" >/dev/null 2>&1 || build_images
  done
  compose --profile postgres up -d "${PG_SERVICES[@]}"
  compose --profile postgres ps
  ;;
# --profile postgres: so that the profile's containers go too, whichever
# compose is installed.
down) compose --profile postgres down -v --remove-orphans ;;
*)
  echo "usage: scripts/compose.sh env|certs|renew|images|up|up-postgres|down" >&2
  exit 2
  ;;
esac
