#!/usr/bin/env bash
# Rewrites tools/k8s/go.mod for a Kubernetes and a kwok version:
#   scripts/k8s-tools-pin.sh v1.36.3 v0.8.0
# k8s.io/kubernetes requires every staging module (k8s.io/api, client-go,
# ...) at v0.0.0 and replaces them with its ./staging tree, which a module
# that imports it cannot use; so each gets a replace line to the matching
# v0.x (v1.36.3 -> v0.36.3), taken from the replace block of Kubernetes' own
# go.mod, as Kubernetes documents for its use as a library. etcd's server
# comes at the version Kubernetes' go.mod requires. Then go mod tidy.
set -euo pipefail
k8s=${1:?usage: k8s-tools-pin.sh K8S_VERSION KWOK_VERSION}
kwok=${2:?usage: k8s-tools-pin.sh K8S_VERSION KWOK_VERSION}
GO=${GO:-go}
staging=v0.${k8s#v1.}
dir=$(cd "$(dirname "$0")/../tools/k8s" && pwd)

modfile=$(GOFLAGS=-mod=mod $GO mod download -json "k8s.io/kubernetes@$k8s" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
[[ -f $modfile ]] || { echo "k8s-tools-pin: no go.mod for k8s.io/kubernetes@$k8s" >&2; exit 1; }
mods=$(sed -n '/^replace (/,/^)/p' "$modfile" | awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}')

{
	sed -n '1,/^module /p' "$dir/go.mod"
	echo
	echo "go $(sed -n 's/^go //p' "$modfile")"
	echo
	echo "tool ("
	for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
		echo "	k8s.io/kubernetes/cmd/$c"
	done
	echo "	sigs.k8s.io/kwok/cmd/kwok"
	# etcd at the version Kubernetes' go.mod requires (installed as "server").
	echo "	go.etcd.io/etcd/server/v3"
	echo ")"
	echo
	echo "require ("
	echo "	k8s.io/kubernetes $k8s"
	echo "	sigs.k8s.io/kwok $kwok"
	echo "	$(grep -E '^\s+go.etcd.io/etcd/server/v3 ' "$modfile" | awk '{print $1, $2}')"
	echo ")"
	echo
	echo "replace ("
	for m in $mods; do echo "	$m => $m $staging"; done
	echo ")"
} >"$dir/go.mod.new"
mv "$dir/go.mod.new" "$dir/go.mod"
cd "$dir" && $GO mod tidy
