#!/usr/bin/env bash
# Makes sure the Debian packages make k8s-test needs are installed
# (openssl, curl, and ss from iproute2), like ensure-chromium.sh does for
# chromium (scripts/lib/apt.sh). Idempotent; needs root (or sudo) only when it has to install.
# (etcd is not among them: Debian's is 3.4.23, older than the 3.4.31 that
# kube-apiserver 1.36 needs for watch progress requests; without them the
# 1.36 clients' watch-lists fail and back off, and kwok and the controllers
# stall for up to 30 s. make k8s-tools builds the etcd Kubernetes requires.)
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"

declare -A pkg=([openssl]=openssl [curl]=curl [ss]=iproute2)
missing=()
for cmd in "${!pkg[@]}"; do
	command -v "$cmd" >/dev/null || missing+=("${pkg[$cmd]}")
done
((${#missing[@]})) || exit 0
echo "ensure-k8s-test-deps: installing Debian's ${missing[*]}" >&2
apt_install ensure-k8s-test-deps "${missing[@]}"
