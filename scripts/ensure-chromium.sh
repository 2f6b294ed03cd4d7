#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is installed for the browser test
# (e2e/browser_test.go): installs Debian's chromium package when neither
# chromium nor chromium-browser is on PATH, then prints the version.
# Idempotent; prints only the version when Chromium is already there.
# Needs root (or sudo) only when it has to install.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"

find_chromium() {
	command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null || true
}

bin=$(find_chromium)
if [[ -z $bin ]]; then
	echo "ensure-chromium: chromium not found, installing Debian's chromium package" >&2
	apt_install ensure-chromium chromium
	bin=$(find_chromium)
	[[ -n $bin ]] || { echo "ensure-chromium: chromium still not found after install" >&2; exit 1; }
fi
# Chromium refuses to run as root without --no-sandbox, even for --version
# on some builds; the flag is harmless here.
"$bin" --no-sandbox --version 2>/dev/null || "$bin" --version
