#!/usr/bin/env bash
# Makes sure promtool is installed for the rule tests (make rules-test):
# installs Debian's prometheus package, which carries promtool, when it is
# not on PATH, then prints the version. Idempotent; prints only the version
# when promtool is already there. Needs root (or sudo) only when it has to
# install. The package also brings a prometheus server with a service unit:
# the install does not start it (scripts/lib/apt.sh), and a server systemd
# started anyway is stopped, so nothing of it keeps running.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"

bin=$(command -v promtool 2>/dev/null || true)
if [[ -z $bin ]]; then
	echo "ensure-promtool: promtool not found, installing Debian's prometheus package" >&2
	apt_install ensure-promtool --no-install-recommends prometheus
	if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
		systemctl disable --now prometheus >/dev/null 2>&1 || sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
	fi
	bin=$(command -v promtool 2>/dev/null || true)
	[[ -n $bin ]] || { echo "ensure-promtool: promtool still not found after install" >&2; exit 1; }
fi
"$bin" --version 2>&1 | head -n 1
