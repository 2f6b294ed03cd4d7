#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is installed for the browser test
# (e2e/browser_test.go): installs Debian's chromium package when neither
# chromium nor chromium-browser is on PATH, then prints the version.
# Idempotent; prints only the version when Chromium is already there.
# Needs root (or sudo) only when it has to install.
set -euo pipefail

find_chromium() {
	command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null || true
}

bin=$(find_chromium)
if [[ -z $bin ]]; then
	echo "ensure-chromium: chromium not found, installing Debian's chromium package" >&2
	sudo=""
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null || { echo "ensure-chromium: need root or sudo to install chromium" >&2; exit 1; }
		sudo="sudo"
	fi
	export DEBIAN_FRONTEND=noninteractive
	log=$(mktemp)
	trap 'rm -f "$log"' EXIT
	# apt's chatter goes to a log that is shown only when it fails.
	if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq chromium; } >"$log" 2>&1; then
		cat "$log" >&2
		echo "ensure-chromium: installing chromium failed" >&2
		exit 1
	fi
	bin=$(find_chromium)
	[[ -n $bin ]] || { echo "ensure-chromium: chromium still not found after install" >&2; exit 1; }
fi
# Chromium refuses to run as root without --no-sandbox, even for --version
# on some builds; the flag is harmless here.
"$bin" --no-sandbox --version 2>/dev/null || "$bin" --version
