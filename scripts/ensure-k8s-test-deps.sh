#!/usr/bin/env bash
# Makes sure the Debian packages make k8s-test needs are installed (jq,
# openssl, curl, and ss from iproute2), like ensure-chromium.sh does for
# chromium. Idempotent; needs root (or sudo) only when it has to install.
# (etcd is not among them: Debian's is 3.4.23, older than the 3.4.31 that
# kube-apiserver 1.36 needs for watch progress requests; without them the
# 1.36 clients' watch-lists fail and back off, and kwok and the controllers
# stall for up to 30 s. make k8s-tools builds the etcd Kubernetes requires.)
set -euo pipefail

declare -A pkg=([jq]=jq [openssl]=openssl [curl]=curl [ss]=iproute2)
missing=()
for cmd in "${!pkg[@]}"; do
	command -v "$cmd" >/dev/null || missing+=("${pkg[$cmd]}")
done
((${#missing[@]})) || exit 0
echo "ensure-k8s-test-deps: installing Debian's ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null || { echo "ensure-k8s-test-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# apt's chatter goes to a log that is shown only when it fails.
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
	cat "$log" >&2
	echo "ensure-k8s-test-deps: installing ${missing[*]} failed" >&2
	exit 1
fi
