#!/usr/bin/env bash
# Every fuzz target of the module, found by go test itself in each package
# that has tests (not listed here), so that a new target cannot be forgotten.
#
#   scripts/fuzz.sh seeds       check that every target has a seed corpus
#                               (f.Add or testdata/fuzz) and that its seeds
#                               pass; `make test` runs this
#   scripts/fuzz.sh fuzz [TIME] fuzz each target for TIME (FUZZTIME, 20s);
#                               `make fuzz` runs this
#
# Environment: GO (go).
set -euo pipefail
shopt -s inherit_errexit # a failure inside $(targets) fails the script
GO=${GO:-go}
mode=${1:-seeds}
fuzztime=${2:-${FUZZTIME:-20s}}

# targets prints "package target" for every fuzz target; a package whose
# tests do not build fails it (grep finding no target does not).
targets() {
	local pkg out
	for pkg in $("$GO" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do
		out=$("$GO" test -list '^Fuzz' "$pkg")
		grep '^Fuzz' <<<"$out" | sed "s|^|$pkg |" || [[ $? == 1 ]]
	done
}

case $mode in
seeds)
	# One run of every package's fuzz targets, their seed corpora as
	# subtests (FuzzX/seed#0 for f.Add, FuzzX/<name> for
	# testdata/fuzz/FuzzX/<name>); a target that ran no seed has none.
	# (go test -race ./... runs them again; this run is for the check.)
	out=$("$GO" test -count=1 -run '^Fuzz' -json ./... 2>&1) || {
		grep -v '"Action":"\(run\|pause\|cont\|start\|skip\)"' <<<"$out" | grep -i fail >&2 || echo "$out" >&2
		echo "FAIL: fuzz targets' seeds fail" >&2
		exit 1
	}
	# "package target" of every target, and of every target that passed a seed.
	all=$(sed -n 's/.*"Action":"run","Package":"\([^"]*\)","Test":"\(Fuzz[^"/]*\)".*/\1 \2/p' <<<"$out" | sort -u)
	seeded=$(sed -n 's/.*"Action":"pass","Package":"\([^"]*\)","Test":"\(Fuzz[^"/]*\)\/[^"]*".*/\1 \2/p' <<<"$out" | sort -u)
	if [[ -z $all ]]; then
		echo "fuzz.sh: no fuzz targets found" >&2
		exit 1
	fi
	missing=$(comm -23 <(echo "$all") <(echo "$seeded"))
	if [[ -n $missing ]]; then
		sed 's/^\(.*\) \(.*\)$/FAIL: \1 \2 has no seed corpus (f.Add or testdata\/fuzz\/\2)/' <<<"$missing" >&2
		exit 1
	fi
	echo "fuzz.sh: $(wc -l <<<"$all") fuzz targets, each with its seeds passing"
	;;
fuzz)
	list=$(targets)
	if [[ -z $list ]]; then
		echo "fuzz.sh: no fuzz targets found" >&2
		exit 1
	fi
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
