#!/usr/bin/env bash
# Builds levee/postgres:$TAG, the compose cluster's PostgreSQL (profile
# postgres), offline: FROM scratch, nothing pulled. Into its build context
# (.images/postgres/, removed at the end) go
#   - Debian's PostgreSQL 15 from this host (scripts/ensure-postgres.sh
#     installs it): postgres, initdb, pg_ctl, pg_isready and psql from
#     /usr/lib/postgresql/15/bin, its modules (/usr/lib/postgresql/15/lib
#     without the LLVM JIT, so jit is off), /usr/share/postgresql/15 (initdb's
#     catalog files) and /usr/share/zoneinfo (Debian's PostgreSQL reads the
#     system's time zones);
#   - every shared library those need, as ldd lists them, at the same path;
#   - /bin/sh (the host's dash): initdb and pg_ctl start their children
#     through popen() and system(), which run /bin/sh -c. Nothing else uses it;
#   - /entrypoint, cmd/levee-pg-entrypoint built static (the official
#     image's variables; see its doc);
#   - /etc/passwd and /etc/group with postgres as uid/gid 999 (as in the
#     official image), whose are /var/lib/postgresql/data and
#     /var/run/postgresql (the Unix socket's directory).
# The image runs as 999:999; docker-compose.yml mounts a named volume on
# PGDATA, which takes the directory's owner at its first use. Who has a
# registry can run postgres:15 instead (LEVEE_POSTGRES_IMAGE=postgres:15).
#
# Environment: TAG (dev), GO (go), PG_VERSION (15).
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${TAG:-dev}
PG=${PG_VERSION:-15}
bin=/usr/lib/postgresql/$PG/bin
lib=/usr/lib/postgresql/$PG/lib
share=/usr/share/postgresql/$PG
ctx=.images/postgres
root=$ctx/rootfs

./scripts/ensure-postgres.sh >/dev/null
for p in postgres initdb pg_ctl pg_isready psql; do
	[[ -x $bin/$p ]] || { echo "postgres-image: $bin/$p missing (Debian's postgresql-$PG)" >&2; exit 1; }
done
[[ -d $share && -d $lib ]] || { echo "postgres-image: $share or $lib missing" >&2; exit 1; }

rm -rf "$ctx"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$root$bin" "$root$lib" "$root$(dirname "$share")" "$root/etc" "$root/bin" "$root/tmp" \
	"$ctx/owned/var/lib/postgresql/data" "$ctx/owned/var/run/postgresql"
chmod 1777 "$root/tmp"
chmod 0700 "$ctx/owned/var/lib/postgresql/data"
# 3777 as in the official image: a tmpfs mounted there (read_only
# containers) takes the mode but not the owner.
chmod 3777 "$ctx/owned/var/run/postgresql"

for p in postgres initdb pg_ctl pg_isready psql; do
	cp -L "$bin/$p" "$root$bin/"
done
# The modules initdb and the server load (plpgsql, dict_snowball, the
# encoding conversions...) and the contrib ones; not llvmjit (libLLVM).
(cd "$lib" && find . -maxdepth 1 -name '*.so' ! -name 'llvmjit*' -print0) |
	while IFS= read -r -d '' f; do cp -L "$lib/$f" "$root$lib/"; done
cp -a "$share" "$root$(dirname "$share")/"
rm -rf "$root$share/man"
cp -a /usr/share/zoneinfo "$root/usr/share/"
cp -L /bin/sh "$root/bin/sh"

# Every library of every ELF file copied, at the path the loader found it.
libs() {
	find "$root" -type f \( -perm -u+x -o -name '*.so' \) -print0 |
		xargs -0 -r ldd 2>/dev/null |
		awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $2 ~ /^\(/ {print $1}' | sort -u
}
n=0
for l in $(libs); do
	mkdir -p "$root$(dirname "$l")"
	cp -L "$l" "$root$l"
	n=$((n + 1))
done
# /lib64 is where the binaries' ELF interpreter is; on a merged-/usr host
# ldd lists the rest under /lib, which the image keeps as a real directory.
[[ -e $root/lib64/ld-linux-x86-64.so.2 || $(uname -m) != x86_64 ]] ||
	{ echo "postgres-image: the dynamic loader was not found by ldd" >&2; exit 1; }

cat >"$root/etc/passwd" <<-'EOF'
	root:x:0:0:root:/root:/sbin/nologin
	postgres:x:999:999:PostgreSQL administrator:/var/lib/postgresql:/sbin/nologin
EOF
cat >"$root/etc/group" <<-'EOF'
	root:x:0:
	postgres:x:999:
EOF
echo 'passwd: files
group: files
hosts: files dns' >"$root/etc/nsswitch.conf"

CGO_ENABLED=0 ${GO:-go} build -trimpath -ldflags='-s -w' -o "$root/entrypoint" ./cmd/levee-pg-entrypoint

if ! out=$(DOCKER_BUILDKIT=0 docker build -q -t "levee/postgres:$TAG" -f deploy/docker/postgres.Dockerfile "$ctx" 2>&1); then
	echo "$out" >&2
	exit 1
fi
echo "postgres-image: built levee/postgres:$TAG ($("$bin/postgres" --version | sed 's/^postgres (PostgreSQL) //'), $n shared libraries, $(docker image inspect -f '{{.Size}}' "levee/postgres:$TAG") bytes)"
