#!/usr/bin/env bash
# Every fuzz target of the module, found with `go test -list '^Fuzz'` in each
# package that has tests, so that a new target cannot be forgotten.
#
#   scripts/fuzz.sh seeds       check that every target has a seed corpus
#                               (f.Add or testdata/fuzz) and that its seeds
#                               pass; `make test` runs this
#   scripts/fuzz.sh fuzz [TIME] fuzz each target for TIME (FUZZTIME, 20s);
#                               `make fuzz` runs this
#
# Environment: GO (go).
set -euo pipefail
GO=${GO:-go}
mode=${1:-seeds}
fuzztime=${2:-${FUZZTIME:-20s}}

# targets prints "package target" for every fuzz target.
targets() {
	local pkg
	for pkg in $("$GO" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do
		"$GO" test -list '^Fuzz' "$pkg" | grep '^Fuzz' | sed "s|^|$pkg |" || true
	done
}

list=$(targets)
if [[ -z $list ]]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi
case $mode in
seeds)
	status=0
	while read -r pkg target; do
		# go test runs a target's seed corpus as subtests: FuzzX/seed#0 for
		# f.Add, FuzzX/<name> for testdata/fuzz/FuzzX/<name>.
		if ! out=$("$GO" test -count=1 -run "^${target}\$" -v "$pkg" 2>&1); then
			echo "$out" >&2
			echo "FAIL: $pkg $target: its seeds fail" >&2
			status=1
		elif ! grep -q -- "--- PASS: ${target}/" <<<"$out"; then
			echo "FAIL: $pkg $target has no seed corpus (f.Add or testdata/fuzz/$target)" >&2
			status=1
		else
			echo "ok   $pkg $target: $(grep -c -- "--- PASS: ${target}/" <<<"$out") seeds"
		fi
	done <<<"$list"
	exit $status
	;;
fuzz)
	while read -r pkg target; do
		echo "== $pkg $target for $fuzztime"
		"$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done <<<"$list"
	;;
*)
	echo "usage: scripts/fuzz.sh seeds | fuzz [TIME]" >&2
	exit 2
	;;
esac
