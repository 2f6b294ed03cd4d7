#!/usr/bin/env bash
# Makes sure promtool is installed for the rule tests (make rules-test):
# installs Debian's prometheus package, which carries promtool, when it is
# not on PATH, then prints the version. Idempotent; prints only the version
# when promtool is already there. Needs root (or sudo) only when it has to
# install. The package also brings a prometheus server with a service unit:
# the install is told not to start it (policy-rc.d), and a server it started
# anyway is stopped, so nothing of it keeps running.
set -euo pipefail

bin=$(command -v promtool 2>/dev/null || true)
if [[ -z $bin ]]; then
	echo "ensure-promtool: promtool not found, installing Debian's prometheus package" >&2
	sudo=""
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null || { echo "ensure-promtool: need root or sudo to install prometheus" >&2; exit 1; }
		sudo="sudo"
	fi
	export DEBIAN_FRONTEND=noninteractive
	log=$(mktemp)
	trap 'rm -f "$log"' EXIT
	# invoke-rc.d asks /usr/sbin/policy-rc.d whether to start a service;
	# exit 101 says no. One is put there for the install only, when there is
	# none already.
	policy=/usr/sbin/policy-rc.d
	own_policy=0
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
		$sudo chmod 755 "$policy"
		own_policy=1
	fi
	ok=1
	# apt's chatter goes to a log that is shown only when it fails.
	if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends prometheus; } >"$log" 2>&1; then
		ok=0
	fi
	if [[ $own_policy -eq 1 ]]; then
		$sudo rm -f "$policy"
	fi
	if [[ $ok -eq 0 ]]; then
		cat "$log" >&2
		echo "ensure-promtool: installing prometheus failed" >&2
		exit 1
	fi
	# Where systemd runs, the unit may still have been enabled and started.
	if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
		$sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
	fi
	bin=$(command -v promtool 2>/dev/null || true)
	[[ -n $bin ]] || { echo "ensure-promtool: promtool still not found after install" >&2; exit 1; }
fi
"$bin" --version 2>&1 | head -n 1
