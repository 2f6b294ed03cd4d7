#!/usr/bin/env bash
# Makes sure the PostgreSQL server binaries (initdb, postgres, pg_ctl) are
# installed for the tests that run logic on PostgreSQL (internal/pgtest
# starts a throwaway server from them): installs Debian's postgresql package
# when they are neither on PATH nor under /usr/lib/postgresql/*/bin, then
# prints the version. Idempotent. Needs root (or sudo) only to install.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"

find_initdb() {
	local p
	p=$(command -v initdb 2>/dev/null || true)
	if [[ -z $p ]]; then
		p=$(ls -1d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -1 || true)
	fi
	echo "$p"
}

bin=$(find_initdb)
if [[ -z $bin ]]; then
	echo "ensure-postgres: initdb not found, installing Debian's postgresql package" >&2
	apt_install ensure-postgres postgresql
	bin=$(find_initdb)
	[[ -n $bin ]] || { echo "ensure-postgres: initdb still not found after install" >&2; exit 1; }
fi
"$(dirname "$bin")/postgres" --version
